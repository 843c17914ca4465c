#include "neuron_cache/net/tls_trust.h"

#include <filesystem>
#include <mutex>

namespace neuron_cache::net {

TrustPaths choose_trust_paths(const char* cert_file_env, const char* cert_dir_env,
                              const std::function<bool(const std::string&, bool)>& exists) {
  TrustPaths paths;
  bool file_set = cert_file_env != nullptr && *cert_file_env != '\0';
  bool dir_set = cert_dir_env != nullptr && *cert_dir_env != '\0';
  if (file_set) paths.file = cert_file_env;
  if (dir_set) paths.dir = cert_dir_env;
  // Either variable says where to look: guessing the other could trust what the user excluded.
  if (file_set || dir_set) return paths;
  for (const char* file : kTrustFiles) {
    if (exists(file, false)) {
      paths.file = file;
      return paths;
    }
  }
  for (const char* dir : kTrustDirs) {
    if (exists(dir, true)) {
      paths.dir = dir;
      return paths;
    }
  }
  return paths;
}

namespace {

std::mutex given_mutex;
std::string given_file, given_dir;

}  // namespace

void use_trust_settings(const config::Settings& settings) {
  std::lock_guard lock(given_mutex);
  given_file = settings.ssl_cert_file.value;
  given_dir = settings.ssl_cert_dir.value;
}

const TrustPaths& trust_paths() {
  static const TrustPaths paths = [] {
    std::lock_guard lock(given_mutex);
    return choose_trust_paths(given_file.c_str(), given_dir.c_str(),
                              [](const std::string& path, bool folder) {
                                std::error_code error;
                                return folder ? std::filesystem::is_directory(path, error)
                                              : std::filesystem::is_regular_file(path, error);
                              });
  }();
  return paths;
}

}  // namespace neuron_cache::net
