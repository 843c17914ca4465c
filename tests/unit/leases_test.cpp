// Compile leases (format/lease.h, remote/leases.h) on the memory store: one holder per key,
// expiry and take-over, renewal, the holder's end, and lease files that are damaged or hostile.
#include <gtest/gtest.h>

#include <atomic>
#include <limits>
#include <thread>
#include <tuple>

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
}

// The parser reads any number, NaN and infinities included (pyjson reads them as Python does,
// and 1e400 overflows to infinity): damaged() judges them, so the waiter can say why.
TEST(LeaseFormatTest, AbsurdExpectedTimesParseAndAreDamaged) {
  lease::Record r;
  r.holder = "h";
  r.started = r.heartbeat = 1'780'000'000;
  r.expires = r.started + 600;
  std::string good = lease::serialize(r);
  for (const char* number : {"-1", "1e300", "1e400", "-1e400", "NaN", "Infinity", "-Infinity"}) {
    std::string text = good;
    size_t at = text.find("\"expected_seconds\": ");
    ASSERT_NE(at, std::string::npos) << text;
    size_t end = text.find_first_of(",\n}", at);
    text.replace(at, end - at, std::string("\"expected_seconds\": ") + number);
    std::optional<lease::Record> parsed = lease::parse(text);
    ASSERT_TRUE(parsed) << text;
    std::optional<std::string> why = lease::damaged(*parsed, r.started);
    ASSERT_TRUE(why) << number;
    EXPECT_NE(why->find("expected compile time"), std::string::npos) << *why;
    EXPECT_FALSE(parsed->live(r.started)) << number;
  }
}

constexpr int64_t kNow = 1'780'000'000;  // 2026-05-28
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t k1970 = 0;
constexpr int64_t k2099 = 4'070'908'800;    // 2099-01-01T00:00:00Z
constexpr int64_t k9999 = 253'402'300'799;  // 9999-12-31T23:59:59Z

// A lease a live holder wrote at kNow.
lease::Record sound() {
  lease::Record r;
  r.holder = std::string(32, 'f');
  r.host = "runner-7";
  r.started = kNow - 3600;
  r.heartbeat = kNow - 60;
  r.expires = kNow + 540;
  r.expected_seconds = 1834.5;
  return r;
}

// Why `r` is damaged at kNow, or "" when it is not.
std::string why_damaged(const lease::Record& r, int64_t now = kNow) {
  return lease::damaged(r, now).value_or("");
}

TEST(LeaseDamagedTest, ASoundLeaseIsLiveAndItsBoundsAreInclusive) {
  EXPECT_EQ(why_damaged(sound()), "");
  EXPECT_TRUE(sound().live(kNow));
  lease::Record r = sound();
  r.heartbeat = kNow + lease::kMaxAheadSeconds;  // a holder 10 min ahead, a reader 10 min behind
  r.expires = r.heartbeat + lease::kMaxLifeSeconds;
  r.started = r.heartbeat - lease::kMaxCompileSeconds;
  r.expected_seconds = lease::kMaxCompileSeconds;
  EXPECT_EQ(why_damaged(r), "");
  r.started = r.heartbeat;
  r.expected_seconds = 0;
  EXPECT_EQ(why_damaged(r), "");
  // Ended leases keep their last expiry, before the heartbeat of their end.
  r = sound();
  r.state = lease::State::Done;
  r.expires = r.heartbeat - 3600;
  EXPECT_EQ(why_damaged(r), "");
}

