// Download journals: what a killed prefetch's successor may resume a partly downloaded file from.
// A journal is trusted only for its very file, and a journal or file planted to mislead (a
// symlink, a FIFO, a huge or garbled text, spans beyond the file) resumes nothing, quickly.
// Journals never leave the staging folder.
#include "neuron_cache/local/download_journal.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/local/entry_install.h"
#include "test_support.h"

namespace neuron_cache::local {
namespace {

using testing::read_file;
using testing::TempDir;
using testing::write_file;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr const char* kCompiler = testing::kCompilerDir;
constexpr const char* kModule = "MODULE_42+d7cde3b5";
constexpr const char* kTraced = "MODULE_5e484d66cb3e29251244";

std::string neff_bytes() {
  std::string bytes(10000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + i / 256);
  return bytes;
}

const std::string kNeff = neff_bytes();
const ExpectedFile kNeffFile{"model.neff", kNeff.size(), sha256_hex(kNeff)};
const std::string kFlags = "[\"--model-type=transformer\"]";
const ExpectedFile kFlagsFile{"compile_flags.json", kFlags.size(), sha256_hex(kFlags)};

bool same_spans(const std::vector<Span>& a, const std::vector<Span>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].start != b[i].start || a[i].end != b[i].end) return false;
  }
  return true;
}

TEST(DownloadJournal, ReadsBackWhatItWroteForItsFileOnly) {
  std::vector<Span> spans{{0, 3000}, {5000, 6000}};
  std::string text = journal_text(kNeffFile, spans);
  auto read = parse_journal(text, kNeffFile);
  ASSERT_TRUE(read);
  EXPECT_TRUE(same_spans(*read, spans));
  EXPECT_EQ(bytes_in(*read), 4000u);
  ExpectedFile other = kNeffFile;
  other.name = "model.hlo_module.pb";
  EXPECT_FALSE(parse_journal(text, other)) << "another file";
  other = kNeffFile;
  other.size += 1;
  EXPECT_FALSE(parse_journal(text, other)) << "another size";
  other = kNeffFile;
  other.sha256 = std::string(64, '0');
  EXPECT_FALSE(parse_journal(text, other)) << "another content";
  EXPECT_NE(journal_name("a/b.neuron"), journal_name("a_b.neuron"));
  EXPECT_EQ(journal_name("a/b.neuron").find('/'), std::string::npos);
}

TEST(DownloadJournal, RefusesTextsThatBreakARule) {
  auto with_spans = [](const std::string& spans) {
    return "{\"version\": 1, \"file\": \"model.neff\", \"size\": 10000, \"sha256\": \"" +
           kNeffFile.sha256 + "\", \"written\": " + spans + "}";
  };
  ASSERT_TRUE(parse_journal(with_spans("[[0, 10]]"), kNeffFile)) << "the rule's baseline";
  for (const std::string& bad :
       {with_spans("[[0, 10001]]"), with_spans("[[5, 5]]"), with_spans("[[9, 3]]"),
        with_spans("[[0, 10], [5, 20]]"), with_spans("[[20, 30], [0, 10]]"),
        with_spans("[[-1, 10]]"), with_spans("[[0, 1.5]]"), with_spans("[[0]]"),
        with_spans("\"all\""), with_spans("[[0, 18446744073709551616]]"),
        with_spans("[[[[[[0, 1]]]]]]"), std::string("{\"version\": 2}"), std::string("[]"),
        std::string("not json"), std::string("{\"version\": 1, \"file\": \"model.neff\""),
        std::string(kMaxJournalBytes + 1, ' ')}) {
    EXPECT_FALSE(parse_journal(bad, kNeffFile)) << bad.substr(0, 200);
  }
}

class ResumeTest : public ::testing::Test {
 protected:
  fs::path root() const { return dir.path() / "cache"; }
  fs::path area() const { return root() / layout::kStagingDir; }
  // The staging folder a killed prefetch of `module` left (no process holds its flock).
  fs::path killed_staging(const std::string& module = kModule) const {
    return area() / (staging_stem(kCompiler, module) + ".424242.cccccccccccc");
  }
  static fs::path journal_of(const fs::path& staging, const ExpectedFile& file) {
    return staging / std::string(layout::kDownloadJournalDir) / journal_name(file.name);
  }
  // A killed download of model.neff: its first `on_disk` bytes and a journal that says so, next
  // to a whole compile_flags.json.
  fs::path plant_partial(uint64_t on_disk = 3000) const {
    fs::path staging = killed_staging();
    write_file(staging / "model.neff", kNeff.substr(0, on_disk));
    write_file(staging / "compile_flags.json", kFlags);
    write_file(journal_of(staging, kNeffFile), journal_text(kNeffFile, {{0, on_disk}}));
    return staging;
  }
  EntryInstall::Reused reuse(EntryInstall& install) const {
    return install.reuse_abandoned({kNeffFile, kFlagsFile}, list_staging_folders(root()));
  }

