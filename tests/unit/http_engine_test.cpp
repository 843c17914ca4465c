// The HTTP engine's scheduling: more exchanges than transfers at once, and several threads
// sharing one engine.
#include <gtest/gtest.h>
#include <httplib.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "neuron_cache/net/http.h"

namespace neuron_cache::net {
namespace {

class CountedExchange : public Exchange {
 public:
  explicit CountedExchange(std::string url) : url_(std::move(url)) {}
  HttpRequest request() override {
    HttpRequest request;
    request.url = url_;
    return request;
  }
  std::optional<std::chrono::milliseconds> on_complete(const HttpResponse& response) override {
    status = response.status;
    done_at = std::chrono::steady_clock::now();
    return std::nullopt;
  }
  long status = 0;
  std::chrono::steady_clock::time_point done_at;

 private:
  std::string url_;
};

double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

// 24 answers of 50 ms each, 2 at a time: about 0.6 s spent waiting for a slot with 22 exchanges
// queued. The engine must sleep in poll meanwhile: before, each queued exchange made every poll
// return at once, and a push of 824 files to S3 spun a core (its thread's CPU time was its wall
// time).
TEST(HttpEngineTest, ExchangesQueuedForASlotDoNotSpinTheEngine) {
  httplib::Server server;
  std::atomic<int> answered{0};
  server.Get("/slow", [&](const httplib::Request&, httplib::Response& response) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ++answered;
    response.set_header("Connection", "close");  // nothing kept open: stop() returns at once
    response.set_content("x", "text/plain");
  });
  int port = server.bind_to_any_port("127.0.0.1");
  std::thread listener([&] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  std::string url = "http://127.0.0.1:" + std::to_string(port) + "/slow";
  std::vector<std::unique_ptr<CountedExchange>> exchanges;
  std::vector<Exchange*> pointers;
  for (int i = 0; i < 24; ++i) {
    exchanges.push_back(std::make_unique<CountedExchange>(url));
    pointers.push_back(exchanges.back().get());
  }
  HttpEngine http(HttpOptions{});
  auto start = std::chrono::steady_clock::now();
  double cpu_start = thread_cpu_seconds();
  http.run(pointers, 2);
  double cpu = thread_cpu_seconds() - cpu_start;
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  server.stop();
  listener.join();

  EXPECT_EQ(answered.load(), 24);
  for (const auto& e : exchanges) EXPECT_EQ(e->status, 200);
  EXPECT_GE(wall, 0.5);
  // Spinning costs the whole wall time; waiting costs libcurl's work for 24 small answers.
  EXPECT_LT(cpu, 0.25 * wall) << "cpu " << cpu << " s over " << wall << " s";
}

// A compile lease is renewed on its own thread through the store's engine while the main thread
// downloads and pushes through it. One curl multi handle driven from two threads crashed the
// waiting machine of a fleet test (SIGSEGV); each run() now has its own handle.
TEST(HttpEngineTest, TwoThreadsShareOneEngine) {
  httplib::Server server;
  std::atomic<int> answered{0};
  server.Get("/n", [&](const httplib::Request&, httplib::Response& response) {
    ++answered;
    response.set_content(std::string(4096, 'x'), "text/plain");
  });
  int port = server.bind_to_any_port("127.0.0.1");
  std::thread listener([&] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::string url = "http://127.0.0.1:" + std::to_string(port) + "/n";

  HttpEngine http(HttpOptions{});
  constexpr int kBatches = 20, kBatch = 16, kSingles = 300;
  std::atomic<int> good{0};
  std::thread batches([&] {
    for (int b = 0; b < kBatches; ++b) {
      std::vector<std::unique_ptr<CountedExchange>> exchanges;
      std::vector<Exchange*> pointers;
      for (int i = 0; i < kBatch; ++i) {
        exchanges.push_back(std::make_unique<CountedExchange>(url));
        pointers.push_back(exchanges.back().get());
      }
      http.run(pointers, 4);
      for (const auto& e : exchanges) good += e->status == 200 ? 1 : 0;
    }
  });
  for (int i = 0; i < kSingles; ++i) {
    HttpRequest request;
    request.url = url;
    HttpResponse response = http.perform(request);
    good += response.status == 200 && response.body.size() == 4096 ? 1 : 0;
  }
  batches.join();
  server.stop();
  listener.join();

  constexpr int kAll = kBatches * kBatch + kSingles;
  EXPECT_EQ(good.load(), kAll);
  EXPECT_EQ(answered.load(), kAll);
  EXPECT_EQ(http.stats().requests, static_cast<uint64_t>(kAll));
  EXPECT_EQ(http.stats().bytes_down, static_cast<uint64_t>(kAll) * 4096);
  EXPECT_EQ(http.unreachable(), "");
}

// An outage marks the endpoint unreachable for the rest of the run: later requests fail at once
// without being sent. A machine waiting on the store (a lease's waiter) asks again after
// look_again(): one request is sent; when it fails the endpoint is unreachable again at once, and
// when the endpoint is back it answers.
TEST(HttpEngineTest, AfterAnOutageLookAgainSendsOneRequest) {
  httplib::Server server;
  std::atomic<bool> down{true};
  std::atomic<int> asked{0};
  server.Get("/n", [&](const httplib::Request&, httplib::Response& response) {
    ++asked;
    response.status = down ? 503 : 200;
    response.set_content("x", "text/plain");
  });
  int port = server.bind_to_any_port("127.0.0.1");
  std::thread listener([&] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  HttpOptions options;
  options.endpoint = "http://127.0.0.1:" + std::to_string(port);
  options.unreachable_budget = std::chrono::milliseconds(0);  // the first failure decides
  HttpEngine http(options);
  HttpRequest request;
  request.url = options.endpoint + "/n";

  EXPECT_EQ(http.perform(request).status, 503);
  EXPECT_NE(http.unreachable(), "");
  EXPECT_TRUE(http.perform(request).unreachable) << "not sent while unreachable";
  EXPECT_EQ(asked.load(), 1);

  http.look_again();
  EXPECT_EQ(http.perform(request).status, 503);
  EXPECT_EQ(asked.load(), 2) << "one request after look_again";
  EXPECT_NE(http.unreachable(), "") << "failing again: unreachable again at once";

  down = false;
  http.look_again();
  EXPECT_EQ(http.perform(request).status, 200);
  EXPECT_EQ(http.unreachable(), "");
  EXPECT_EQ(http.perform(request).status, 200) << "back for good";
  EXPECT_EQ(asked.load(), 4);
  server.stop();
  listener.join();
}

// An httplib server on a free port of 127.0.0.1, stopped by the destructor.
class LoopbackServer {
 public:
  LoopbackServer() = default;
  ~LoopbackServer() {
    server.stop();
    if (listener_.joinable()) listener_.join();
  }
  std::string start() {
    int port = server.bind_to_any_port("127.0.0.1");
    listener_ = std::thread([this] { server.listen_after_bind(); });
    while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return "http://127.0.0.1:" + std::to_string(port);
  }
  httplib::Server server;

 private:
  std::thread listener_;
};

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Issue 42: a 429 with Retry-After pauses every request of the process in that quota bucket to
// that host until the reset, so one request meets the wall and the others wait for it instead of
// each meeting it; requests of another bucket (file URLs) go on meanwhile.
TEST(HttpEngineTest, A429WithRetryAfterHoldsTheBucketsOtherRequestsUntilTheReset) {
  LoopbackServer loopback;
  std::atomic<int> asked{0}, refused{0};
  loopback.server.Get(".*", [&](const httplib::Request&, httplib::Response& response) {
    if (asked++ == 0) {
      ++refused;
      response.status = 429;
      response.set_header("Retry-After", "1");
    }
    response.set_content("x", "text/plain");
  });
  HttpOptions options;
  options.endpoint = loopback.start();
  std::vector<std::unique_ptr<CountedExchange>> exchanges;
  std::vector<Exchange*> pointers;
  for (int i = 0; i < 6; ++i)
    exchanges.push_back(std::make_unique<CountedExchange>(options.endpoint + "/api/models/x"));
  exchanges.push_back(std::make_unique<CountedExchange>(options.endpoint + "/x/resolve/main/f"));
  for (auto& e : exchanges) pointers.push_back(e.get());
  HttpEngine http(options);
  auto start = std::chrono::steady_clock::now();
  http.run(pointers, 1);

  EXPECT_EQ(refused.load(), 1) << "only the first request met the quota";
  EXPECT_EQ(exchanges[0]->status, 429);
  for (size_t i = 1; i < exchanges.size(); ++i) EXPECT_EQ(exchanges[i]->status, 200) << i;
  for (size_t i = 1; i < 6; ++i)
    EXPECT_GE(seconds_between(start, exchanges[i]->done_at), 0.95) << "held until the reset";
  EXPECT_LT(seconds_between(start, exchanges[6]->done_at), 0.9) << "the resolvers bucket goes on";
  EXPECT_EQ(http.stats().rate_limited, 1u);
  EXPECT_GE(http.stats().quota_waits, 5u);
  EXPECT_EQ(http.stats().requests, 7u);
}

// RateLimit r=0 on a good answer says the next request would be refused: the bucket pauses for
// t + 1 s at once, before any 429. Another host's requests are not the endpoint's quota.
TEST(HttpEngineTest, RateLimitWithNothingLeftPausesBeforeAny429) {
  LoopbackServer hub, other;
  std::atomic<int> asked{0};
  hub.server.Get(".*", [&](const httplib::Request&, httplib::Response& response) {
    if (asked++ == 0) response.set_header("RateLimit", "\"api\";r=0;t=0");
    response.set_content("x", "text/plain");
  });
  other.server.Get(".*", [&](const httplib::Request&, httplib::Response& response) {
    response.set_content("y", "text/plain");
  });
  HttpOptions options;
  options.endpoint = hub.start();
  std::string elsewhere = other.start();
  HttpEngine http(options);
  HttpRequest request;
  request.url = options.endpoint + "/api/whoami-v2";
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(http.perform(request).status, 200);
  HttpRequest away;
  away.url = elsewhere + "/api/whoami-v2";
  EXPECT_EQ(http.perform(away).status, 200);
  EXPECT_LT(seconds_between(start, std::chrono::steady_clock::now()), 0.9)
      << "another host is not paused";
  EXPECT_EQ(http.perform(request).status, 200);
  EXPECT_GE(seconds_between(start, std::chrono::steady_clock::now()), 0.95) << "waited t + 1 s";
  EXPECT_EQ(asked.load(), 2);
  EXPECT_EQ(http.stats().rate_limited, 0u);
  EXPECT_EQ(http.stats().quota_waits, 1u);
}

}  // namespace
}  // namespace neuron_cache::net
