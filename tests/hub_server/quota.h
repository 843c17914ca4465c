// The Hub's quotas (hub-http-api.md §7.2): requests per fixed window in the "api" and
// "resolvers" buckets, counted per token (per IP for anonymous callers), and commits per repo per
// hour (undocumented; the Hub answers 429 "You have exceeded our hourly quotas for action:
// commit"). Off unless a quota is given on the command line, so that tests which do not ask for
// them never meet a 429 they did not set up.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace neuron_cache::hub_server {

struct QuotaOptions {
  uint64_t api = 0;  // requests per window per caller; 0: no quota
  uint64_t resolvers = 0;
  int64_t window_seconds = 300;
  uint64_t commits = 0;  // commits per repo per commit window; 0: no quota
  int64_t commit_window_seconds = 3600;
};

// What counting one request found: the values of its RateLimit and RateLimit-Policy headers.
struct QuotaState {
  std::string bucket;
  uint64_t quota = 0;
  uint64_t remaining = 0;     // r: what is left after this request
  int64_t reset_seconds = 0;  // t: until the window ends, at least 1
  int64_t window_seconds = 0;
  bool refused = false;  // none was left: the request is answered 429
};

class Quotas {
 public:
  explicit Quotas(QuotaOptions options);
  // "resolvers" for a file URL (/resolve/, /raw/ and the resolve-cache it redirects to), "api"
  // for every other request to the hub listener.
  static std::string bucket_of(const std::string& decoded_path);
  // Counts one request of `caller` in `bucket`; nothing when the bucket has no quota.
  std::optional<QuotaState> count(const std::string& bucket, const std::string& caller);
  // Seconds until `repo` may commit again when it used up its commits, else nothing.
  std::optional<int64_t> commit_wait(const std::string& repo);
  // A commit to `repo` landed.
  void add_commit(const std::string& repo);
  const QuotaOptions& options() const { return options_; }

 private:
  struct Window {
    int64_t index = -1;
    uint64_t used = 0;
  };
  // The fixed window of `seconds` that holds now (counted from the server's start), and the
  // seconds until it ends.
  std::pair<int64_t, int64_t> window_now(int64_t seconds) const;
  Window& current(std::map<std::string, Window>& windows, const std::string& key, int64_t index);

  QuotaOptions options_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::mutex mutex_;
  std::map<std::string, Window> requests_;  // by bucket and caller
  std::map<std::string, Window> commits_;   // by repo
};

// "5 minutes", "2 seconds": a window as the Hub's messages name it.
std::string window_text(int64_t seconds);

}  // namespace neuron_cache::hub_server
