// Where TLS certificates of trusted authorities are: the release binary runs on distributions
// that keep them in different places, and its libcurl only knows Debian's.
#pragma once

#include <functional>
#include <string>

#include "neuron_cache/config/settings.h"

namespace neuron_cache::net {

struct TrustPaths {
  std::string file;  // a PEM bundle (CURLOPT_CAINFO), empty: libcurl's default
  std::string dir;   // a hashed certificate folder (CURLOPT_CAPATH), empty: libcurl's default
};

// The bundle files distributions keep, most common first: Debian/Ubuntu, Fedora/RHEL/Amazon
// Linux, openSUSE, RHEL's extracted bundle, Alpine.
inline constexpr const char* kTrustFiles[] = {
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
};
inline constexpr const char* kTrustDirs[] = {"/etc/ssl/certs", "/etc/pki/tls/certs"};

// SSL_CERT_FILE and SSL_CERT_DIR (OpenSSL's names) when set, else the first bundle file that
// exists, else the first folder. `exists` answers for a regular file (or a folder for dirs).
TrustPaths choose_trust_paths(const char* cert_file_env, const char* cert_dir_env,
                              const std::function<bool(const std::string&, bool)>& exists);

// SSL_CERT_FILE and SSL_CERT_DIR as the front end's Settings read them; call it before the first
// request (cli/context.h and the Action's main do). Without it, the file system alone decides.
void use_trust_settings(const config::Settings& settings);

// The paths for this process, chosen at the first request.
const TrustPaths& trust_paths();

}  // namespace neuron_cache::net