  TempDir dir;
};

TEST_F(ResumeTest, APartialFileWithItsJournalIsStagedForTheRest) {
  fs::path killed = plant_partial();
  EntryInstall install(root(), kCompiler, kModule);
  EntryInstall::Reused reused = reuse(install);
  EXPECT_EQ(reused.files, std::vector<std::string>{"compile_flags.json"});
  ASSERT_EQ(reused.partial.size(), 1u);
  const EntryInstall::Partial& partial = reused.partial.front();
  EXPECT_EQ(partial.name, "model.neff");
  EXPECT_TRUE(same_spans(partial.written, {{0, 3000}}));
  EXPECT_FALSE(fs::exists(killed)) << "the killed run's folder is deleted once adopted";

  // The new staging folder holds the file and its journal: a second kill loses nothing.
  std::vector<std::string> folders = list_staging_folders(root());
  ASSERT_EQ(folders.size(), 1u);
  fs::path staging = area() / folders.front();
  auto journal = parse_journal(read_file(journal_of(staging, kNeffFile)), kNeffFile);
  ASSERT_TRUE(journal);
  EXPECT_TRUE(same_spans(*journal, {{0, 3000}}));

  // The rest written through the descriptor handed over, then installed: no journal goes along.
  ASSERT_EQ(pwrite(partial.fd.get(), kNeff.data() + 3000, kNeff.size() - 3000, 3000),
            static_cast<ssize_t>(kNeff.size() - 3000));
  EXPECT_EQ(install.commit(2s), InstallOutcome::Installed);
  fs::path entry = root() / kCompiler / kModule;
  EXPECT_EQ(read_file(entry / "model.neff"), kNeff);
  EXPECT_EQ(read_file(entry / "compile_flags.json"), kFlags);
  EXPECT_FALSE(fs::exists(entry / std::string(layout::kDownloadJournalDir)));
}

// A journal saying the whole file is there: the file is checked whole, as without a journal.
TEST_F(ResumeTest, AJournalCoveringTheWholeFileLeavesItToTheWholeFileCheck) {
  plant_partial(kNeff.size());
  EntryInstall install(root(), kCompiler, kModule);
  EntryInstall::Reused reused = reuse(install);
  EXPECT_EQ(reused.files.size(), 2u);
  EXPECT_TRUE(reused.partial.empty());
}

