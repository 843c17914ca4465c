// Builds locked to exact bytes (issue 27) on each kind of store: `lock` writes the store's
// entries of a manifest's configurations, stable byte for byte; `prefetch --locked` on another
// machine installs exactly those bytes without reading the index, also from a mirror with the
// store unreachable; a tampered mirror file is refused; a changed manifest is named.
#include <gtest/gtest.h>

#include <fstream>

#include "index_samples.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/lockfile.h"
#include "neuron_cache/hub/client.h"
#include "store_kinds.h"

namespace neuron_cache {
namespace {

using nlohmann::json;
using testing::contains;
using testing::read_file;
using testing::ToolResult;
using testing::write_file;
namespace fs = std::filesystem;

std::string quoted(const fs::path& path) {
  return "'" + path.string() + "'";
}

// Every file the lock names ("neuronxcc-<v>/MODULE_.../f", "neuronxcc-<v>/0_REGISTRY/...") with
// the sha256 it locks.
std::map<std::string, std::string> locked_files(const fs::path& file) {
  std::map<std::string, std::string> out;
  for (const auto& locked : lockfile::parse(read_file(file), file.string()).configurations) {
    const artifact_index::Entry& e = locked.entry;
    for (const auto& module : e.modules) {
      for (const auto& f : module.files)
        out[e.compiler_dir() + "/" + module.name + "/" + f.name] = f.sha256;
    }
    for (const auto& f : e.registry) out[e.compiler_dir() + "/" + f.name] = f.sha256;
  }
  return out;
}

// The sha256 of each of `files` below `root` ("absent" for a missing one).
std::map<std::string, std::string> digests(const fs::path& root,
                                           const std::map<std::string, std::string>& files) {
  std::map<std::string, std::string> out;
  for (const auto& [path, sha256] : files)
    out[path] = fs::exists(root / path) ? sha256_of_file(root / path) : "absent";
  return out;
}

class LockCliTest : public testing::StoreKindTest {
 protected:
  void SetUp() override {
    StoreKindTest::SetUp();
    testing::StandInModel model{testing::kStoreKindModel, {{"c1", 1}, {"c2", 2}}};
    write_file(manifest, testing::stand_in_manifest({model}));
    ToolResult ci = machine(1).run("ci " + quoted(manifest) + " --repo " + store, store_env);
    ASSERT_EQ(ci.code, 0) << ci.all();
  }

  ToolResult on(int i, const std::string& args, const std::string& env = "") {
    return machine(i).run(args, store_env + " " + env);
  }

