// `neuron-cache fetch` and transfer::fetch_modules against the local Hub server: named MODULE_
// folders and traced exports named by their registry entry, installed byte for byte, refused
// when the listing is hostile, and not downloaded again when complete locally.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <string>

#include "hub_fixture.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/hub/client.h"
#include "neuron_cache/local/cache_tree.h"
#include "neuron_cache/local/hf_file_cache.h"
#include "neuron_cache/transfer/fetch.h"
#include "optimum_writer.h"
#include "stores.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

using nlohmann::json;
using testing::contains;
using testing::HubServer;
using testing::TempDir;
using testing::ToolRun;
namespace fs = std::filesystem;

constexpr const char* kRepo = "acme/fetch-cache";
constexpr const char* kCompiler = "neuronxcc-2.21.33363.0+82129205";

// The files of two NEFF folders (model.neff is LFS through the Hub's .gitattributes), by path
// relative to the compiler folder.
std::map<std::string, std::string> module_files() {
  return {{"MODULE_11+d7cde3b5/model.neff", std::string(5000, 'n') + "neff-11"},
          {"MODULE_11+d7cde3b5/model.done", ""},
          {"MODULE_11+d7cde3b5/model.hlo_module.pb", "hlo-11"},
          {"MODULE_11+d7cde3b5/compile_flags.json",
           "[\"--model-type=transformer\", \"--auto-cast=none\"]"},
          {"MODULE_22+d7cde3b5/model.neff", "neff-22"},
          {"MODULE_22+d7cde3b5/model.done", ""},
          {"MODULE_22+d7cde3b5/extra/wrapped_neff.hlo", "wrapped-22"}};
}

json seeded_config(const json& extra_files = json::object()) {
  json files = json::object();
  for (const auto& [path, content] : module_files())
    files[std::string(kCompiler) + "/" + path] = content;
  files["neuronxcc-2.15.128.0+56dc5a86/MODULE_33+d7cde3b5/model.done"] = "";
  files["neuronxcc-2.21.9.0+11111111/MODULE_44+d7cde3b5/model.done"] = "";
  for (const auto& [path, content] : extra_files.items()) files[path] = content;
  json config = HubServer::example_config();
  config["repos"].push_back({{"id", kRepo}, {"private", false}, {"files", files}});
  return config;
}

size_t requests_with(const HubServer& server, const std::string& part) {
  return testing::count_requests(server.access_log(),
                                 [&](const json& e) { return contains(e["path"], part); });
}

class FetchTest : public ::testing::Test {
 protected:
  explicit FetchTest(const json& extra_files = json::object())
      : server(seeded_config(extra_files)) {}

  ToolRun tool(const std::string& args) {
    std::string command =
        std::string(testing::kCleanEnv) + " PATH=/usr/bin:/bin HOME=/nonexistent-home HF_HOME='" +
        home.path().string() + "' HF_ENDPOINT=" + server.url() +
        " HF_TOKEN=" + testing::kHubReadToken + " NEURON_CACHE_RETRY_BASE_MS=10 " +
        testing::tool_path() + " fetch --repo " + kRepo + " --cache-dir '" + cache.path().string() +
        "' " + args + " 2>&1";
    ToolRun run{};
    run.code = testing::run_command(command, &run.output);
    return run;
  }

  hub::HubClient client() {
    hub::ClientOptions options;
    options.endpoint = server.url();
    options.token = testing::kHubReadToken;
    return hub::HubClient(options);
  }

  HubServer server;
  TempDir home;
  TempDir cache;
};

TEST_F(FetchTest, InstallsNamedModulesByteForByte) {
  ToolRun run = tool("--compiler-version 2.21.33363.0 MODULE_11+d7cde3b5 MODULE_22+d7cde3b5");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "MODULE_11+d7cde3b5: installed (4 files")) << run.output;
  for (const auto& [path, content] : module_files()) {
    EXPECT_EQ(testing::read_file(cache / (std::string(kCompiler) + "/" + path)), content) << path;
  }
  local::LocalCache local(cache.path());
  local::CacheTree tree = local.scan("", false);
  ASSERT_EQ(tree.compilers.size(), 1u);
  for (const auto& module : tree.compilers[0].modules) {
    EXPECT_EQ(module.state, layout::EntryState::Success) << module.name;
  }
  EXPECT_FALSE(std::filesystem::exists(cache / ".cache/huggingface/neuron-cache-staging") &&
               !std::filesystem::is_empty(cache / ".cache/huggingface/neuron-cache-staging"))
      << "no staging leftovers";
}