TEST(LeaseDamagedTest, TimesNoHolderWritesAreDamagedAtTheExtremes) {
  struct Case {
    const char* name;
    int64_t started, heartbeat, expires;
    const char* why;
  };
  const int64_t s = kNow - 3600, h = kNow - 60, e = kNow + 540;
  for (const Case& c : std::vector<Case>{
           {"expires 9999-12-31", s, h, k9999, "no holder claims that long"},
           {"expires INT64_MAX", s, h, kMax, "no holder claims that long"},
           {"expires a second too far", s, h, h + lease::kMaxLifeSeconds + 1, "claims that long"},
           {"expires INT64_MIN", s, h, kMin, "before 2020"},
           {"1970 to 9999", k1970, k1970, k9999, "started time 1970-01-01T00:00:00Z is before"},
           {"started INT64_MIN", kMin, h, e, "s since 1970 is before 2020"},
           {"started INT64_MAX", kMax, h, e, "started after its last heartbeat"},
           {"heartbeat 2099", s, k2099, k2099 + 600, "is in the future"},
           {"all in 2099", k2099, k2099, k2099 + 600, "is in the future"},
           {"heartbeat INT64_MAX", s, kMax, kMax, "is in the future"},
           {"heartbeat INT64_MIN", s, kMin, e, "heartbeat time"},
           {"heartbeat a second too far ahead", s, kNow + lease::kMaxAheadSeconds + 1, kNow + 1800,
            "is in the future"},
           {"started after heartbeat", h + 1, h, e, "started after its last heartbeat"},
           {"running beyond 48 h", h - lease::kMaxCompileSeconds - 1, h, e, "more than 48 hours"},
       }) {
    for (lease::State state : {lease::State::Compiling, lease::State::Done}) {
      lease::Record r = sound();
      r.state = state;
      r.started = c.started;
      r.heartbeat = c.heartbeat;
      r.expires = c.expires;
      EXPECT_NE(why_damaged(r).find(c.why), std::string::npos) << c.name << ": " << why_damaged(r);
      EXPECT_FALSE(r.live(kNow)) << c.name;
    }
  }
}

TEST(LeaseDamagedTest, ExpectedTimesBeyondTheBoundAreDamaged) {
  for (double seconds :
       {1e300, -1.0, -1e300, std::numeric_limits<double>::quiet_NaN(),
        std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
        static_cast<double>(lease::kMaxCompileSeconds) + 1}) {
    lease::Record r = sound();
    r.expected_seconds = seconds;
    EXPECT_NE(why_damaged(r).find("expected compile time"), std::string::npos) << seconds;
    EXPECT_FALSE(r.live(kNow)) << seconds;
  }
}

TEST(LeaseDamagedTest, AnyClockGivesAnAnswerWithoutOverflow) {
  EXPECT_NE(why_damaged(sound(), kMin).find("in the future"), std::string::npos);
  EXPECT_EQ(why_damaged(sound(), kMax), "");
  EXPECT_FALSE(sound().live(kMax)) << "long expired";
  EXPECT_FALSE(sound().live(kMin));
}

TEST(LeaseArithmeticTest, SumsSaturateAndExpectedTimesAreBounded) {
  EXPECT_EQ(lease::add_seconds(kMax, 1), kMax);
  EXPECT_EQ(lease::add_seconds(kMax, kMax), kMax);
  EXPECT_EQ(lease::add_seconds(kMin, -1), kMin);
  EXPECT_EQ(lease::add_seconds(kMin, kMin), kMin);
  EXPECT_EQ(lease::add_seconds(kMax, kMin), -1);
  EXPECT_EQ(lease::add_seconds(kNow, 600), kNow + 600);
  const double max = static_cast<double>(lease::kMaxCompileSeconds);
  EXPECT_EQ(lease::bounded_expected(1e300), max);
  EXPECT_EQ(lease::bounded_expected(std::numeric_limits<double>::infinity()), max);
  EXPECT_EQ(lease::bounded_expected(std::numeric_limits<double>::quiet_NaN()), 0);
  EXPECT_EQ(lease::bounded_expected(-std::numeric_limits<double>::infinity()), 0);
  EXPECT_EQ(lease::bounded_expected(-5), 0);
  EXPECT_EQ(lease::bounded_expected(1834.5), 1834.5);
  EXPECT_EQ(lease::expected_whole_seconds(1e300), lease::kMaxCompileSeconds);
  EXPECT_EQ(lease::expected_whole_seconds(std::numeric_limits<double>::quiet_NaN()), 0);
  EXPECT_EQ(lease::expected_whole_seconds(1834.2), 1835);
  EXPECT_EQ(lease::time_text(k9999), "9999-12-31T23:59:59Z");
  EXPECT_EQ(lease::time_text(k1970), "1970-01-01T00:00:00Z");
  EXPECT_EQ(lease::time_text(kMax), std::to_string(kMax) + " s since 1970");
  EXPECT_EQ(lease::time_text(-1), "-1 s since 1970");
}

TEST(LeaseFormatTest, TimesUpToTheYear9999ParseAsTheyAre) {
  lease::Record r = sound();
  r.started = k1970;
  r.expires = k9999;
  std::optional<lease::Record> back = lease::parse(lease::serialize(r));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->started, k1970);
  EXPECT_EQ(back->expires, k9999);
  EXPECT_TRUE(lease::damaged(*back, kNow));
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
  dead.expires = dead.started + 60;  // 40 s ago, past the grace
  // Written 100 s ago by the store's clock, which says so: it is that old at first sight.
  store.report_times(true);
  store.put(kPath, lease::serialize(dead), dead.heartbeat);
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

