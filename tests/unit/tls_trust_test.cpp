// Where the release binary finds trusted certificates on each distribution.
#include "neuron_cache/net/tls_trust.h"

#include <gtest/gtest.h>

#include <set>

namespace neuron_cache::net {
namespace {

// A machine whose file system holds exactly `files` and `dirs`.
auto machine(std::set<std::string> files, std::set<std::string> dirs) {
  return [files, dirs](const std::string& path, bool folder) {
    return folder ? dirs.count(path) > 0 : files.count(path) > 0;
  };
}

TEST(TlsTrust, DebianAndUbuntuUseTheirBundle) {
  auto paths = choose_trust_paths(
      nullptr, nullptr, machine({"/etc/ssl/certs/ca-certificates.crt"}, {"/etc/ssl/certs"}));
  EXPECT_EQ(paths.file, "/etc/ssl/certs/ca-certificates.crt");
  EXPECT_EQ(paths.dir, "");
}

TEST(TlsTrust, AmazonLinuxAndRhelUseThePkiBundle) {
  // Amazon Linux 2023: /etc/ssl/certs links to /etc/pki/tls/certs, which has no
  // ca-certificates.crt.
  auto paths = choose_trust_paths(nullptr, nullptr,
                                  machine({"/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"},
                                          {"/etc/ssl/certs", "/etc/pki/tls/certs"}));
  EXPECT_EQ(paths.file, "/etc/pki/tls/certs/ca-bundle.crt");
}

TEST(TlsTrust, AlpineUsesCertPem) {
  auto paths = choose_trust_paths(nullptr, nullptr, machine({"/etc/ssl/cert.pem"}, {}));
  EXPECT_EQ(paths.file, "/etc/ssl/cert.pem");
}

TEST(TlsTrust, OnlyAFolderIsUsedAsAFolder) {
  auto paths = choose_trust_paths(nullptr, nullptr, machine({}, {"/etc/pki/tls/certs"}));
  EXPECT_EQ(paths.file, "");
  EXPECT_EQ(paths.dir, "/etc/pki/tls/certs");
}

TEST(TlsTrust, TheEnvironmentWinsAndIsNotCompletedByAGuess) {
  auto debian = machine({"/etc/ssl/certs/ca-certificates.crt"}, {"/etc/ssl/certs"});
  auto file_only = choose_trust_paths("/opt/corp/ca.pem", nullptr, debian);
  EXPECT_EQ(file_only.file, "/opt/corp/ca.pem");
  EXPECT_EQ(file_only.dir, "");
  auto dir_only = choose_trust_paths(nullptr, "/opt/corp/certs", debian);
  EXPECT_EQ(dir_only.file, "");
  EXPECT_EQ(dir_only.dir, "/opt/corp/certs");
  auto empty = choose_trust_paths("", "", debian);
  EXPECT_EQ(empty.file, "/etc/ssl/certs/ca-certificates.crt") << "an empty variable is unset";
}

TEST(TlsTrust, NothingFoundLeavesLibcurlsDefault) {
  auto paths = choose_trust_paths(nullptr, nullptr, machine({}, {}));
  EXPECT_EQ(paths.file, "");
  EXPECT_EQ(paths.dir, "");
}

}  // namespace
}  // namespace neuron_cache::net