TEST_F(FetchTest, ReturnsARecordOfEachInstalledFolder) {
  hub::HubClient hub = client();
  local::LocalCache local(cache.path());
  transfer::FetchResult result = transfer::fetch_modules(*testing::hub_store(hub, kRepo), "main",
                                                         local, kCompiler, {"MODULE_22+d7cde3b5"});
  ASSERT_EQ(result.modules.size(), 1u);
  ASSERT_EQ(result.modules[0].status, transfer::FetchStatus::Installed) << result.modules[0].error;
  ASSERT_TRUE(result.modules[0].record.has_value());
  std::map<std::string, std::string> sha256;
  for (const auto& file : result.modules[0].record->files) sha256[file.name] = file.sha256;
  EXPECT_EQ(sha256.size(), 3u);
  EXPECT_EQ(sha256["model.neff"], sha256_hex("neff-22")) << "LFS: the listing's sha256";
  EXPECT_EQ(sha256["extra/wrapped_neff.hlo"], sha256_hex("wrapped-22")) << "regular: hashed";
  EXPECT_EQ(sha256["model.done"], sha256_hex(""));
  EXPECT_EQ(result.listing_requests, 1u);
  EXPECT_TRUE(result.ok());
}

TEST_F(FetchTest, AFolderAlreadyPresentIsNotDownloadedAgain) {
  ASSERT_EQ(tool("--compiler-version 2.21.33363.0 MODULE_11+d7cde3b5").code, 0);
  auto before = testing::snapshot_tree(cache.path());
  server.clear_log();
  ToolRun again = tool("--compiler-version 2.21.33363.0 MODULE_11+d7cde3b5 --json");
  ASSERT_EQ(again.code, 0) << again.output;
  json result = json::parse(again.output);
  EXPECT_EQ(result["items"][0]["status"], "already present");
  EXPECT_EQ(result["bytes_downloaded"], 0);
  EXPECT_EQ(requests_with(server, "/resolve/"), 0u);
  EXPECT_EQ(requests_with(server, "/tree/"), 1u) << "the root listing only";
  EXPECT_EQ(testing::snapshot_tree(cache.path()), before);
}

TEST_F(FetchTest, AnUnknownModuleIsNotOnTheHub) {
  ToolRun run = tool("--compiler-version 2.21.33363.0 MODULE_11+d7cde3b5 MODULE_99+d7cde3b5");
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_TRUE(contains(run.output, "MODULE_99+d7cde3b5: not on the Hub")) << run.output;
  EXPECT_TRUE(contains(run.output, "check the name and the compiler version")) << run.output;
  EXPECT_TRUE(contains(run.output, "MODULE_11+d7cde3b5: installed")) << "the others still go in";
  EXPECT_FALSE(std::filesystem::exists(cache / (std::string(kCompiler) + "/MODULE_99+d7cde3b5")));
}

TEST_F(FetchTest, TheCompilerVersionMustNameOneFolder) {
  ToolRun ambiguous = tool("--compiler-version 2.21 MODULE_11+d7cde3b5");
  EXPECT_EQ(ambiguous.code, 2) << ambiguous.output;
  EXPECT_TRUE(contains(ambiguous.output, "matches several folders")) << ambiguous.output;
  ToolRun missing = tool("--compiler-version 2.99 MODULE_11+d7cde3b5");
  EXPECT_EQ(missing.code, 2) << missing.output;
  EXPECT_TRUE(contains(missing.output, "has no compiler folder neuronxcc-2.99*")) << missing.output;
  ToolRun none = tool("MODULE_11+d7cde3b5");
  EXPECT_EQ(none.code, 2) << none.output;
  EXPECT_TRUE(contains(none.output, "--compiler-version")) << none.output;
}