  fs::path manifest = work / "neuron-cache.yaml";
  fs::path lock = work / "neuron-cache.lock";
};

TEST_P(LockCliTest, LockThenPrefetchLockedInstallsTheSameBytesElsewhere) {
  ToolResult locked = on(1, "lock " + quoted(manifest) + " --repo " + store);
  ASSERT_EQ(locked.code, 0) << locked.all();
  EXPECT_TRUE(contains(locked.out, "locked 2 configurations")) << locked.all();
  std::string text = read_file(lock);
  lockfile::Lock parsed = lockfile::parse(text, "lock");
  ASSERT_EQ(parsed.configurations.size(), 2u);
  EXPECT_EQ(parsed.configurations[0].name, "c1");
  EXPECT_EQ(parsed.manifest, "neuron-cache.yaml");
  EXPECT_EQ(parsed.revision.empty(), GetParam() != "hub");
  // The same lock again gives the same bytes, also where --lockfile (as prefetch and bundle
  // spell it) puts it.
  ASSERT_EQ(on(1, "lock " + quoted(manifest) + " --repo " + store).code, 0);
  EXPECT_EQ(read_file(lock), text);
  fs::path elsewhere = work / "locks" / "ci.lock";
  fs::create_directories(elsewhere.parent_path());
  ToolResult named =
      on(1, "lock " + quoted(manifest) + " --repo " + store + " --lockfile " + quoted(elsewhere));
  ASSERT_EQ(named.code, 0) << named.all();
  EXPECT_EQ(read_file(elsewhere), text);
  std::string help = on(1, "lock --help").out;
  EXPECT_TRUE(contains(help, "--lockfile")) << help;
  EXPECT_FALSE(contains(help, "--output")) << "one spelling, --lockfile: " << help;
  // --check reads the two files only: it passes with the Hub and S3 unreachable.
  ToolResult checked = on(1, "lock --check " + quoted(manifest),
                          "HF_ENDPOINT=http://127.0.0.1:9 AWS_ENDPOINT_URL=http://127.0.0.1:9");
  EXPECT_EQ(checked.code, 0) << checked.all();

  hub.clear_log();
  ToolResult fetched = on(2, "prefetch --locked " + quoted(manifest) + " --repo " + store);
  ASSERT_EQ(fetched.code, 0) << fetched.all();
  EXPECT_TRUE(contains(fetched.out, "prefetched 2 configurations")) << fetched.all();
  std::map<std::string, std::string> files = locked_files(lock);
  EXPECT_GE(files.size(), 8u);
  EXPECT_EQ(digests(work / "machine2" / "cache", files), files);
  // No head, index, listing or registry read: only downloads of the locked files, at the
  // locked revision.
  for (const auto& request : hub.access_log()) {
    if (request["listener"] != "hub") continue;
    std::string path = request["path"];
    // A regular file's resolve redirects to the pinned /api/resolve-cache/ URL of that revision.
    EXPECT_TRUE(
        contains(path, "/resolve/" + parsed.revision + "/") ||
        (path.starts_with("/api/resolve-cache/") && contains(path, "/" + parsed.revision + "/")))
        << path;
  }
  // ci --locked on a third machine: the same files, nothing compiled or pushed, an export
  // folder per configuration; a report like any run's.
  ToolResult ci = on(3, "ci --locked " + quoted(manifest) + " --repo " + store + " --export-dir " +
                            quoted(work / "exported") + " --json");
  ASSERT_EQ(ci.code, 0) << ci.all();
  json report = json::parse(ci.out);
  EXPECT_EQ(report["totals"]["compiled"], 0) << report.dump(1);
  EXPECT_EQ(report["totals"]["store_hits"], 2) << report.dump(1);
  EXPECT_TRUE(fs::exists(work / "exported" / "c1" / "neuron-cache-entry.json"));
  EXPECT_EQ(digests(work / "machine3" / "cache", files), files);
  // What prefetch --locked installed is complete for a plan too: nothing to compile.
  ToolResult plan = on(2, "plan " + quoted(manifest) + " --repo " + store + " --fail-on-miss");
  EXPECT_EQ(plan.code, 0) << plan.all();
}

// The store unreachable, a mirror (a shared folder holding a copy) serves the lock; a tampered
// copy is refused and leaves nothing that looks complete.
TEST_P(LockCliTest, AMirrorServesTheLockAndATamperedFileIsRefused) {
  ASSERT_EQ(on(1, "lock " + quoted(manifest) + " --repo " + store).code, 0);
  fs::path mirror = work / "mirror";
  fs::create_directories(mirror);
  ASSERT_EQ(on(1, "create -n file://" + mirror.string()).code, 0);
  // The mirror: a copy of the locked files, taken from a machine that fetched them.
  ASSERT_EQ(on(2, "prefetch --locked " + quoted(manifest) + " --repo " + store).code, 0);
  std::map<std::string, std::string> files = locked_files(lock);
  for (const auto& [path, sha256] : files)
    write_file(mirror / path, read_file(work / "machine2" / "cache" / path));
  std::string down = "HF_ENDPOINT=http://127.0.0.1:9 AWS_ENDPOINT_URL=http://127.0.0.1:9";

  ToolResult fetched =
      on(3, "prefetch --locked " + quoted(manifest) + " --repo file://" + mirror.string(), down);
  ASSERT_EQ(fetched.code, 0) << fetched.all();
  EXPECT_EQ(digests(work / "machine3" / "cache", files), files);

  std::string neff;
  for (const auto& [path, sha256] : files)
    if (path.ends_with("model.neff")) neff = path;
  ASSERT_FALSE(neff.empty());
  std::string bad = read_file(mirror / neff);
  bad[bad.size() / 2] ^= 1;
  write_file(mirror / neff, bad);
  ToolResult refused =
      on(4, "prefetch --locked " + quoted(manifest) + " --repo file://" + mirror.string(), down);
  EXPECT_EQ(refused.code, 1) << refused.all();
  EXPECT_TRUE(contains(refused.err, "could not fetch") && contains(refused.err, "has sha256"))
      << refused.all();
  fs::path module = work / "machine4" / "cache" / fs::path(neff).parent_path();
  EXPECT_FALSE(fs::exists(module / "model.done")) << module;
  EXPECT_FALSE(fs::exists(module / "model.neff")) << module;
}

// The store itself (Hub, S3 or folder) serves a locked file with one byte changed and the same
// size: the locked prefetch fails (exit 1) and installs nothing of that MODULE folder.
TEST_P(LockCliTest, AByteChangedInTheStoreIsRefusedAndNothingIsInstalled) {
  ASSERT_EQ(on(1, "lock " + quoted(manifest) + " --repo " + store).code, 0);
  std::map<std::string, std::string> files = locked_files(lock);
  std::string neff;
  for (const auto& [path, sha256] : files)
    if (path.ends_with("model.neff")) neff = path;
  ASSERT_FALSE(neff.empty());
  auto flipped = [](std::string bytes) {
    bytes[bytes.size() / 2] ^= 1;
    return bytes;
  };
  if (GetParam() == "folder") {
    fs::path file = work / "share" / neff;
    write_file(file, flipped(read_file(file)));
  } else if (GetParam() == "s3") {
    std::string key = "fleet/" + neff;
    ASSERT_TRUE(s3->has(key)) << key;
    s3->put(key, flipped(s3->body(key)));
  } else {  // the Hub's LFS object, by its sha256, changed where the server keeps it
    std::optional<fs::path> object;
    for (const auto& item : fs::recursive_directory_iterator(hub.data_dir()))
      if (item.is_regular_file() && contains(item.path().string(), files[neff])) object = item;
    ASSERT_TRUE(object) << "no stored object for " << files[neff];
    fs::permissions(*object, fs::perms::owner_write, fs::perm_options::add);
    write_file(*object, flipped(read_file(*object)));
  }
  ToolResult refused = on(2, "prefetch --locked " + quoted(manifest) + " --repo " + store);
  EXPECT_EQ(refused.code, 1) << refused.all();
  EXPECT_TRUE(contains(refused.err, "has sha256") || contains(refused.err, "does not match its"))
      << refused.all();
  fs::path module = work / "machine2" / "cache" / fs::path(neff).parent_path();
  EXPECT_FALSE(fs::exists(module / "model.done")) << module;
  EXPECT_FALSE(fs::exists(module / "model.neff")) << module;
}

TEST_P(LockCliTest, AChangedManifestIsNamedAndNothingIsFetched) {
  ASSERT_EQ(on(1, "lock " + quoted(manifest) + " --repo " + store).code, 0);
  testing::StandInModel model{testing::kStoreKindModel, {{"c1", 1}, {"c2", 2}, {"c3", 3}}};
  write_file(manifest, testing::stand_in_manifest({model}));
  ToolResult checked = on(1, "lock --check " + quoted(manifest));
  EXPECT_EQ(checked.code, 3) << checked.all();
  EXPECT_TRUE(contains(checked.err, "changed since")) << checked.all();
  ToolResult refused = on(2, "prefetch --locked " + quoted(manifest) + " --repo " + store);
  EXPECT_EQ(refused.code, 2) << refused.all();
  EXPECT_TRUE(contains(refused.err, "neuron-cache lock")) << refused.all();
  EXPECT_FALSE(fs::exists(work / "machine2" / "cache" / testing::kCompilerDir));
  // c3 is not in the store: the lock says which, and is not written.
  std::string before = read_file(lock);
  ToolResult partial = on(1, "lock " + quoted(manifest) + " --repo " + store);
  EXPECT_EQ(partial.code, 1) << partial.all();
  EXPECT_TRUE(contains(partial.err, "c3: not in")) << partial.all();
  EXPECT_EQ(read_file(lock), before);
  // Once c3 is pushed, --update c3 locks it and keeps the others as they were locked.
  ASSERT_EQ(on(1, "ci " + quoted(manifest) + " --repo " + store).code, 0);
  ToolResult updated = on(1, "lock " + quoted(manifest) + " --repo " + store + " --update c3");
  ASSERT_EQ(updated.code, 0) << updated.all();
  lockfile::Lock after = lockfile::parse(read_file(lock), "lock");
  ASSERT_EQ(after.configurations.size(), 3u);
  lockfile::Lock old = lockfile::parse(before, "lock");
  EXPECT_EQ(artifact_index::serialize_entry(after.configurations[0].entry),
            artifact_index::serialize_entry(old.configurations[0].entry));
  EXPECT_EQ(on(1, "lock --check " + quoted(manifest)).code, 0);
}

// A bundle carries the lock and its files to a machine with no network: installed byte for
// byte; a flipped byte in a file, a member outside the folder or a link is refused.
TEST_P(LockCliTest, ABundleInstallsWithNoNetworkAndHostileBundlesAreRefused) {
  ASSERT_EQ(on(1, "lock " + quoted(manifest) + " --repo " + store).code, 0);
  fs::path tar = work / "cache.tar";
  ToolResult bundled =
      on(1, "bundle " + quoted(manifest) + " --repo " + store + " -o " + quoted(tar));
  ASSERT_EQ(bundled.code, 0) << bundled.all();
  std::map<std::string, std::string> files = locked_files(lock);
  std::string down = "HF_ENDPOINT=http://127.0.0.1:9 AWS_ENDPOINT_URL=http://127.0.0.1:9";
  ToolResult fetched =
      on(5, "prefetch --from-bundle " + quoted(tar) + " " + quoted(manifest), down);
  ASSERT_EQ(fetched.code, 0) << fetched.all();
  EXPECT_EQ(digests(work / "machine5" / "cache", files), files);

  // A flipped byte inside a NEFF: refused by its sha256, nothing of its folder installed.
  std::string neff;
  for (const auto& [path, sha256] : files)
    if (path.ends_with("model.neff")) neff = path;
  std::string bytes = read_file(tar);
  std::string content = read_file(work / "machine5" / "cache" / neff);
  size_t at = bytes.find(content.substr(0, 64));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 10] ^= 1;
  write_file(work / "bad.tar", bytes);
  ToolResult refused =
      on(6, "prefetch --from-bundle " + quoted(work / "bad.tar") + " " + quoted(manifest), down);
  EXPECT_EQ(refused.code, 1) << refused.all();
  EXPECT_TRUE(contains(refused.err, "has sha256")) << refused.all();
  EXPECT_FALSE(
      fs::exists(work / "machine6" / "cache" / fs::path(neff).parent_path() / "model.done"));

