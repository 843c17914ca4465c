// `neuron-cache key generate` and `key public` as users run them: the secret file is made 0600
// and never over another file, stdout holds the public line only, and no byte of the secret
// appears in any output, whatever goes wrong.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "neuron_cache/trust/keys.h"
#include "test_support.h"
#include "tool_runner.h"

namespace neuron_cache {
namespace {

namespace fs = std::filesystem;

class KeyCli : public ::testing::Test {
 protected:
  testing::TempDir dir;
  testing::ToolRunner tool{dir.path(), dir / "hf", "http://127.0.0.1:9", dir / "cache"};

  // The base64 seed of a secret file the tool wrote.
  std::string secret_of(const fs::path& file) {
    std::string text = testing::read_file(file);
    return text.substr(text.find(':') + 1, 44);
  }
  void expect_no_secret(const testing::ToolResult& result, const std::string& secret) {
    EXPECT_FALSE(testing::contains(result.all(), secret.substr(0, 12))) << result.all();
    EXPECT_FALSE(testing::contains(result.all(), secret.substr(24, 12))) << result.all();
  }
};

TEST_F(KeyCli, GenerateWritesA0600FileAndPrintsThePublicLine) {
  testing::ToolResult made = tool.run("key generate acme-ci-1 --secret-file key.secret");
  ASSERT_EQ(made.code, 0) << made.all();
  EXPECT_EQ(made.err, "");
  struct stat info {};
  ASSERT_EQ(::stat((dir / "key.secret").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0600u);
  trust::PublicKey printed = trust::parse_public_key(made.out, "stdout");
  EXPECT_EQ(printed.name, "acme-ci-1");
  EXPECT_EQ(made.out, trust::public_key_line(printed) + "\n");
  EXPECT_EQ(trust::read_secret_key(dir / "key.secret").public_key(), printed);
  expect_no_secret(made, secret_of(dir / "key.secret"));

  testing::ToolResult shown = tool.run("key public key.secret");
  ASSERT_EQ(shown.code, 0) << shown.all();
  EXPECT_EQ(shown.out, made.out);
  expect_no_secret(shown, secret_of(dir / "key.secret"));
}

TEST_F(KeyCli, RefusalsSayWhyAndShowNoSecret) {
  ASSERT_EQ(tool.run("key generate acme-ci-1 --secret-file key.secret").code, 0);
  std::string secret = secret_of(dir / "key.secret");
  std::string before = testing::read_file(dir / "key.secret");

  testing::ToolResult again = tool.run("key generate acme-ci-2 --secret-file key.secret");
  EXPECT_EQ(again.code, 1);
  EXPECT_TRUE(testing::contains(again.err, "already exists")) << again.err;
  EXPECT_EQ(again.out, "");
  EXPECT_EQ(testing::read_file(dir / "key.secret"), before);

  testing::ToolResult bad_name = tool.run("key generate acme --secret-file other.secret");
  EXPECT_EQ(bad_name.code, 2);
  EXPECT_TRUE(testing::contains(bad_name.err, "acme-ci-1")) << bad_name.err;
  EXPECT_FALSE(fs::exists(dir / "other.secret"));

  fs::permissions(dir / "key.secret", static_cast<fs::perms>(0644));
  testing::ToolResult open_file = tool.run("key public key.secret");
  EXPECT_EQ(open_file.code, 2);
  EXPECT_TRUE(testing::contains(open_file.err, "chmod 600")) << open_file.err;
  expect_no_secret(open_file, secret);

  testing::write_file(dir / "broken.secret", secret + "\n");  // the name lost
  fs::permissions(dir / "broken.secret", static_cast<fs::perms>(0600));
  testing::ToolResult broken = tool.run("key public broken.secret");
  EXPECT_EQ(broken.code, 2);
  EXPECT_TRUE(testing::contains(broken.err, "not a neuron-cache secret key")) << broken.err;
  expect_no_secret(broken, secret);

  fs::create_symlink(dir / "key.secret", dir / "link.secret");
  EXPECT_EQ(tool.run("key generate acme-ci-3 --secret-file link.secret").code, 1);
  EXPECT_EQ(testing::read_file(dir / "key.secret"), before);

  EXPECT_EQ(tool.run("key").code, 2);
  EXPECT_EQ(tool.run("key generate acme-ci-4").code, 2);  // --secret-file is required
}

}  // namespace
}  // namespace neuron_cache