TEST_F(FetchTest, DryRunWritesNothing) {
  ToolRun run = tool("--compiler-version 2.21.33363.0 MODULE_11+d7cde3b5 --dry-run");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "MODULE_11+d7cde3b5: would fetch 4 files")) << run.output;
  EXPECT_TRUE(testing::snapshot_tree(cache.path()).empty());
  EXPECT_EQ(requests_with(server, "/resolve/"), 0u);
  ToolRun json_run = tool("--compiler-version 2.21.33363.0 MODULE_22+d7cde3b5 --dry-run --json");
  ASSERT_EQ(json_run.code, 0) << json_run.output;
  json item = json::parse(json_run.output)["items"][0];
  EXPECT_EQ(item["status"], "to fetch");
  EXPECT_EQ(item["files"], 3);
  EXPECT_EQ(item["bytes"], 17);
  EXPECT_TRUE(testing::snapshot_tree(cache.path()).empty());
}

// Issue 24 (3): a file optimum-neuron's hub proxy downloaded into the HF file cache and linked
// into a MODULE folder is taken from there when it verifies against the listing, instead of
// crossing the network a second time; nothing about the links is trusted.
class LocalCopyTest : public FetchTest {
 protected:
  static constexpr const char* kModule = "MODULE_11+d7cde3b5";
  fs::path hub() const { return hf / "hub"; }
  fs::path repo_folder() const { return hub() / "models--acme--fetch-cache"; }
  static std::string neff() { return module_files().at(std::string(kModule) + "/model.neff"); }
  static std::string sha() { return sha256_hex(neff()); }
  fs::path blob() const { return repo_folder() / "blobs" / sha(); }
  fs::path snapshot() const { return repo_folder() / "snapshots/0123abcd" / rel; }
  const std::string rel = std::string(kCompiler) + "/" + kModule + "/model.neff";

  // huggingface_hub's layout (blobs/<sha256>, snapshots/<commit>/<path> a relative link to it)
  // and the proxy's link to the snapshot in the staging cache.
  void lay_out(const std::string& content) {
    fs::create_directories(blob().parent_path());
    testing::write_file(blob(), content);
    fs::create_directories(snapshot().parent_path());
    fs::create_symlink(fs::relative(blob(), snapshot().parent_path()), snapshot());
    link_to(snapshot());
  }
  void link_to(const fs::path& target) const {
    fs::path link = stage / rel;
    fs::create_directories(link.parent_path());
    fs::remove(link);
    fs::create_symlink(target, link);
  }
  // What open_hf_blob makes of the proxy's link.
  std::optional<local::HfBlob> blob_of_link(const fs::path& hub_cache = {}) const {
    auto dir = sys::SafeDir::open(stage.path()).open_path(std::string(kCompiler) + "/" + kModule);
    return dir ? local::open_hf_blob(hub_cache.empty() ? hub() : hub_cache, *dir, "model.neff")
               : std::nullopt;
  }
  // fetch_modules of the folder into `root`, the proxy's links its local candidates.
  transfer::FetchResult fetch(const fs::path& root) {
    hub::HubClient hub_client = client();
    local::LocalCache local(root);
    transfer::LocalCandidate candidate = [&](const std::string& module,
                                             const storage::RemoteEntry& file) {
      auto dir = sys::SafeDir::open(stage.path()).open_path(std::string(kCompiler) + "/" + module);
      auto found = dir ? local::open_hf_blob(hub(), *dir, file.path) : std::nullopt;
      if (!found || found->id != file.listed_sha256) return sys::UniqueFd();
      return std::move(found->fd);
    };
    server.clear_log();
    return transfer::fetch_modules(*testing::hub_store(hub_client, kRepo), "main", local, kCompiler,
                                   {kModule}, candidate);
  }
  size_t neff_downloads() const {
    return testing::count_requests(server.access_log(), [](const json& e) {
      std::string path = e["path"];
      return contains(path, "/resolve/") && path.ends_with("/model.neff");
    });
  }
  static uint64_t graph_bytes() {  // the folder's files but the NEFF and model.done
    return module_files().at(std::string(kModule) + "/model.hlo_module.pb").size() +
           module_files().at(std::string(kModule) + "/compile_flags.json").size();
  }

  TempDir hf;
  TempDir stage;
};