  // Members a bundle must never hold, written by CPython's tarfile: refused before any use.
  for (std::string kind : {"../escape", "link"}) {
    std::string script =
        "import io, sys, tarfile\n"
        "t = tarfile.open(sys.argv[1], 'w', format=tarfile.USTAR_FORMAT)\n"
        "lock = open(sys.argv[2], 'rb').read()\n"
        "i = tarfile.TarInfo('neuron-cache.lock'); i.size = len(lock); t.addfile(i, "
        "io.BytesIO(lock))\n"
        "if sys.argv[3] == 'link':\n"
        "    i = tarfile.TarInfo('neuronxcc-x/MODULE_1/model.neff'); i.type = tarfile.SYMTYPE\n"
        "    i.linkname = '/etc/passwd'; t.addfile(i)\n"
        "else:\n"
        "    i = tarfile.TarInfo(sys.argv[3]); i.size = 1; t.addfile(i, io.BytesIO(b'x'))\n"
        "t.close()\n";
    write_file(work / "hostile.py", script);
    fs::path hostile = work / "hostile.tar";
    ASSERT_EQ(
        testing::run_command(std::string(NEURON_CACHE_PYTHON) + " " + quoted(work / "hostile.py") +
                                 " " + quoted(hostile) + " " + quoted(lock) + " '" + kind + "'",
                             nullptr),
        0);
    ToolResult bad =
        on(7, "prefetch --from-bundle " + quoted(hostile) + " " + quoted(manifest), down);
    EXPECT_EQ(bad.code, 2) << kind << ": " << bad.all();
    EXPECT_TRUE(contains(bad.err, "refused")) << bad.all();
  }
  EXPECT_FALSE(fs::exists(fs::temp_directory_path() / "escape"));

