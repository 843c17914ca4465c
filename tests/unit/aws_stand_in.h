// Runs tests/aws/aws_stand_in.py (IMDSv2, the container endpoint, STS, the SSO portal on
// 127.0.0.1; tests/aws/README.md) for one test, with tests/aws/example-config.json changed by
// the test, and talks to its admin API. Stopped in the destructor.
#pragma once

#include <sys/types.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "test_support.h"

namespace neuron_cache::testing {

class AwsStandIn {
 public:
  // The example config; `change` edits it before the stand-in starts.
  static nlohmann::json example_config();
  explicit AwsStandIn(const nlohmann::json& config = example_config());
  ~AwsStandIn();
  AwsStandIn(const AwsStandIn&) = delete;
  AwsStandIn& operator=(const AwsStandIn&) = delete;

  std::string url() const;  // http://127.0.0.1:PORT
  const nlohmann::json& config() const { return config_; }
  // POST /_admin/fault: `endpoint` ("imds", "container", "sts", "sso") plays `mode`.
  void fault(const std::string& endpoint, const std::string& mode, int times = 0);
  nlohmann::json rotate();  // POST /_admin/rotate: the new credentials per source
  nlohmann::json log() const;
  // Environment for a tool or a resolve_aws_access that reads `source` ("imds", "container",
  // "web_identity", "assume_role", "sso", "process") from this stand-in; files go under `home`.
  std::map<std::string, std::string> env_for(const std::string& source, const fs::path& home) const;

 private:
  nlohmann::json admin(const std::string& method, const std::string& path,
                       const std::string& body = "") const;
  TempDir dir_;
  nlohmann::json config_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace neuron_cache::testing