TEST_F(LocalCopyTest, AVerifiedBlobIsLinkedInsteadOfDownloaded) {
  lay_out(neff());
  transfer::FetchResult result = fetch(cache.path());
  ASSERT_TRUE(result.ok()) << result.modules[0].error;
  EXPECT_EQ(result.files_linked, 1u);
  EXPECT_EQ(result.bytes_linked, neff().size());
  EXPECT_EQ(neff_downloads(), 0u) << "the NEFF crossed the network once, for the proxy";
  EXPECT_EQ(result.bytes_downloaded, graph_bytes()) << "the graph files only";
  EXPECT_EQ(testing::read_file(cache / rel), neff());
  EXPECT_TRUE(fs::equivalent(cache / rel, blob())) << "a hard link: same filesystem, ours";
  EXPECT_EQ(result.modules[0].record->files.size(), 4u);
  local::LocalCache local(cache.path());
  EXPECT_EQ(local.scan("", false).compilers[0].modules[0].state, layout::EntryState::Success);
}

TEST_F(LocalCopyTest, ABlobOthersMayWriteIsCopiedNotShared) {
  lay_out(neff());
  fs::permissions(blob(), fs::perms::group_write, fs::perm_options::add);
  transfer::FetchResult result = fetch(cache.path());
  ASSERT_TRUE(result.ok()) << result.modules[0].error;
  EXPECT_EQ(result.files_linked, 1u);
  EXPECT_EQ(neff_downloads(), 0u);
  EXPECT_EQ(testing::read_file(cache / rel), neff());
  EXPECT_FALSE(fs::equivalent(cache / rel, blob())) << "a later write there must not reach us";
}

TEST_F(LocalCopyTest, ABlobThatDoesNotVerifyIsDownloadedInstead) {
  // Named by the right sha256, the right size, other bytes.
  std::string tampered = neff();
  tampered[100] ^= 1;
  lay_out(tampered);
  ASSERT_TRUE(blob_of_link().has_value()) << "the chain itself is the proxy's";
  transfer::FetchResult result = fetch(cache.path());
  ASSERT_TRUE(result.ok()) << result.modules[0].error;
  EXPECT_EQ(result.files_linked, 0u);
  EXPECT_EQ(neff_downloads(), 1u);
  EXPECT_EQ(result.bytes_downloaded, graph_bytes() + neff().size());
  EXPECT_EQ(testing::read_file(cache / rel), neff());
  EXPECT_EQ(testing::read_file(blob()), tampered) << "the HF file cache is never written";
  // Cut short, or longer: the same.
  for (std::string other : {neff().substr(0, 4000), neff() + "x"}) {
    fs::remove(blob());
    testing::write_file(blob(), other);
    TempDir root;
    transfer::FetchResult again = fetch(root.path());
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again.files_linked, 0u);
    EXPECT_EQ(testing::read_file(root / rel), neff());
  }
}

TEST_F(LocalCopyTest, OnlyTheProxysChainIntoTheHfFileCacheIsFollowed) {
  lay_out(neff());
  ASSERT_TRUE(blob_of_link().has_value());
  EXPECT_EQ(blob_of_link()->id, sha());
  // The same bytes under the same names, outside the HF file cache.
  TempDir elsewhere;
  fs::path outside = elsewhere / "models--acme--fetch-cache/blobs" / sha();
  fs::create_directories(outside.parent_path());
  testing::write_file(outside, neff());
  link_to(outside);
  EXPECT_FALSE(blob_of_link().has_value()) << "a link out of the cache";
  link_to(fs::relative(outside, (stage / rel).parent_path()));
  EXPECT_FALSE(blob_of_link().has_value()) << "a relative link out of the cache";
  // Into the cache, then up and out with "..", to where the kernel would find the same bytes.
  fs::path up = hub() / "models--acme--fetch-cache/snapshots/0123abcd";
  std::string escaping = up.string();
  for ([[maybe_unused]] const auto& part : up.relative_path()) escaping += "/..";
  link_to(escaping + outside.string());
  ASSERT_EQ(testing::read_file(stage / rel), neff()) << "the kernel follows it out";
  EXPECT_FALSE(blob_of_link().has_value()) << "'..' out of the cache";
  // A snapshot link to another repo's blob, a blob that is a link, a FIFO: refused.
  fs::path other_blob = hub() / "models--evil--repo/blobs" / sha();
  fs::create_directories(other_blob.parent_path());
  testing::write_file(other_blob, neff());
  fs::remove(snapshot());
  fs::create_symlink(fs::relative(other_blob, snapshot().parent_path()), snapshot());
  link_to(snapshot());
  EXPECT_FALSE(blob_of_link().has_value()) << "another repo's blob";
  fs::remove(snapshot());
  fs::create_symlink(fs::relative(blob(), snapshot().parent_path()), snapshot());
  fs::remove(blob());
  fs::create_symlink(outside, blob());
  EXPECT_FALSE(blob_of_link().has_value()) << "a blob that is a link";
  fs::remove(blob());
  ASSERT_EQ(mkfifo(blob().c_str(), 0644), 0);
  EXPECT_FALSE(blob_of_link().has_value()) << "a FIFO (and no hang)";
  // A file that is not a link at all in the staging cache is never a candidate.
  fs::remove(stage / rel);
  testing::write_file(stage / rel, neff());
  EXPECT_FALSE(blob_of_link().has_value());
  // Whatever was refused, the folder is installed from the store, whole.
  transfer::FetchResult result = fetch(cache.path());
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result.files_linked, 0u);
  EXPECT_EQ(testing::read_file(cache / rel), neff());
}

