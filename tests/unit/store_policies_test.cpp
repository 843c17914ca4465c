// The policy wrappers (storage/policies.h) around a tiny fake store that fails on demand.
#include "neuron_cache/storage/policies.h"

#include <gtest/gtest.h>

#include <exception>

namespace neuron_cache::storage {
namespace {

// A store with one file ("a.json": "A") whose reads throw `failure` when it is set.
class FakeStore : public Store {
 public:
  std::exception_ptr failure;  // thrown by every read when set
  bool conflict = false;
  int commits = 0;
  std::vector<CommitOperation> committed;  // the last commit's operations

  Kind kind() const override { return Kind::S3; }
  std::string location() const override { return "s3://fake/prefix"; }
  std::string head() override { return "rev"; }
  std::vector<RemoteEntry> list(const std::string&, bool, const std::string&) override {
    fail();
    return {entry()};
  }
  std::vector<RemoteEntry> stat(const std::vector<std::string>&, const std::string&) override {
    fail();
    return {entry()};
  }
  SmallFile read_versioned(const std::string& path, const std::string&, uint64_t) override {
    fail();
    if (path != "a.json") return {};
    return {"A", "v1"};
  }
  std::vector<DownloadResult> download(const std::string&,
                                       std::vector<DownloadRequest>& requests) override {
    fail();
    std::vector<DownloadResult> results(requests.size());
    for (auto& result : results) result.ok = true;
    return results;
  }
  bool content_matches(const RemoteEntry&, std::string_view content) const override {
    return content == "A";
  }
  CommitResult commit(const std::vector<CommitOperation>& operations, const std::string&,
                      const std::optional<std::string>&) override {
    ++commits;
    committed = operations;
    if (conflict) throw CommitConflict("a.json moved");
    fail();
    CommitResult result;
    result.committed = true;
    return result;
  }
  std::string why_not_writable() override { return ""; }
  bool checks_conditional_writes() override { return true; }
  Url download_url(const std::string&, const std::string& path) const override {
    return {"https://fake/" + path, false};
  }
  uint64_t requests() const override { return 7; }
  std::string unreachable() const override { return ""; }
  bool offline() const override { return false; }

 private:
  void fail() const {
    if (failure) std::rethrow_exception(failure);
  }
  static RemoteEntry entry() {
    RemoteEntry e;
    e.path = "a.json";
    e.size = 1;
    return e;
  }
};

TEST(ReadOnlyStoreTest, ReadsPassAndCommitIsRefusedBeforeTheInnerStore) {
  FakeStore inner;
  ReadOnlyStore store(inner, "a pull request from a fork");
  EXPECT_EQ(store.location(), "s3://fake/prefix");
  EXPECT_EQ(store.kind(), Kind::S3);
  EXPECT_EQ(store.head(), "rev");
  EXPECT_EQ(store.list("", true, "").size(), 1u);
  EXPECT_EQ(store.read_small("a.json", "", 10), "A");
  EXPECT_EQ(store.read_versioned("a.json", "", 10).version, "v1");
  EXPECT_EQ(store.requests(), 7u);
  EXPECT_EQ(store.why_not_writable(), "read-only (a pull request from a fork)");
  try {
    store.commit({}, "m", std::nullopt);
    FAIL() << "a read-only store committed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("read-only"), std::string::npos) << e.what();
  }
  EXPECT_EQ(inner.commits, 0);
}

TEST(MissOnFailureStoreTest, OperationalFailuresBecomeFailuresAndAreRecordedOncePerKind) {
  FakeStore inner;
  MissOnFailureStore store(inner);
  EXPECT_EQ(store.read_small_or_failure("a.json", "", 10).value(), "A");
  EXPECT_TRUE(store.problems().empty());

  inner.failure = std::make_exception_ptr(operational_error("connection refused"));
  auto listed = store.list_or_failure("", true, "");
  ASSERT_TRUE(listed.failed()) << "a failure must not read as an empty listing";
  EXPECT_EQ(listed.failure().message, "connection refused");
  EXPECT_TRUE(listed.or_miss().empty());
  EXPECT_THROW(listed.value(), Error);
  EXPECT_TRUE(store.list_or_failure("x", false, "").failed());
  EXPECT_TRUE(store.stat_or_failure({"a.json"}, "").failed());
  EXPECT_TRUE(store.read_small_or_failure("a.json", "", 10).failed());
  // The plain reads never fabricate "absent": they throw.
  EXPECT_THROW(store.stat({"a.json"}, ""), Error);
  std::vector<DownloadRequest> requests(2);
  auto results = store.download("", requests);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_FALSE(results[0].ok);
  EXPECT_EQ(results[1].error, "connection refused");

  auto problems = store.problems();
  ASSERT_EQ(problems.size(), 4u);  // list (once, though it failed twice), stat, read, download
  EXPECT_EQ(problems[0].rfind("list failed on s3://fake/prefix", 0), 0u) << problems[0];
  EXPECT_NE(problems[0].find("connection refused"), std::string::npos);
  EXPECT_EQ(problems[3].rfind("download", 0), 0u);

  // commit() passes through, failures included.
  EXPECT_THROW(store.commit({}, "m", std::nullopt), Error);
  EXPECT_EQ(store.problems().size(), 4u);
}

// The version read through a wrapper is the inner store's, and the write carries it there.
TEST(ForwardingStoreTest, TheVersionReadTravelsThroughAWrapperWithTheWrite) {
  FakeStore inner;
  MissOnFailureStore store(inner);
  SmallFile read = store.read_versioned("a.json", "", 10);
  EXPECT_EQ(read.content, "A");
  EXPECT_EQ(store.read_versioned("b.json", "", 10).expected().kind, Expected::Kind::Absent);
  EXPECT_EQ(store.download_url("", "a.json").url, "https://fake/a.json");
  EXPECT_TRUE(store.checks_conditional_writes());
  store.commit({{CommitOperation::Kind::Add, "a.json", "/dev/null", read.expected()}}, "m",
               std::nullopt);
  ASSERT_EQ(inner.committed.size(), 1u);
  EXPECT_EQ(inner.committed[0].expected.kind, Expected::Kind::Version);
  EXPECT_EQ(inner.committed[0].expected.token, "v1");
}

TEST(MissOnFailureStoreTest, InputErrorsAndConflictsStillPropagate) {
  FakeStore inner;
  MissOnFailureStore store(inner);
  inner.failure = std::make_exception_ptr(input_error("bad path"));
  EXPECT_THROW(store.list_or_failure("", true, ""), Error);
  EXPECT_THROW(store.read_small_or_failure("a.json", "", 10), Error);
  std::vector<DownloadRequest> requests(1);
  EXPECT_THROW(store.download("", requests), Error);
  inner.failure = std::make_exception_ptr(CommitConflict("moved under us"));
  EXPECT_THROW(store.read_small_or_failure("a.json", "", 10), CommitConflict);
  inner.failure = nullptr;
  inner.conflict = true;
  EXPECT_THROW(store.commit({}, "m", std::nullopt), CommitConflict);
  EXPECT_TRUE(store.problems().empty());
}

}  // namespace
}  // namespace neuron_cache::storage
