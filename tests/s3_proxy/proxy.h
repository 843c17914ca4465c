// s3-proxy: forwards every request to an S3-compatible server (s3rver in the tests) unchanged
// (method, raw path and query, every header including Host and Authorization, which SigV4
// signs, and the body) and streams the answer back, adding injected faults, the conditional
// writes s3rver ignores (If-None-Match: *, If-Match: <etag>), and request statistics.
#pragma once

#include <httplib.h>

#include <atomic>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "faults.h"

namespace neuron_cache::s3_proxy {

struct Options {
  std::string upstream;  // http://host:port of the S3-compatible server
  std::string host = "127.0.0.1";
  int port = 0;  // 0: a free one
};

// Requests seen per method and a log of (method, path, query, status, fault), no headers.
class Stats {
 public:
  void count(const std::string& method);
  void log(const std::string& method, const std::string& path, const std::string& query, int status,
           const std::string& fault);
  nlohmann::json describe() const;
  void clear();

 private:
  mutable std::mutex mutex_;
  std::map<std::string, uint64_t> methods_;
  nlohmann::json log_ = nlohmann::json::array();
};

class Proxy {
 public:
  explicit Proxy(Options options);
  int bind();  // the port it listens on
  void run();  // until stop()
  void stop();
  FaultTable& faults() { return faults_; }

 private:
  void routes();
  void handle(const httplib::Request& request, httplib::Response& response);
  // Answers 412/404 when a conditional write's condition fails on the upstream; true if it did.
  bool refuse_conditional_write(const httplib::Request& request, httplib::Response& response);
  // Forwards and buffers the answer (every method but GET); false when upstream gave none.
  bool forward_buffered(const httplib::Request& request, httplib::Response& response,
                        const std::optional<Fault>& fault);
  // Forwards a GET and streams its body back as it arrives.
  bool forward_streamed(const httplib::Request& request, httplib::Response& response,
                        const std::optional<Fault>& fault);
  void apply_status(const httplib::Request& request, httplib::Response& response,
                    const Fault& fault);

  Options options_;
  httplib::Server server_;
  int port_ = 0;
  FaultTable faults_;
  Stats stats_;
  // Held from the condition check of an object write to the end of its forwarding, and by every
  // write that replaces or deletes an object, so check + write is atomic.
  std::mutex write_mutex_;
  std::atomic<bool> stopping_{false};
};

}  // namespace neuron_cache::s3_proxy