TEST_F(LocalCopyTest, TheHfFileCacheMayBeGivenThroughASymlinkOrWithATrailingSlash) {
  lay_out(neff());
  EXPECT_TRUE(blob_of_link(hub().string() + "/").has_value()) << "HF_HUB_CACHE=.../hub/";
  // HF_HOME through a symlink (another disk): the proxy's link holds the path it was given, or
  // the real one; either names the same cache.
  TempDir other;
  fs::path linked_home = other / "hf-link";
  fs::create_directory_symlink(hf.path(), linked_home);
  EXPECT_TRUE(blob_of_link(linked_home / "hub").has_value()) << "a link with the real path";
  link_to(linked_home / "hub" / fs::relative(snapshot(), hub()));
  EXPECT_TRUE(blob_of_link(linked_home / "hub").has_value()) << "a link with the given path";
  // A path the command was not given is not resolved by the kernel to find out, even when it
  // leads to the same cache: the file is downloaded instead.
  EXPECT_FALSE(blob_of_link().has_value());
}

class FetchHostileTest : public FetchTest {
 protected:
  FetchHostileTest()
      : FetchTest({{std::string(kCompiler) + "/MODULE_55+d7cde3b5/model.done", ""},
                   {std::string(kCompiler) + "/MODULE_55+d7cde3b5/../../evil.txt", "evil"}}) {}
};

TEST_F(FetchHostileTest, APathLeavingTheFolderIsRefused) {
  hub::HubClient hub = client();
  std::vector<hub::TreeEntry> listing =
      hub.list_tree(kRepo, std::string(kCompiler) + "/MODULE_55+d7cde3b5", true);
  bool hostile = false;
  for (const auto& entry : listing) hostile = hostile || contains(entry.path, "..");
  if (!hostile) GTEST_SKIP() << "the test server normalised the seeded path";
  server.clear_log();
  local::LocalCache local(cache.path());
  transfer::FetchResult result = transfer::fetch_modules(*testing::hub_store(hub, kRepo), "main",
                                                         local, kCompiler, {"MODULE_55+d7cde3b5"});
  ASSERT_EQ(result.modules.size(), 1u);
  EXPECT_EQ(result.modules[0].status, transfer::FetchStatus::Failed);
  EXPECT_TRUE(contains(result.modules[0].error, "not a safe path")) << result.modules[0].error;
  EXPECT_EQ(requests_with(server, "/resolve/"), 0u);
  EXPECT_TRUE(testing::snapshot_tree(cache.path()).empty());
  ToolRun run = tool("--compiler-version 2.21.33363.0 MODULE_55+d7cde3b5");
  EXPECT_EQ(run.code, 1);
  EXPECT_TRUE(contains(run.output, "refused")) << run.output;
}

// A traced export (sentence embedding) and a decoder entry, as optimum-neuron writes them: the
// traced export's artifacts are the folder MODULE_<entry hash>, without model.neff/model.done.
struct RegistrySeed {
  json files = json::object();
  std::string traced_hash;
  std::string decoder_hash;
  std::vector<std::string> traced_paths;  // primary file and alias
};