// What a journal or the file next to it may be made to be: none of it resumes anything, and
// nothing blocks (a FIFO is never opened for reading without O_NONBLOCK).
TEST_F(ResumeTest, HostileJournalsAndFilesResumeNothing) {
  const std::string valid = journal_text(kNeffFile, {{0, 3000}});
  std::vector<std::pair<std::string, std::function<void(const fs::path&)>>> cases{
      {"journal symlink",
       [&](const fs::path& s) {
         write_file(dir.path() / "elsewhere.json", valid);
         fs::remove(journal_of(s, kNeffFile));
         fs::create_symlink(dir.path() / "elsewhere.json", journal_of(s, kNeffFile));
       }},
      {"journal folder symlink",
       [&](const fs::path& s) {
         write_file(dir.path() / "journals" / journal_name("model.neff"), valid);
         fs::remove_all(s / std::string(layout::kDownloadJournalDir));
         fs::create_symlink(dir.path() / "journals", s / std::string(layout::kDownloadJournalDir));
       }},
      {"journal FIFO",
       [&](const fs::path& s) {
         fs::remove(journal_of(s, kNeffFile));
         ASSERT_EQ(mkfifo(journal_of(s, kNeffFile).c_str(), 0644), 0);
       }},
      {"huge journal",
       [&](const fs::path& s) {
         write_file(journal_of(s, kNeffFile), valid + std::string(kMaxJournalBytes, ' '));
       }},
      {"garbage journal",
       [&](const fs::path& s) { write_file(journal_of(s, kNeffFile), "{\"written\": [[0, 3"); }},
      {"spans beyond the size",
       [&](const fs::path& s) {
         write_file(journal_of(s, kNeffFile), journal_text(kNeffFile, {{0, 3000}, {9000, 10001}}));
       }},
      {"spans beyond the file on disk",
       [&](const fs::path& s) {
         write_file(journal_of(s, kNeffFile), journal_text(kNeffFile, {{0, 5000}}));
       }},
      {"file longer than expected",
       [&](const fs::path& s) { write_file(s / "model.neff", kNeff + "more"); }},
      {"file symlink",
       [&](const fs::path& s) {
         write_file(dir.path() / "target.neff", kNeff.substr(0, 3000));
         fs::remove(s / "model.neff");
         fs::create_symlink(dir.path() / "target.neff", s / "model.neff");
       }},
      {"file hard-linked elsewhere",
       [&](const fs::path& s) {
         fs::create_hard_link(s / "model.neff", dir.path() / "installed.neff");
       }},
      {"file FIFO",
       [&](const fs::path& s) {
         fs::remove(s / "model.neff");
         ASSERT_EQ(mkfifo((s / "model.neff").c_str(), 0644), 0);
       }},
      {"file folder",
       [&](const fs::path& s) {
         fs::remove(s / "model.neff");
         fs::create_directories(s / "model.neff");
       }},
  };
  for (const auto& [name, spoil] : cases) {
    fs::remove_all(root());
    fs::remove_all(dir.path() / "journals");
    fs::remove(dir.path() / "installed.neff");
    spoil(plant_partial());
    auto started = std::chrono::steady_clock::now();
    EntryInstall install(root(), kCompiler, kModule);
    EntryInstall::Reused reused = reuse(install);
    EXPECT_LT(std::chrono::steady_clock::now() - started, 5s) << name;
    EXPECT_TRUE(reused.partial.empty()) << name;
    EXPECT_EQ(reused.files, std::vector<std::string>{"compile_flags.json"}) << name;
    EXPECT_EQ(list_staging_folders(root()).size(), 1u) << name << ": the killed run's is gone";
    EXPECT_NO_THROW(install.create_file("model.neff")) << name << ": downloaded from its start";
  }
  EXPECT_EQ(read_file(dir.path() / "target.neff"), kNeff.substr(0, 3000)) << "never written";
}

// Spans a journal names are trusted only through the final digest: an adopted file whose spans
// hold other bytes is still handed over, and the download's check refetches it (not here).
TEST_F(ResumeTest, AWholeCopyInOneFolderWinsOverAPartOneInAnother) {
  plant_partial();
  fs::path other = area() / (staging_stem(kCompiler, kModule) + ".434343.dddddddddddd");
  write_file(other / "model.neff", kNeff);
  EntryInstall install(root(), kCompiler, kModule);
  EntryInstall::Reused reused = reuse(install);
  EXPECT_EQ(reused.files.size(), 2u);
  EXPECT_TRUE(reused.partial.empty());
  EXPECT_EQ(list_staging_folders(root()).size(), 1u);
}

TEST_F(ResumeTest, JournalsStayOutOfATracedExport) {
  EntryInstall install(root(), kCompiler, kTraced);
  install.add_file("config.json", "{}");
  sys::UniqueFd fd = install.create_file("model.neuron");
  ASSERT_EQ(write(fd.get(), "neuron", 6), 6);
  install.record_progress({"model.neuron", 6, sha256_hex("neuron")}, {{0, 3}});
  std::vector<std::string> folders = list_staging_folders(root());
  ASSERT_EQ(folders.size(), 1u);
  EXPECT_TRUE(
      fs::is_directory(area() / folders.front() / std::string(layout::kDownloadJournalDir)));
  EXPECT_EQ(install.commit(2s), InstallOutcome::Installed);
  EXPECT_TRUE(fs::is_regular_file(root() / kCompiler / kTraced / "model.neuron"));
  EXPECT_FALSE(fs::exists(root() / kCompiler / kTraced / std::string(layout::kDownloadJournalDir)));
}

TEST_F(ResumeTest, NoFileOfAnEntryMayBeStagedUnderTheJournalFolder) {
  EntryInstall install(root(), kCompiler, kTraced);
  const std::string name = std::string(layout::kDownloadJournalDir) + "/x.json";
  EXPECT_THROW(install.add_file(name, "{}"), Error);
  EXPECT_THROW(install.create_file(name), Error);
  EXPECT_THROW(install.link_file(name, "/etc/hostname"), Error);
}

}  // namespace
}  // namespace neuron_cache::local