// Issue 42: on the Hub each claim and renewal is a commit, and the Hub limits a repo's commits per
// hour. A claim there covers the compile's expected time plus the ttl; a compile that runs past it
// is renewed for half an hour plus the ttl, never twice within half an hour, and a lease claimed
// between two renewals lives until the next one may come. S3 and folders keep the ttl, renewed
// every third of it.
TEST(LeaseTimesTest, OnTheHubAClaimCoversTheExpectedCompileAndRenewalsAreHalfAnHourApart) {
  const int64_t now = 1'800'000'000;
  const int64_t spacing = fleet::kHubRenewalSpacingSeconds;
  fleet::LeaseTimes hub{storage::Kind::Hub, std::chrono::seconds(600)};
  EXPECT_EQ(spacing, 1800);
  EXPECT_EQ(hub.claimed_until(now, 1800, 0), now + 2400);
  EXPECT_EQ(hub.claimed_until(now, 0, 0), now + 600) << "unknown: the ttl alone";
  EXPECT_EQ(hub.claimed_until(now, 0.5, 0), now + 601) << "whole seconds, rounded up";
  EXPECT_EQ(hub.claimed_until(now, 30 * 3600, 0), now + lease::kMaxLifeSeconds);
  EXPECT_EQ(hub.renewed_until(now), now + spacing + 600);

  // Renewed with two thirds of the ttl left (400 s), as elsewhere...
  EXPECT_FALSE(hub.renewal_due(now, now + 2400, 0));
  EXPECT_FALSE(hub.renewal_due(now + 1999, now + 2400, 0));
  EXPECT_TRUE(hub.renewal_due(now + 2000, now + 2400, 0));
  // ... but never within half an hour of the last renewal.
  const int64_t renewed = now + 2000;
  EXPECT_FALSE(hub.renewal_due(renewed + spacing - 1, renewed + 1, renewed));
  EXPECT_TRUE(hub.renewal_due(renewed + spacing, renewed + 1, renewed));
  // Which never leaves a lease to expire: what a renewal gives, or a claim made after it, lasts
  // until a renewal is allowed again, with the lead to spare.
  int64_t claimed = hub.claimed_until(renewed + 60, 0, renewed);
  EXPECT_EQ(claimed, hub.renewed_until(renewed));
  EXPECT_FALSE(hub.renewal_due(renewed + spacing - 1, claimed, renewed));
  EXPECT_TRUE(hub.renewal_due(claimed - 400, claimed, renewed));
  EXPECT_GT(claimed - 400, renewed + spacing);
  EXPECT_EQ(hub.claimed_until(renewed + 60, 3600, renewed), renewed + 60 + 3600 + 600)
      << "a longer compile keeps its own time";

  for (storage::Kind kind : {storage::Kind::S3, storage::Kind::Folder}) {
    fleet::LeaseTimes elsewhere{kind, std::chrono::seconds(600)};
    EXPECT_EQ(elsewhere.claimed_until(now, 1800, 0), now + 600);
    EXPECT_EQ(elsewhere.renewed_until(now), now + 600);
    EXPECT_TRUE(elsewhere.renewal_due(now, now + 600, now - 1)) << "every third of the ttl";
  }
}