std::string stem(const std::string& path) {
  std::string name = path.substr(path.rfind('/') + 1);
  return name.substr(0, name.size() - 5);
}

RegistrySeed make_registry_seed() {
  json entries = testing::optimum_sample_entries(kCompiler);
  RegistrySeed seed;
  seed.files = testing::optimum_written(entries);
  for (const auto& [path, text] : seed.files.items()) {
    if (contains(path, "/org/bert-tiny/")) seed.traced_hash = stem(path);
    if (contains(path, "/org/llama-tiny/")) seed.decoder_hash = stem(path);
  }
  for (const auto& [path, text] : seed.files.items()) {
    if (stem(path) == seed.traced_hash) seed.traced_paths.push_back(path);
  }
  std::string folder = std::string(kCompiler) + "/MODULE_" + seed.traced_hash + "/";
  seed.files[folder + "config.json"] = "{\"model_type\": \"bert\"}";
  seed.files[folder + "model.neuron"] = "traced-graph";
  seed.files[folder + "tokenizer.json"] = "{}";
  return seed;
}

const RegistrySeed& registry_seed() {
  static const RegistrySeed seed = make_registry_seed();
  return seed;
}

class FetchRegistryTest : public FetchTest {
 protected:
  FetchRegistryTest() : FetchTest(registry_seed().files) {}
};

TEST_F(FetchRegistryTest, ATracedExportByHashBringsItsEntryAndFolder) {
  const RegistrySeed& seed = registry_seed();
  ASSERT_EQ(seed.traced_paths.size(), 2u) << "primary file and alias";
  ToolRun run = tool("--registry " + seed.traced_hash);
  ASSERT_EQ(run.code, 0) << run.output;
  std::string folder = std::string(kCompiler) + "/MODULE_" + seed.traced_hash + "/";
  for (const std::string name : {"config.json", "model.neuron", "tokenizer.json"}) {
    EXPECT_EQ(testing::read_file(cache / (folder + name)), seed.files[folder + name]) << name;
  }
  for (const auto& path : seed.traced_paths) {
    EXPECT_EQ(testing::read_file(cache / path), seed.files[path].get<std::string>()) << path;
  }
  EXPECT_FALSE(std::filesystem::exists(cache / (folder + "model.hlo_module.pb.lock")));
}

TEST_F(FetchRegistryTest, ATracedExportByPathBringsThatFile) {
  const RegistrySeed& seed = registry_seed();
  ToolRun run = tool("--json --registry " + seed.traced_paths[0]);
  ASSERT_EQ(run.code, 0) << run.output;
  json items = json::parse(run.output)["items"];
  ASSERT_EQ(items.size(), 2u) << run.output;
  EXPECT_EQ(items[0]["path"], std::string(kCompiler) + "/MODULE_" + seed.traced_hash);
  EXPECT_EQ(items[0]["status"], "installed");
  EXPECT_EQ(items[1]["path"], seed.traced_paths[0]);
  EXPECT_EQ(items[1]["status"], "installed");
  EXPECT_TRUE(std::filesystem::exists(cache / seed.traced_paths[0]));
  EXPECT_FALSE(std::filesystem::exists(cache / seed.traced_paths[1]));
}

TEST_F(FetchRegistryTest, ADecoderEntryNamesNoFolder) {
  ToolRun run = tool("--registry " + registry_seed().decoder_hash);
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_TRUE(contains(run.output, "not on the Hub")) << run.output;
  EXPECT_TRUE(contains(run.output, "Only traced exports")) << run.output;
  EXPECT_FALSE(std::filesystem::exists(cache / std::string(kCompiler) / "0_REGISTRY"))
      << "no registry entry without its folder";
  ToolRun bogus = tool("--registry not-a-hash");
  EXPECT_EQ(bogus.code, 2) << bogus.output;
  EXPECT_TRUE(contains(bogus.output, "20 lowercase hex")) << bogus.output;
  ToolRun unknown = tool("--registry " + std::string(20, 'a'));
  EXPECT_EQ(unknown.code, 2) << unknown.output;
  EXPECT_TRUE(contains(unknown.output, "no registry entry")) << unknown.output;
}

}  // namespace
}  // namespace neuron_cache
