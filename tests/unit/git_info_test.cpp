#include "neuron_cache/git/git_info.h"

#include <gtest/gtest.h>

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

using testing::run_command;
using testing::TempDir;
using testing::write_file;

std::string git(const TempDir& repo, const std::string& args) {
  std::string output;
  int code = run_command("git -C '" + repo.path().string() +
                             "' -c user.name=t -c user.email=t@example.invalid " + args,
                         &output);
  EXPECT_EQ(code, 0) << output;
  while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
  return output;
}

TEST(GitInfo, HeadCommitOfALocalClone) {
  TempDir repo;
  git(repo, "init -q");
  write_file(repo / "config.json", "{\"model_type\": \"llama\"}");
  git(repo, "add config.json");
  git(repo, "commit -qm first");
  std::string expected = git(repo, "rev-parse HEAD");
  ASSERT_EQ(expected.size(), 40u);
  EXPECT_EQ(git::head_commit(repo.path()), expected);
  write_file(repo / "sub" / "weights.bin", "x");
  EXPECT_EQ(git::head_commit(repo / "sub"), expected);  // found from inside the work tree
}

TEST(GitInfo, NotARepositoryGivesNothing) {
  TempDir dir;
  EXPECT_EQ(git::head_commit(dir.path()), std::nullopt);
}

TEST(GitInfo, RepositoryWithoutCommitIsAnError) {
  TempDir repo;
  git(repo, "init -q");
  EXPECT_THROW(git::head_commit(repo.path()), Error);
}

TEST(GitInfo, BlobIdsMatchGitHashObject) {
  TempDir dir;
  for (const std::string& content : {std::string(), std::string("hello\n"),
                                     std::string(200000, 'z') + std::string(1, '\0') + "tail"}) {
    write_file(dir / "f.bin", content);
    std::string expected;
    ASSERT_EQ(run_command("git hash-object '" + (dir / "f.bin").string() + "'", &expected), 0);
    expected.pop_back();
    EXPECT_EQ(git_blob_id_of_file(dir / "f.bin"), expected);
    EXPECT_EQ(git_blob_id(content), expected);
  }
  EXPECT_EQ(git_blob_id(""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
}

TEST(GitInfo, MissingFileIsAnError) {
  TempDir dir;
  EXPECT_THROW(git_blob_id_of_file(dir / "missing"), Error);
}

}  // namespace
}  // namespace neuron_cache
