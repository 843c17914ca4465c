// Compile leases (format/lease.h, remote/leases.h) on the memory store: one holder per key,
// expiry and take-over, renewal, the holder's end, and lease files that are damaged or hostile.
#include <gtest/gtest.h>

#include <thread>

#include "memory_store.h"
#include "neuron_cache/fleet/leases.h"
#include "neuron_cache/format/lease.h"

namespace neuron_cache {
namespace {

using fleet::Leases;
using testing::MemoryStore;

constexpr const char* kVersion = "2.21.33363.0+82129205";
const std::string kKey(32, 'a');
const std::string kPath = lease::remote_path(kVersion, kKey);

fleet::LeaseOptions options(const std::string& host, int ttl = 600) {
  fleet::LeaseOptions o;
  o.ttl = std::chrono::seconds(ttl);
  o.host = host;
  o.conflicts.base = std::chrono::milliseconds(1);
  return o;
}

lease::Record record_of(const MemoryStore& store) {
  auto parsed = lease::parse(store.content(kPath));
  EXPECT_TRUE(parsed.has_value()) << store.content(kPath);
  return parsed.value_or(lease::Record{});
}

TEST(LeaseFormatTest, RoundTripsAndNamesItsPath) {
  lease::Record r;
  r.holder = std::string(32, 'f');
  r.host = "runner-7";
  r.configuration = "llama-bs1";
  r.key = kKey;
  r.started = 1764763380;  // 2025-12-03T12:03:00Z
  r.heartbeat = r.started + 60;
  r.expires = r.started + 660;
  r.expected_seconds = 1834.5;
  std::string text = lease::serialize(r);
  EXPECT_NE(text.find("\"started\": \"2025-12-03T12:03:00Z\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"state\": \"compiling\""), std::string::npos) << text;
  auto back = lease::parse(text);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->host, "runner-7");
  EXPECT_EQ(back->expires, r.expires);
  EXPECT_DOUBLE_EQ(back->expected_seconds, 1834.5);
  EXPECT_TRUE(back->live(r.expires - 1));
  EXPECT_FALSE(back->live(r.expires));
  EXPECT_EQ(kPath, "neuron-cache-leases/neuronxcc-" + std::string(kVersion) + "/" + kKey + ".json");
}

TEST(LeaseFormatTest, DamagedOrHostileTextIsNoLease) {
  lease::Record r;
  r.holder = "h";
  std::string good = lease::serialize(r);
  EXPECT_TRUE(lease::parse(good));
  for (std::string bad :
       {std::string(""), std::string("{"), std::string("[]"), good.substr(0, good.size() / 2),
        std::string(R"({"format": 2})"), std::string(70000, ' ') + good}) {
    EXPECT_FALSE(lease::parse(bad)) << bad.substr(0, 80);
  }
  std::string control = good;
  control.replace(control.find("\"host\": \"\""), 10, "\"host\": \"a\\u001b[2Jb\"");
  EXPECT_FALSE(lease::parse(control)) << control;
  std::string state = good;
  state.replace(state.find("compiling"), 9, "stolen");
  EXPECT_FALSE(lease::parse(state));
  std::string negative = good;
  negative.replace(negative.find("\"expected_seconds\": 0"), 21, "\"expected_seconds\": -1");
  EXPECT_FALSE(lease::parse(negative)) << negative;
}

TEST(LeasesTest, OneOfTwoMachinesTakesTheLeaseAndTheOtherSeesWhoHoldsIt) {
  MemoryStore store;
  Leases a(store, options("runner-a"));
  Leases b(store, options("runner-b"));
  fleet::Claim first = a.claim(kVersion, kKey, "llama-bs1", 120);
  fleet::Claim second = b.claim(kVersion, kKey, "llama-bs1", 0);
  EXPECT_TRUE(first.taken);
  EXPECT_FALSE(first.took_over);
  EXPECT_FALSE(second.taken);
  ASSERT_TRUE(second.other);
  EXPECT_EQ(second.other->host, "runner-a");
  EXPECT_DOUBLE_EQ(second.other->expected_seconds, 120);
  EXPECT_EQ(record_of(store).state, lease::State::Compiling);

  a.finish(kVersion, kKey, lease::State::Done, "");
  EXPECT_EQ(record_of(store).state, lease::State::Done);
  // Done: the result is in the store; a claim takes it only when the caller found no entry.
  EXPECT_FALSE(b.claim(kVersion, kKey, "llama-bs1", 0).taken);
  fleet::Claim again = b.claim(kVersion, kKey, "llama-bs1", 0, true);
  EXPECT_TRUE(again.taken);
  EXPECT_FALSE(again.took_over);
}

TEST(LeasesTest, ManyLeasesAreClaimedAndEndedInOneCommitEach) {
  MemoryStore store;
  Leases a(store, options("runner-a"));
  std::vector<fleet::ClaimRequest> requests;
  for (char c : {'1', '2', '3'}) requests.push_back({kVersion, std::string(32, c), "c", 0});
  int before = store.commits();
  std::vector<fleet::Claim> claims = a.claim(requests);
  EXPECT_EQ(store.commits(), before + 1);
  for (const auto& claim : claims) EXPECT_TRUE(claim.taken);
  std::vector<fleet::LeaseEnd> ends;
  for (const auto& r : requests) ends.push_back({kVersion, r.key, lease::State::Done, ""});
  a.finish(ends);
  EXPECT_EQ(store.commits(), before + 2);
  for (const auto& r : requests) {
    auto record = lease::parse(store.content(lease::remote_path(kVersion, r.key)));
    ASSERT_TRUE(record);
    EXPECT_EQ(record->state, lease::State::Done);
  }
  a.finish(ends);  // held no more: nothing is written
  EXPECT_EQ(store.commits(), before + 2);
}

TEST(LeasesTest, ClaimsRacingFromManyThreadsGiveOneHolder) {
  MemoryStore store;
  std::vector<std::unique_ptr<Leases>> machines;
  for (int i = 0; i < 8; ++i)
    machines.push_back(std::make_unique<Leases>(store, options("runner-" + std::to_string(i))));
  std::atomic<int> taken{0};
  std::vector<std::thread> threads;
  for (auto& machine : machines) {
    threads.emplace_back([&, m = machine.get()] {
      if (m->claim(kVersion, kKey, "llama-bs1", 0).taken) ++taken;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(taken.load(), 1);
}

TEST(LeasesTest, AnExpiredLeaseIsTakenOverOnceAndItsOldHolderLearnsItLostIt) {
  MemoryStore store;
  lease::Record dead;
  dead.holder = std::string(32, '0');
  dead.host = "runner-killed";
  dead.configuration = "llama-bs1";
  dead.key = kKey;
  dead.started = Leases::now() - 100;
  dead.heartbeat = dead.started;
  dead.expires = Leases::now() - 1;
  store.put(kPath, lease::serialize(dead));
  Leases a(store, options("runner-a"));
  Leases b(store, options("runner-b"));
  fleet::Claim claim = a.claim(kVersion, kKey, "llama-bs1", 0);
  EXPECT_TRUE(claim.taken);
  EXPECT_TRUE(claim.took_over);
  ASSERT_TRUE(claim.other);
  EXPECT_EQ(claim.other->host, "runner-killed");
  EXPECT_FALSE(b.claim(kVersion, kKey, "llama-bs1", 0).taken) << "a holds it now";
  EXPECT_EQ(record_of(store).host, "runner-a");
}

TEST(LeasesTest, TheHolderRenewsWhileItCompilesAndReleasesWhatItStillHoldsWhenItEnds) {
  MemoryStore store;
  int64_t first_expiry = 0;
  {
    Leases a(store, options("runner-a", 3));  // renewed every second
    ASSERT_TRUE(a.claim(kVersion, kKey, "llama-bs1", 0).taken);
    first_expiry = record_of(store).expires;
    // Renewed every second; a loaded machine may wake the renewer late, never ten times late.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (record_of(store).expires <= first_expiry && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_GT(record_of(store).expires, first_expiry);
    EXPECT_EQ(record_of(store).state, lease::State::Compiling);
    EXPECT_TRUE(a.lost().empty());
  }
  lease::Record after = record_of(store);
  EXPECT_EQ(after.state, lease::State::Released);
  EXPECT_NE(after.note.find("ended without a result"), std::string::npos) << after.note;
}

TEST(LeasesTest, AHolderWhoseLeaseWasTakenOverStopsRenewingIt) {
  MemoryStore store;
  Leases a(store, options("runner-a", 3));
  ASSERT_TRUE(a.claim(kVersion, kKey, "llama-bs1", 0).taken);
  lease::Record other = record_of(store);
  other.holder = std::string(32, 'b');
  other.host = "runner-b";
  store.put(kPath, lease::serialize(other));  // b took it over while a's renewals were late
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (a.lost().empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(a.lost(), std::vector<std::string>{kPath});
  EXPECT_EQ(record_of(store).host, "runner-b");
  a.finish(kVersion, kKey, lease::State::Done, "");
  EXPECT_EQ(record_of(store).state, lease::State::Compiling) << "a never writes b's lease";
}

TEST(LeasesTest, ADamagedLeaseFileProtectsNothing) {
  MemoryStore store;
  store.put(kPath, "{\"format\": 1, \"state\": \"comp");
  Leases a(store, options("runner-a"));
  fleet::Claim claim = a.claim(kVersion, kKey, "llama-bs1", 0);
  EXPECT_TRUE(claim.taken);
  EXPECT_EQ(record_of(store).host, "runner-a");
}

TEST(LeasesTest, AStoreFailureIsAnErrorNotAFreeLease) {
  MemoryStore store;
  Leases a(store, options("runner-a"));
  store.fail_reads("neuron-cache-leases/", 10);
  EXPECT_THROW(a.claim(kVersion, kKey, "llama-bs1", 0), Error);
  EXPECT_FALSE(store.has(kPath));
}

}  // namespace
}  // namespace neuron_cache