// The renewal thread on the memory store (a Hub): a compile expected to take 1 s with a 3 s ttl
// is claimed for 4 s and renewed once it is within 2 s of the end, for half an hour; no second
// renewal follows while it goes on.
TEST(LeasesTest, OnTheHubAHolderRenewsOnlyACompileThatRunsPastItsClaim) {
  MemoryStore store;
  Leases a(store, options("runner-a", 3));
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(a.claim(kVersion, kKey, "llama-bs1", 1).taken);
  lease::Record claimed = record_of(store);
  EXPECT_EQ(claimed.expires, claimed.heartbeat + 4);
  int claims = store.commits();
  auto deadline = start + std::chrono::seconds(10);
  while (store.commits() == claims && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(store.commits(), claims + 1) << "renewed once";
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900))
      << "not before the compile ran near its claim's end";
  lease::Record renewed = record_of(store);
  EXPECT_EQ(renewed.expires, renewed.heartbeat + fleet::kHubRenewalSpacingSeconds + 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // two more looks of the renewer
  EXPECT_EQ(store.commits(), claims + 1) << "no renewal within half an hour of the last";
  EXPECT_TRUE(a.lost().empty());
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

// A lease of this format that no live holder wrote (a hostile writer of the store) is taken over
// at once, done or compiling; the claim says whose it was.
TEST(LeasesTest, ADamagedLeaseIsTakenOverAtOnce) {
  const int64_t now = Leases::now();
  for (lease::State state : {lease::State::Compiling, lease::State::Done}) {
    for (int hostile = 0; hostile < 4; ++hostile) {
      MemoryStore store;
      lease::Record r;
      r.state = state;
      r.holder = std::string(32, '0');
      r.host = "runner-hostile";
      r.key = kKey;
      r.started = r.heartbeat = now - 60;
      r.expires = now + 600;
      if (hostile == 0) r.expires = k9999;
      if (hostile == 1) r.expected_seconds = 1e300;
      if (hostile == 2) r.heartbeat = r.expires = k2099;
      if (hostile == 3) r.started = k1970;
      store.put(kPath, lease::serialize(r));
      Leases a(store, options("runner-a"));
      fleet::Claim claim = a.claim(kVersion, kKey, "llama-bs1", 0);
      EXPECT_TRUE(claim.taken) << hostile;
      EXPECT_TRUE(claim.took_over) << hostile;
      ASSERT_TRUE(claim.other);
      EXPECT_EQ(claim.other->host, "runner-hostile");
      EXPECT_EQ(record_of(store).host, "runner-a");
    }
  }
}

// The true time, which the test moves; each machine reads it through its own clocks, and the
// store through its own (MemoryStore::set_clock). Declared before the store and the machines.
class Time {
 public:
  explicit Time(int64_t start) : now_(start) {}
  void advance(int64_t seconds) { now_ += seconds; }
  int64_t now() const { return now_; }
  std::function<int64_t()> store_clock() {
    return [this] { return now_.load(); };
  }
  // A machine whose wall clock (what it writes in its leases) runs `skew` seconds off the true
  // time; its monotonic clock runs true, as only its differences count.
  fleet::LeaseOptions machine(const std::string& host, int64_t skew) {
    fleet::LeaseOptions o = options(host);
    o.wall_clock = [this, skew] { return now_.load() + skew; };
    o.monotonic = [this] {
      return std::chrono::steady_clock::time_point(std::chrono::seconds(now_.load()));
    };
    return o;
  }

 private:
  std::atomic<int64_t> now_;
};

constexpr int64_t kTenMinutes = 600;

// A holder that compiles with a true clock, then stops renewing: its lease promises `life`
// seconds from kNow, as the store (written at kNow) and its own times say.
lease::Record plant_dead_lease(MemoryStore& store, int64_t life, int64_t written = kNow) {
  lease::Record dead;
  dead.holder = std::string(32, '0');
  dead.host = "runner-killed";
  dead.configuration = "llama-bs1";
  dead.key = kKey;
  dead.started = dead.heartbeat = written;
  dead.expires = written + life;
  store.put(kPath, lease::serialize(dead), written);
  return dead;
}

// Issue 42: a waiter whose clock ran 10 minutes ahead read a live lease as expired and compiled
// it a second time. Judged by the store's clock and its own monotonic clock, it waits, with or
// without the store's times.
TEST(LeaseClockTest, AWaiterTenMinutesAheadDoesNotTakeALiveLeaseOver) {
  for (bool store_times : {false, true}) {
    Time time(kNow);
    MemoryStore store;
    store.set_clock(time.store_clock());
    store.report_times(store_times);
    Leases holder(store, time.machine("runner-true", 0));
    Leases ahead(store, time.machine("runner-ahead", kTenMinutes));
    ASSERT_TRUE(holder.claim(kVersion, kKey, "llama-bs1", 0).taken);
    lease::Record held = record_of(store);
    ASSERT_EQ(held.expires - held.heartbeat, kTenMinutes) << "the holder promised 10 minutes";
    EXPECT_FALSE(held.live(time.now() + kTenMinutes)) << "the old rule: expired by its clock";

    fleet::Claim claim = ahead.claim(kVersion, kKey, "llama-bs1", 0);
    EXPECT_FALSE(claim.taken) << store_times;
    EXPECT_TRUE(claim.verdict.waits) << store_times;
    EXPECT_FALSE(claim.verdict.damaged) << claim.verdict.damaged.value_or("");
    time.advance(kTenMinutes - 1);  // a second before the end of the life it promised
    EXPECT_FALSE(ahead.claim(kVersion, kKey, "llama-bs1", 0).taken) << store_times;
    std::optional<fleet::Observed> seen = ahead.read(kVersion, kKey);
    ASSERT_TRUE(seen);
    EXPECT_TRUE(seen->verdict.waits);
    EXPECT_EQ(seen->verdict.unrenewed, kTenMinutes - 1);
    EXPECT_EQ(seen->verdict.life, kTenMinutes);
    EXPECT_EQ(record_of(store).holder, held.holder) << "one holder, one compile";
  }
}

// A waiter whose clock ran 10 minutes behind waited 10 minutes past a dead holder's expiry. Now
// it takes the lease over within a few seconds of the life the holder promised; and a machine
// with a true clock does not read the lease it writes (times 10 minutes behind) as expired.
TEST(LeaseClockTest, AWaiterTenMinutesBehindTakesAnExpiredLeaseOverSecondsAfterItsExpiry) {
  Time time(kNow);
  MemoryStore store;
  store.set_clock(time.store_clock());
  lease::Record dead = plant_dead_lease(store, 60);
  Leases behind(store, time.machine("runner-behind", -kTenMinutes));
  EXPECT_FALSE(behind.claim(kVersion, kKey, "llama-bs1", 0).taken) << "live when first seen";
  time.advance(60 + fleet::kExpiryGraceSeconds);
  EXPECT_FALSE(behind.claim(kVersion, kKey, "llama-bs1", 0).taken) << "its life and the grace";
  time.advance(1);
  fleet::Claim claim = behind.claim(kVersion, kKey, "llama-bs1", 0);
  ASSERT_TRUE(claim.taken) << "not 10 minutes late";
  EXPECT_TRUE(claim.took_over);
  EXPECT_TRUE(claim.verdict.expired);
  EXPECT_EQ(claim.verdict.unrenewed, 63);
  EXPECT_EQ(claim.verdict.life, 60);
  ASSERT_TRUE(claim.other);
  EXPECT_EQ(claim.other->holder, dead.holder);
  lease::Record taken = record_of(store);
  EXPECT_EQ(taken.host, "runner-behind");
  EXPECT_EQ(taken.heartbeat, time.now() - kTenMinutes) << "it writes its own clock";

  Leases truth(store, time.machine("runner-true", 0));
  EXPECT_FALSE(taken.live(time.now())) << "the old rule: expired by a true clock";
  fleet::Claim other = truth.claim(kVersion, kKey, "llama-bs1", 0);
  EXPECT_FALSE(other.taken);
  EXPECT_TRUE(other.verdict.waits);
  EXPECT_EQ(record_of(store).host, "runner-behind");
}

// How long a holder whose push met an outage keeps trying to end its leases: until the last of
// them expires as it wrote them, on its own clock (skewed or not), never past it.
TEST(LeaseClockTest, AHoldersLeasesHaveTheSecondsLeftItWroteThem) {
  Time time(kNow);
  MemoryStore store;
  store.set_clock(time.store_clock());
  Leases holder(store, time.machine("runner-ahead", kTenMinutes));
  const std::vector<fleet::LeaseEnd> ends{{kVersion, kKey, lease::State::Done, ""}};
  EXPECT_EQ(holder.seconds_left(ends), 0) << "none held";
  ASSERT_TRUE(holder.claim(kVersion, kKey, "llama-bs1", 0).taken);
  const lease::Record held = record_of(store);
  EXPECT_EQ(holder.seconds_left(ends), held.expires - held.heartbeat);
  time.advance(100);
  EXPECT_EQ(holder.seconds_left(ends), held.expires - held.heartbeat - 100);
  time.advance(held.expires - held.heartbeat);
  EXPECT_EQ(holder.seconds_left(ends), 0) << "expired: nothing left to spare anyone";
  holder.finish(ends);
  EXPECT_EQ(holder.seconds_left(ends), 0) << "ended";
  EXPECT_EQ(record_of(store).state, lease::State::Done);
}

// A renewal is a new version of the file: its age starts again, whatever the old one's was.
TEST(LeaseClockTest, ARenewalStartsTheLeasesAgeAgain) {
  Time time(kNow);
  MemoryStore store;
  store.set_clock(time.store_clock());
  lease::Record lease = plant_dead_lease(store, 60);
  Leases waiter(store, time.machine("runner-waiter", 0));
  EXPECT_FALSE(waiter.claim(kVersion, kKey, "llama-bs1", 0).taken);
  time.advance(50);
  lease.heartbeat = time.now();
  lease.expires = time.now() + 60;
  store.put(kPath, lease::serialize(lease));  // renewed
  std::optional<fleet::Observed> seen = waiter.read(kVersion, kKey);
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->verdict.unrenewed, 0);
  time.advance(50);  // 100 s after the first version: past its life
  fleet::Claim claim = waiter.claim(kVersion, kKey, "llama-bs1", 0);
  EXPECT_FALSE(claim.taken);
  EXPECT_EQ(claim.verdict.unrenewed, 50);
  time.advance(13);
  EXPECT_TRUE(waiter.claim(kVersion, kKey, "llama-bs1", 0).taken);
}

