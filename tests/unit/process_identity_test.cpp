// process::ended judges only processes of this boot and pid namespace, and a lease's process
// field is hostile: a malformed or foreign identity is never "ended".
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sstream>
#include <string>
#include <vector>

#include "neuron_cache/process/identity.h"

namespace neuron_cache::process {
namespace {

std::vector<std::string> words_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

TEST(ProcessIdentity, ThisProcessIsNotEnded) {
  ASSERT_EQ(words_of(this_process()).size(), 4u) << this_process();
  EXPECT_NE(boot_id(), "unknown");
  EXPECT_FALSE(ended(this_process()));
}

TEST(ProcessIdentity, AKilledChildHasEndedALiveOneHasNot) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  std::string identity = identity_of(child);
  EXPECT_FALSE(identity.empty());
  EXPECT_FALSE(ended(identity)) << identity;
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  ASSERT_FALSE(identity.empty());
  EXPECT_TRUE(ended(identity)) << identity;
}

TEST(ProcessIdentity, APidNowHeldByAnotherProcessHasEnded) {
  std::vector<std::string> mine = words_of(this_process());
  // This pid, started at another time: an earlier process whose pid was reused.
  EXPECT_TRUE(ended(mine[0] + " " + mine[1] + " " + mine[2] + " 1"));
}

TEST(ProcessIdentity, ForeignOrMalformedIdentitiesAreNeverEnded) {
  std::vector<std::string> mine = words_of(this_process());
  const std::string dead_pid = "4194303";
  for (const std::string& identity : std::vector<std::string>{
           std::string(),
           "garbage",
           "other-boot " + mine[1] + " " + dead_pid + " 1",        // another machine
           mine[0] + " pid:[1] " + dead_pid + " 1",                // another container
           mine[0] + " " + mine[1] + " 0 1",                       // no such pid
           mine[0] + " " + mine[1] + " -5 1",                      // negative
           mine[0] + " " + mine[1] + " 99999999999999999999 1",    // overflow
           mine[0] + " " + mine[1] + " 12x 1",                     // not a number
           mine[0] + " " + mine[1] + " " + dead_pid + " 1 extra",  // a fifth word
           std::string(300, 'a'),
       }) {
    EXPECT_FALSE(ended(identity)) << identity;
  }
}

}  // namespace
}  // namespace neuron_cache::process