  // Bundles that hold more than their lock names: a file it does not name, a locked file twice,
  // a second lockfile, or no lockfile first; and a bundle cut short. Each is refused (exit 2)
  // and leaves nothing in TMPDIR.
  std::string locked_neff = read_file(work / "machine5" / "cache" / neff);
  write_file(work / "neff-bytes", locked_neff);
  std::string more =
      "import io, sys, tarfile\n"
      "out, lock, kind, path, content = sys.argv[1:6]\n"
      "t = tarfile.open(out, 'w', format=tarfile.USTAR_FORMAT)\n"
      "def add(name, data):\n"
      "    i = tarfile.TarInfo(name); i.size = len(data); t.addfile(i, io.BytesIO(data))\n"
      "lock = open(lock, 'rb').read(); data = open(content, 'rb').read()\n"
      "if kind != 'nolockfirst': add('neuron-cache.lock', lock)\n"
      "add(path if kind != 'extra' else 'neuronxcc-x/MODULE_9/extra.bin', data)\n"
      "if kind == 'dup': add(path, data)\n"
      "if kind in ('twolocks', 'nolockfirst'): add('neuron-cache.lock', lock)\n"
      "t.close()\n";
  write_file(work / "more.py", more);
  fs::path scratch = work / "scratch";
  fs::create_directories(scratch);
  auto refused_cleanly = [&](const fs::path& bundle, const std::string& what,
                             const std::string& words) {
    ToolResult bad = on(8, "prefetch --from-bundle " + quoted(bundle) + " " + quoted(manifest),
                        down + " TMPDIR=" + quoted(scratch));
    EXPECT_EQ(bad.code, 2) << what << ": " << bad.all();
    EXPECT_TRUE(contains(bad.err, words)) << what << ": " << bad.all();
    EXPECT_TRUE(fs::is_empty(scratch)) << what << ": the scratch folder was left";
  };
  for (const auto& [kind, words] : std::map<std::string, std::string>{
           {"extra", "which its lock does not name"},
           {"dup", "which its lock does not name or which it holds twice"},
           {"twolocks", "a second neuron-cache.lock"},
           {"nolockfirst", "not a neuron-cache bundle"}}) {
    fs::path hostile = work / (kind + ".tar");
    ASSERT_EQ(
        testing::run_command(std::string(NEURON_CACHE_PYTHON) + " " + quoted(work / "more.py") +
                                 " " + quoted(hostile) + " " + quoted(lock) + " " + kind + " " +
                                 quoted(fs::path(neff)) + " " + quoted(work / "neff-bytes"),
                             nullptr),
        0);
    refused_cleanly(hostile, kind, words);
  }
  std::string whole = read_file(tar);
  write_file(work / "cut.tar", whole.substr(0, whole.size() / 2));
  refused_cleanly(work / "cut.tar", "truncated", "is truncated");

