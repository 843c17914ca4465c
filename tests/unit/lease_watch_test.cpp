// How a waiter ages another machine's lease without reading one clock against another
// (fleet/lease_watch.h, issue 42): from its first sight of each version on a monotonic clock,
// plus the store's own age of it when the store's times are believable; and the HTTP dates S3
// gives those times in.
#include <gtest/gtest.h>

#include <limits>

#include "neuron_cache/fleet/lease_watch.h"
#include "neuron_cache/format/lease.h"
#include "neuron_cache/format/timestamp.h"

namespace neuron_cache {
namespace {

using fleet::LeaseWatch;
using storage::StoreTimes;
using Steady = std::chrono::steady_clock;

constexpr int64_t kNow = 1'780'000'000;  // 2026-05-28
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
const std::string kPath = "neuron-cache-leases/neuronxcc-2.21/" + std::string(32, 'a') + ".json";

// A monotonic clock the test moves.
struct FakeMonotonic {
  Steady::time_point at{};
  void advance(int64_t seconds) { at += std::chrono::seconds(seconds); }
  fleet::MonotonicClock clock() {
    return [this] { return at; };
  }
};

// No store times: the reader counts from its first sight.
std::optional<StoreTimes> none() {
  return std::nullopt;
}

TEST(LeaseWatchTest, AVersionAgesFromItsFirstSightAndANewVersionStartsAgain) {
  FakeMonotonic clock;
  LeaseWatch watch(clock.clock());
  EXPECT_EQ(watch.seen(kPath, "v1", none).age, 0);
  clock.advance(59);
  EXPECT_EQ(watch.seen(kPath, "v1", none).age, 59);
  clock.advance(1);
  EXPECT_EQ(watch.seen(kPath, "v1", none).age, 60);
  // A renewal is another text: its age starts again.
  EXPECT_EQ(watch.seen(kPath, "v2", none).age, 0);
  clock.advance(5);
  EXPECT_EQ(watch.seen(kPath, "v2", none).age, 5);
  // The old text again (a holder that rewrote it, or an older replica): another new version,
  // never the age the first one had reached.
  EXPECT_EQ(watch.seen(kPath, "v1", none).age, 0);
  // Each path has its own versions.
  EXPECT_EQ(watch.seen(kPath + "2", "v1", none).age, 0);
}

TEST(LeaseWatchTest, TheStoreIsAskedItsTimesOnlyForANewVersion) {
  FakeMonotonic clock;
  LeaseWatch watch(clock.clock());
  int asked = 0;
  auto times = [&]() -> std::optional<StoreTimes> {
    ++asked;
    return StoreTimes{kNow - 40, kNow};
  };
  LeaseWatch::Sight first = watch.seen(kPath, "v1", times);
  EXPECT_EQ(first.age, 40) << "a first sight is as old as the store says";
  EXPECT_EQ(first.store_written, kNow - 40);
  clock.advance(10);
  LeaseWatch::Sight later = watch.seen(kPath, "v1", times);
  EXPECT_EQ(later.age, 50) << "then it ages on this machine's monotonic clock";
  EXPECT_EQ(later.store_written, kNow - 40);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(watch.seen(kPath, "v2", times).age, 40);
  EXPECT_EQ(asked, 2);
}

TEST(LeaseWatchTest, UnbelievableStoreTimesAreIgnoredAndTheAgeStartsAtTheFirstSight) {
  for (StoreTimes hostile :
       {StoreTimes{0, kNow}, StoreTimes{kNow, 0}, StoreTimes{kMin, kMax}, StoreTimes{kMax, kMin},
        StoreTimes{kNow + 3600, kNow}, StoreTimes{kNow, 9'000'000'000}, StoreTimes{-1, kNow}}) {
    FakeMonotonic clock;
    LeaseWatch watch(clock.clock());
    LeaseWatch::Sight sight = watch.seen(kPath, "v1", [&] { return hostile; });
    EXPECT_EQ(sight.age, 0) << hostile.written << " " << hostile.now;
    EXPECT_FALSE(sight.store_written) << hostile.written << " " << hostile.now;
  }
}

TEST(LeaseWatchTest, AgesSaturateAtTheMonotonicClocksExtremes) {
  FakeMonotonic clock;
  clock.at = Steady::time_point::min();
  LeaseWatch watch(clock.clock());
  EXPECT_EQ(watch.seen(kPath, "v1", none).age, 0);
  clock.at = Steady::time_point::max();  // the difference overflows the clock's ticks
  int64_t age = watch.seen(kPath, "v1", [] { return std::optional<StoreTimes>(); }).age;
  EXPECT_GT(age, int64_t{100} * 365 * 86400) << "saturated, not wrapped to a small age";
  // A clock that went back (no steady clock does) ages nothing rather than going negative.
  LeaseWatch back(clock.clock());
  EXPECT_EQ(back.seen(kPath, "v1", none).age, 0);
  clock.at = Steady::time_point::min();
  EXPECT_EQ(back.seen(kPath, "v1", none).age, 0);
}

TEST(StoreAgeTest, IsTheDifferenceOfTheStoresOwnTimesWithinBelievableBounds) {
  EXPECT_EQ(fleet::store_age({kNow - 90, kNow}), 90);
  EXPECT_EQ(fleet::store_age({kNow, kNow}), 0);
  // A little after the store's now: whole seconds, two servers of one share. Counted as new.
  EXPECT_EQ(fleet::store_age({kNow + 5, kNow}), 0);
  EXPECT_FALSE(fleet::store_age({kNow + 6, kNow}));
  // Before 2020 or past 2200 is a clock that is wrong, whichever of the two it is.
  EXPECT_FALSE(fleet::store_age({lease::kEarliestSeconds - 1, kNow}));
  EXPECT_TRUE(fleet::store_age({lease::kEarliestSeconds, kNow}));
  EXPECT_FALSE(fleet::store_age({kNow, 7'258'118'401}));
  EXPECT_FALSE(fleet::store_age({kMin, kMax})) << "no overflow: refused before subtracting";
  EXPECT_FALSE(fleet::store_age({kMax, kMin}));
  EXPECT_FALSE(fleet::store_age({kMax, kMax}));
}

TEST(HttpDateTest, ReadsTheFixedFormOnly) {
  EXPECT_EQ(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777);
  EXPECT_EQ(parse_http_date("Thu, 28 May 2026 20:26:40 GMT"), kNow);
  EXPECT_EQ(parse_http_date("Thu, 31 Dec 2026 23:59:59 GMT"), 1'798'761'599);
  for (const char* bad : {"", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
                          "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Xyz 1994 08:49:37 GMT",
                          "Sun, 06 ovD 1994 08:49:37 GMT", "Sun, 32 Nov 1994 08:49:37 GMT",
                          "Sun, 06 Nov 1994 24:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT ",
                          "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 00 Nov 1994 08:49:37 GMT"}) {
    EXPECT_FALSE(parse_http_date(bad)) << bad;
  }
}

}  // namespace
}  // namespace neuron_cache
