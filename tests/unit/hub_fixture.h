// Runs the test Hub server (tests/hub_server, built as hub-server) for one test: free ports, a
// fresh data folder, stopped in the destructor. Its admin API gives tests the access log and
// fault injection. What the server implements: tests/README.md.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.h"

namespace neuron_cache::testing {

// Tokens of tests/hub_server/example-config.json, the default config: alice (member of org
// "acme") with a write, a read-only and an acme-only write token, and bob (no org).
inline constexpr const char* kHubWriteToken = "hf_alice_write";
inline constexpr const char* kHubReadToken = "hf_alice_read";
inline constexpr const char* kHubAcmeOnlyToken = "hf_alice_acme_only";
inline constexpr const char* kHubBobToken = "hf_bob_write";
// Repos that config creates: public (README.md, registry/entry.json) and private (README.md).
inline constexpr const char* kHubPublicRepo = "acme/public-cache";
inline constexpr const char* kHubPrivateRepo = "acme/private-cache";

// How many access-log entries satisfy `predicate` (for counting requests in tests).
inline size_t count_requests(const nlohmann::json& log,
                             const std::function<bool(const nlohmann::json&)>& predicate) {
  size_t n = 0;
  for (const auto& entry : log) n += predicate(entry) ? 1 : 0;
  return n;
}

// The second request of a regular file's resolve: the Hub redirects it to its own
// /api/resolve-cache/ URL, so every client pays it (budgets count the requests a client chooses).
inline bool is_redirect_hop(const nlohmann::json& entry) {
  return entry["path"].get<std::string>().rfind("/api/resolve-cache/", 0) == 0;
}

class HubServer {
 public:
  // Starts hub-server with `config` (users, tokens, repos) and extra command-line options such
  // as {"--page-size", "2"}; throws with the server's output when it is not ready in 10 s.
  explicit HubServer(const nlohmann::json& config = example_config(),
                     const std::vector<std::string>& extra_args = {});
  ~HubServer();
  HubServer(const HubServer&) = delete;
  HubServer& operator=(const HubServer&) = delete;

  std::string url() const;      // http://127.0.0.1:PORT, the HF_ENDPOINT to give a client
  std::string cdn_url() const;  // where LFS redirects and upload URLs point
  int port() const { return port_; }
  int cdn_port() const { return cdn_port_; }
  const fs::path& data_dir() const { return data_dir_; }

  // Every request so far on both listeners, in arrival order: [{method, path, query, status,
  // authorization, listener, bytes_in, bytes_out, range, fault}] (GET /_admin/log, which first
  // lets requests still being answered finish, for at most 2 s).
  nlohmann::json access_log() const;
  void clear_log() const;
  // Replaces the fault rules (POST /_admin/faults); see tests/README.md for the rule format.
  void set_faults(const nlohmann::json& rules) const;
  void clear_faults() const;
  // The fault rules with their `remaining` counts (GET /_admin/faults).
  nlohmann::json faults() const;

  // What the server printed (stdout and stderr), for failure messages.
  std::string output() const;

  static nlohmann::json example_config();

 private:
  nlohmann::json admin(const std::string& method, const std::string& what,
                       const std::string& body = "") const;

  TempDir dir_;
  fs::path data_dir_;
  pid_t pid_ = -1;
  int port_ = 0;
  int cdn_port_ = 0;
};

// A Hub for pipeline tests: user alice in org acme with a write and a read token, the public
// cache repo `cache_repo` (a README only) and public model repos, each {id, {path: content}}.
nlohmann::json cache_hub_config(
    const std::string& cache_repo,
    const std::vector<std::pair<std::string, std::map<std::string, std::string>>>& models);

// A manifest's compile command running the stand-in compiler (tests/tools/stand-in-export) with
// every placeholder a configuration fills in, quoted for YAML.
std::string stand_in_compile_command();

}  // namespace neuron_cache::testing