// Where the store says when it wrote a lease (S3's Last-Modified and Date), a waiter that first
// sees a dead lease late does not wait a whole life again; where it does not (the Hub), it does.
TEST(LeaseClockTest, AFirstSightIsAsOldAsTheStoreSays) {
  for (bool store_times : {true, false}) {
    Time time(kNow);
    MemoryStore store;
    store.set_clock(time.store_clock());
    store.report_times(store_times);
    plant_dead_lease(store, 60, kNow - 50);
    Leases late(store, time.machine("runner-late", -kTenMinutes));
    std::optional<fleet::Observed> seen = late.read(kVersion, kKey);
    ASSERT_TRUE(seen);
    EXPECT_EQ(seen->verdict.unrenewed, store_times ? 50 : 0);
    time.advance(13);
    EXPECT_EQ(late.claim(kVersion, kKey, "llama-bs1", 0).taken, store_times);
    if (store_times) continue;
    time.advance(50);  // its whole life and the grace since this machine first saw it
    EXPECT_TRUE(late.claim(kVersion, kKey, "llama-bs1", 0).taken);
  }
}

// Damage (a heartbeat in the future) is judged against the store's clock when the store gives
// one: a waiter whose own clock is beyond any tolerance neither sets a sound lease aside nor
// keeps a hostile one.
TEST(LeaseClockTest, DamageIsJudgedAgainstTheStoresClockWhenItGivesOne) {
  constexpr int64_t kHalfAnHour = 1800;  // behind: beyond lease::kMaxAheadSeconds
  for (bool store_times : {true, false}) {
    Time time(kNow);
    MemoryStore store;
    store.set_clock(time.store_clock());
    store.report_times(store_times);
    plant_dead_lease(store, 600);
    Leases far(store, time.machine("runner-far-behind", -kHalfAnHour));
    std::optional<fleet::Observed> seen = far.read(kVersion, kKey);
    ASSERT_TRUE(seen);
    // Without the store's times only this machine's clock is left to judge by, and it is wrong.
    EXPECT_EQ(seen->verdict.damaged.has_value(), !store_times) << store_times;
    EXPECT_EQ(seen->verdict.waits, store_times);
  }
  Time time(kNow);
  MemoryStore store;
  store.set_clock(time.store_clock());
  store.report_times(true);
  lease::Record hostile = plant_dead_lease(store, 600);
  hostile.heartbeat = hostile.started = k2099;
  hostile.expires = k2099 + 600;
  store.put(kPath, lease::serialize(hostile));
  Leases far(store, time.machine("runner-far-ahead", k2099 - kNow));
  fleet::Claim claim = far.claim(kVersion, kKey, "llama-bs1", 0);
  EXPECT_TRUE(claim.taken);
  EXPECT_TRUE(claim.took_over);
  ASSERT_TRUE(claim.verdict.damaged);
  EXPECT_NE(claim.verdict.damaged->find("is in the future (the store's clock: "), std::string::npos)
      << *claim.verdict.damaged;
}

TEST(LeaseClockTest, ThePromisedLifeIsADifferenceBoundedAtTheExtremes) {
  lease::Record r = sound();
  EXPECT_EQ(r.promised_life(), 600);
  r.expires = r.heartbeat - 1;
  EXPECT_EQ(r.promised_life(), 0);
  for (auto [heartbeat, expires, life] :
       {std::tuple{kMin, kMax, lease::kMaxLifeSeconds}, std::tuple{kMax, kMin, int64_t{0}},
        std::tuple{kMin, kMin, int64_t{0}}, std::tuple{kMax, kMax, int64_t{0}},
        std::tuple{kNow, kMax, lease::kMaxLifeSeconds},
        std::tuple{kMin, kNow, lease::kMaxLifeSeconds}}) {
    r.heartbeat = heartbeat;
    r.expires = expires;
    EXPECT_EQ(r.promised_life(), life) << heartbeat << " " << expires;
  }
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