  // A link planted where `bundle -o` keeps its partial file is replaced, never written through.
  write_file(work / "victim", "keep me");
  fs::path out = work / "again.tar";
  fs::create_symlink(work / "victim", out.string() + ".partial");
  ToolResult again =
      on(1, "bundle " + quoted(manifest) + " --repo " + store + " -o " + quoted(out));
  ASSERT_EQ(again.code, 0) << again.all();
  EXPECT_EQ(read_file(work / "victim"), "keep me");
  EXPECT_EQ(read_file(out), read_file(tar));
}

TEST(LockFile, RoundTripIsStableAndTamperingIsRefused) {
  lockfile::Lock lock;
  lock.manifest = "neuron-cache.yaml";
  lock.manifest_sha256 = std::string(64, 'a');
  lock.store = "hf://acme/cache";
  lock.revision = std::string(40, 'b');
  artifact_index::Entry entry =
      testing::sample_index_entry(testing::sample_key_inputs("org/m"), "zeta");
  lock.configurations = {{"zeta", entry, {}}, {"alpha", entry, {}}};
  std::string text = lockfile::serialize(lock);
  lockfile::Lock parsed = lockfile::parse(text, "t");
  EXPECT_EQ(parsed.configurations[0].name, "alpha");  // sorted by name
  EXPECT_EQ(lockfile::serialize(parsed), text);
  // A key that does not match its inputs, an unsafe file name, a newer format: refused.
  std::string wrong_key = text;
  wrong_key.replace(wrong_key.find(entry.key), 4, "ffff");
  EXPECT_THROW(lockfile::parse(wrong_key, "t"), Error);
  std::string unsafe = text;
  unsafe.replace(unsafe.find("\"model.neff\""), 12, "\"../x.neff\"");
  EXPECT_THROW(lockfile::parse(unsafe, "t"), Error);
  std::string newer = text;
  newer.replace(newer.find("\"format_version\": 1"), 19, "\"format_version\": 2");
  EXPECT_THROW(lockfile::parse(newer, "t"), Error);
  EXPECT_THROW(lockfile::parse("[]", "t"), Error);
}

INSTANTIATE_TEST_SUITE_P(Stores, LockCliTest, ::testing::Values("folder", "hub", "s3"),
                         [](const auto& info) { return info.param; });

// Only the Hub keeps history, so only the Hub forgets a locked commit.
class LockedCommitTest : public LockCliTest {};

// `gc --squash` forgets the commit a lock pins. A locked prefetch then reads the locked files at
// the head, still checked against the lock's sha256, and says why and what to run; with the
// files changed at the head it refuses them.
TEST_P(LockedCommitTest, ASquashedCommitIsReadAtTheHeadStillVerified) {
  ASSERT_EQ(on(1, "lock " + quoted(manifest) + " --repo " + store).code, 0);
  ToolResult squashed = on(1, "gc --repo " + store + " --unreferenced keep --apply --squash");
  ASSERT_EQ(squashed.code, 0) << squashed.all();
  ASSERT_TRUE(contains(squashed.out, "Squashed the history")) << squashed.all();

  ToolResult fetched = on(2, "prefetch --locked " + quoted(manifest) + " --repo " + store);
  ASSERT_EQ(fetched.code, 0) << fetched.all();
  EXPECT_TRUE(contains(fetched.err, "is gone from") && contains(fetched.err, "gc --squash") &&
              contains(fetched.err, "neuron-cache lock "))
      << fetched.all();
  EXPECT_TRUE(contains(fetched.out, "prefetched 2 configurations")) << fetched.all();
  std::map<std::string, std::string> files = locked_files(lock);
  EXPECT_EQ(digests(work / "machine2" / "cache", files), files);

  // The lock's sha256 still decides: a NEFF changed at the head is refused.
  std::string neff;
  for (const auto& [path, sha256] : files)
    if (path.ends_with("model.neff")) neff = path;
  ASSERT_FALSE(neff.empty());
  hub::ClientOptions options;
  options.endpoint = hub.url();
  options.token = testing::kHubWriteToken;
  hub::HubClient client(options);
  write_file(work / "other.neff", "not the locked bytes");
  client.commit(testing::kTestCacheRepo,
                {{hub::CommitOperation::Kind::Add, neff, work / "other.neff"}}, "another NEFF",
                std::nullopt);
  ToolResult refused = on(3, "prefetch --locked " + quoted(manifest) + " --repo " + store);
  EXPECT_EQ(refused.code, 1) << refused.all();
  EXPECT_TRUE(contains(refused.err, "is gone from")) << refused.all();
  EXPECT_FALSE(
      fs::exists(work / "machine3" / "cache" / fs::path(neff).parent_path() / "model.done"));
}

INSTANTIATE_TEST_SUITE_P(Hub, LockedCommitTest, ::testing::Values("hub"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace neuron_cache
