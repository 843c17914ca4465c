// Signed entries on each kind of store (the test Hub, S3, a shared folder), as users run them:
// `ci` signs what it pushes with NEURON_CACHE_SIGNING_KEY; a machine whose manifest trusts that
// key and requires signatures installs it; another writer's entry (its own key, other bytes) or
// an entry changed after signing is compiled instead, the plan saying why; a key taken out of
// trusted_keys stops its entries; two keys during a rotation both work; locks and bundles carry
// the signatures; and no output of any run holds a byte of a secret key.
#include <gtest/gtest.h>

#include <fstream>

#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/lockfile.h"
#include "neuron_cache/hub/client.h"
#include "neuron_cache/trust/keys.h"
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

struct Key {
  fs::path secret_file;
  std::string public_line;
  std::string seed;  // base64, to look for in outputs
};

class SigningCliTest : public testing::StoreKindTest {
 protected:
  void SetUp() override {
    StoreKindTest::SetUp();
    for (const char* name : {"acme-ci-1", "acme-ci-2", "mallory-1"}) keys[name] = make_key(name);
    model = {testing::kStoreKindModel, {{"c1", 1}, {"c2", 2}}};
    shard = artifact_index::remote_shard_path(testing::kTestCompilerVersion, model.id);
    write_manifest(manifest, {"acme-ci-1", "acme-ci-2"}, true);
  }

  void TearDown() override {
    // The secret of every key stays out of every output of every run of the test, not even
    // masked (a mask would mean it reached a message); nothing else is masked for it either.
    for (const auto& output : outputs) EXPECT_FALSE(contains(output, "signing_key_****")) << output;
    for (const auto& [name, key] : keys) {
      for (const auto& output : outputs) {
        EXPECT_FALSE(contains(output, key.seed.substr(0, 16))) << name << " leaked:\n" << output;
        EXPECT_FALSE(contains(output, key.seed.substr(24, 16))) << name << " leaked:\n" << output;
      }
    }
  }

  Key make_key(const std::string& name) {
    fs::path file = work / "keys" / (name + ".secret");
    fs::create_directories(file.parent_path());
    ToolResult made = machine(0).run("key generate " + name + " --secret-file " + quoted(file));
    EXPECT_EQ(made.code, 0) << made.all();
    std::string text = read_file(file);
    return {file, made.out.substr(0, made.out.find('\n')), text.substr(text.find(':') + 1, 44)};
  }

  // A manifest of the two configurations trusting `trusted` keys.
  void write_manifest(const fs::path& file, const std::vector<std::string>& trusted, bool require) {
    std::string text;
    if (!trusted.empty()) {
      text += "trusted_keys:\n";
      for (const auto& name : trusted) text += "  - \"" + keys[name].public_line + "\"\n";
    }
    if (require) text += "require_signatures: true\n";
    write_file(file, text + testing::stand_in_manifest({model}));
  }

  ToolResult on(int i, const std::string& args, const std::string& env = "") {
    ToolResult result = machine(i).run(args + " --repo " + store, store_env + " " + env);
    outputs.push_back(result.all());
    return result;
  }
  std::string signing(const std::string& name) {
    return "NEURON_CACHE_SIGNING_KEY=" + keys[name].secret_file.string();
  }
  json plan_json(int i, const fs::path& file, const std::string& flags = "") {
    ToolResult plan = on(i, "plan " + quoted(file) + " --json " + flags);
    EXPECT_EQ(plan.code, 0) << plan.all();
    return json::parse(plan.out);
  }

  hub::HubClient client() const {
    hub::ClientOptions options;
    options.endpoint = hub.url();
    options.token = testing::kHubWriteToken;
    return hub::HubClient(options);
  }
  // A file of the store, read and written as another writer of it would, whatever its kind.
  std::string store_file(const std::string& path) {
    if (GetParam() == "folder") return read_file(work / "share" / path);
    if (GetParam() == "s3") return s3->body("fleet/" + path);
    return client().read_file(testing::kTestCacheRepo, path).value_or("");
  }
  void put_store_file(const std::string& path, const std::string& bytes) {
    if (GetParam() == "folder") return write_file(work / "share" / path, bytes);
    if (GetParam() == "s3") return s3->put("fleet/" + path, bytes);
    fs::path local = work / ("put-" + std::to_string(puts_++));
    write_file(local, bytes);
    client().commit(testing::kTestCacheRepo, {{hub::CommitOperation::Kind::Add, path, local}},
                    "another writer", std::nullopt);
  }

  // The size of c1's model.neff in machine `i`'s cache, or 0 when it has none.
  uint64_t neff_size(int i) {
    fs::path compiler = work / ("machine" + std::to_string(i)) / "cache" /
                        ("neuronxcc-" + std::string(testing::kTestCompilerVersion));
    if (!fs::exists(compiler)) return 0;
    for (const auto& item : fs::recursive_directory_iterator(compiler)) {
      if (item.path().filename() == "model.neff") return fs::file_size(item.path());
    }
    return 0;
  }

  std::map<std::string, Key> keys;
  testing::StandInModel model;
  std::string shard;
  fs::path manifest = work / "neuron-cache.yaml";
  std::vector<std::string> outputs;
  int puts_ = 0;
};

// Signed by a trusted key: installed where signatures are required, audited by `verify`, locked
// with its signer, bundled with its signatures. A key taken out of trusted_keys stops its
// entries; a second key co-signs during a rotation and both work.
TEST_P(SigningCliTest, SignedEntriesInstallAndRotationWorks) {
  ToolResult ci = on(1, "ci " + quoted(manifest), signing("acme-ci-1"));
  ASSERT_EQ(ci.code, 0) << ci.all();
  json index = json::parse(store_file(shard));
  ASSERT_EQ(index["entries"].size(), 2u) << index.dump(1);
  for (const auto& [key, entry] : index["entries"].items()) {
    ASSERT_EQ(entry["signatures"].size(), 1u) << entry.dump(1);
    EXPECT_EQ(entry["signatures"][0]["key"], "acme-ci-1");
  }

  ToolResult fetched = on(2, "prefetch " + quoted(manifest));
  ASSERT_EQ(fetched.code, 0) << fetched.all();
  EXPECT_TRUE(contains(fetched.out, "prefetched 2 configurations")) << fetched.all();
  ToolResult audit = on(2, "verify " + quoted(manifest));
  EXPECT_EQ(audit.code, 0) << audit.all();
  EXPECT_TRUE(contains(audit.out, "signed by trusted key acme-ci-1")) << audit.all();
  EXPECT_TRUE(contains(audit.out, "0 would not be installed")) << audit.all();

  // The lock records who signed; a bundle carries the signatures, and a machine that requires
  // them installs from it.
  ToolResult locked = on(2, "lock " + quoted(manifest));
  ASSERT_EQ(locked.code, 0) << locked.all();
  lockfile::Lock lock = lockfile::parse(read_file(work / "neuron-cache.lock"), "lock");
  ASSERT_EQ(lock.configurations.size(), 2u);
  EXPECT_EQ(lock.configurations[0].signed_by, std::vector<std::string>{"acme-ci-1"});
  EXPECT_EQ(lock.configurations[0].entry.signatures.size(), 1u);
  fs::path bundle = work / "models.tar";
  ASSERT_EQ(on(2, "bundle " + quoted(manifest) + " -o " + quoted(bundle)).code, 0);
  ToolResult unbundled = machine(7).run(
      "prefetch " + quoted(manifest) + " --from-bundle " + quoted(bundle), store_env);
  outputs.push_back(unbundled.all());
  EXPECT_EQ(unbundled.code, 0) << unbundled.all();
  EXPECT_EQ(neff_size(7), 65536u);

  // acme-ci-1 taken out of trusted_keys: its entries are compiled, the plan says why, and the
  // locked prefetch refuses the lock rather than compile.
  fs::path rotated = work / "rotated" / "neuron-cache.yaml";
  fs::create_directories(rotated.parent_path());
  write_manifest(rotated, {"acme-ci-2"}, true);
  json plan = plan_json(3, rotated);
  EXPECT_EQ(plan["compile"], 2) << plan.dump(1);
  EXPECT_EQ(plan["refused"], 2) << plan.dump(1);
  EXPECT_TRUE(contains(plan["configurations"][0]["reason"].get<std::string>(),
                       "signed only by keys that are not trusted: acme-ci-1"))
      << plan.dump(1);
  // --trusted-key replaces the manifest's list (the lock is of the manifest as it is).
  ToolResult refused = on(3, "prefetch --locked " + quoted(manifest) + " --trusted-key '" +
                                 keys["acme-ci-2"].public_line + "'");
  EXPECT_EQ(refused.code, 2) << refused.all();
  EXPECT_TRUE(contains(refused.err, "the lock's entries are not trusted") &&
              contains(refused.err, "locked as signed by acme-ci-1"))
      << refused.all();
  EXPECT_EQ(neff_size(3), 0u);

  // The rotation: a machine holding the files co-signs them with acme-ci-2 (no file is sent
  // again); then a machine trusting acme-ci-2 alone installs them.
  ToolResult cosigned = on(2, "push " + quoted(manifest) + " --json", signing("acme-ci-2"));
  ASSERT_EQ(cosigned.code, 0) << cosigned.all();
  json pushed = json::parse(cosigned.out);
  EXPECT_EQ(pushed["push"]["cosigned"].size(), 2u) << pushed.dump(1);
  EXPECT_LT(pushed["push"]["bytes_uploaded"].get<int64_t>(), 65536) << "a NEFF was sent again";
  ToolResult after = on(3, "prefetch " + quoted(rotated));
  ASSERT_EQ(after.code, 0) << after.all();
  EXPECT_TRUE(contains(after.out, "prefetched 2 configurations")) << after.all();
  ToolResult both = on(3, "verify " + quoted(manifest));
  EXPECT_EQ(both.code, 0) << both.all();
  EXPECT_TRUE(contains(both.out, "signed by trusted key acme-ci-1, acme-ci-2")) << both.all();
}

// Another writer of the store (its own key, other bytes under the same names and valid
// sha256s) replaces both entries: a machine that requires signatures installs none of its bytes
// and compiles, the plan and the report saying why; its signed push takes the entries back.
TEST_P(SigningCliTest, AnotherWritersEntryIsCompiledNotInstalled) {
  ASSERT_EQ(on(1, "ci " + quoted(manifest), signing("acme-ci-1")).code, 0);
  fs::path theirs = work / "mallory" / "neuron-cache.yaml";
  fs::create_directories(theirs.parent_path());
  write_manifest(theirs, {"mallory-1"}, true);
  ToolResult hostile = on(9, "ci " + quoted(theirs) + " --json",
                          signing("mallory-1") + " STAND_IN_NEFF_BYTES=70000");
  ASSERT_EQ(hostile.code, 0) << hostile.all();
  EXPECT_EQ(json::parse(hostile.out)["push"]["replaced"].size(), 2u) << hostile.out;
  EXPECT_TRUE(contains(store_file(shard), "mallory-1"));

  json plan = plan_json(3, manifest);
  EXPECT_EQ(plan["refused"], 2) << plan.dump(1);
  for (const auto& row : plan["configurations"]) {
    EXPECT_EQ(row["status"], "compile") << row.dump(1);
    EXPECT_TRUE(contains(row["refused"].get<std::string>(),
                         "signed only by keys that are not trusted: mallory-1, and signatures "
                         "are required"))
        << row.dump(1);
  }
  ToolResult fetched = on(3, "prefetch " + quoted(manifest));
  EXPECT_EQ(fetched.code, 0) << fetched.all();
  EXPECT_EQ(neff_size(3), 0u) << "another writer's bytes were installed";
  ToolResult audit = on(3, "verify " + quoted(manifest));
  EXPECT_EQ(audit.code, 3) << audit.all();
  EXPECT_TRUE(contains(audit.out, "signed by mallory-1 (not trusted here): not installed"))
      << audit.all();

  // The compile command does not learn where the signing key is.
  ToolResult ci = on(3, "ci " + quoted(manifest) + " --json",
                     signing("acme-ci-1") + " STAND_IN_PRINT_ENV=NEURON_CACHE_SIGNING_KEY");
  ASSERT_EQ(ci.code, 0) << ci.all();
  json report = json::parse(ci.out);
  EXPECT_EQ(report["totals"]["compiled"], 2) << report.dump(1);
  EXPECT_EQ(report["totals"]["refused"], 2) << report.dump(1);
  EXPECT_EQ(report["push"]["replaced"].size(), 2u) << report.dump(1);
  EXPECT_EQ(report["push"]["pushed"].size(), 2u) << report.dump(1);
  EXPECT_EQ(report["push"]["already_in_store"].size(), 0u) << "offered once" << report.dump(1);
  std::string log = read_file(work / "machine3" / "neuron-cache-output" / "c1.log");
  EXPECT_TRUE(contains(log, "NEURON_CACHE_SIGNING_KEY=\n")) << log;
  EXPECT_FALSE(contains(log, keys["acme-ci-1"].secret_file.string())) << log;
  EXPECT_EQ(neff_size(3), 65536u);
  ToolResult healed = on(4, "prefetch " + quoted(manifest));
  ASSERT_EQ(healed.code, 0) << healed.all();
  EXPECT_TRUE(contains(healed.out, "prefetched 2 configurations")) << healed.all();
  EXPECT_EQ(neff_size(4), 65536u);
}

// A file record changed in the index after signing (the NEFF replaced by other bytes whose
// sha256 the entry now lists): refused wherever the signer is trusted, even when signatures are
// not required; an unsigned entry is refused only where they are.
TEST_P(SigningCliTest, AnEntryChangedAfterSigningIsRefusedEvenWithoutRequire) {
  ASSERT_EQ(on(1, "ci " + quoted(manifest), signing("acme-ci-1")).code, 0);
  json index = json::parse(store_file(shard));
  std::string c1;
  for (auto& [key, entry] : index["entries"].items()) {
    if (entry["configuration"] != "c1") continue;
    c1 = key;
    for (auto& module : entry["modules"]) {
      for (auto& file : module["files"]) {
        if (file["name"] != "model.neff") continue;
        std::string path = std::string("neuronxcc-") + testing::kTestCompilerVersion + "/" +
                           module["name"].get<std::string>() + "/model.neff";
        std::string bytes = "other code for the device, with a valid sha256";
        put_store_file(path, bytes);
        file["size"] = bytes.size();
        file["sha256"] = sha256_hex(bytes);
      }
    }
  }
  ASSERT_FALSE(c1.empty());
  put_store_file(shard, index.dump());

  fs::path lenient = work / "lenient" / "neuron-cache.yaml";
  fs::create_directories(lenient.parent_path());
  write_manifest(lenient, {"acme-ci-1"}, false);
  json plan = plan_json(5, lenient);
  EXPECT_EQ(plan["refused"], 1) << plan.dump(1);
  for (const auto& row : plan["configurations"]) {
    if (row["key"] != c1) {
      EXPECT_EQ(row["status"], "store") << row.dump(1);
      EXPECT_EQ(row["signed_by"], json::array({"acme-ci-1"})) << row.dump(1);
      continue;
    }
    EXPECT_EQ(row["status"], "compile") << row.dump(1);
    EXPECT_TRUE(contains(row["reason"].get<std::string>(),
                         "bad signature by trusted key acme-ci-1: the entry's files, inputs or "
                         "key changed after it was signed"))
        << row.dump(1);
  }

  // The signatures dropped: an unsigned entry is used where they are not required, and not
  // where they are.
  for (auto& [key, entry] : index["entries"].items()) entry.erase("signatures");
  put_store_file(shard, index.dump());
  EXPECT_EQ(plan_json(5, lenient)["refused"], 0);
  json strict = plan_json(6, manifest);
  EXPECT_EQ(strict["refused"], 2) << strict.dump(1);
  EXPECT_TRUE(contains(strict["configurations"][0]["reason"].get<std::string>(),
                       "unsigned, and signatures are required (the manifest's "
                       "require_signatures in "))
      << strict.dump(1);
}

// Settings as users get them wrong: a malformed key names its line, require_signatures without
// a trusted key and a secret key file others may read are refused before anything runs.
TEST_P(SigningCliTest, BadTrustSettingsAreNamedBeforeAnythingRuns) {
  fs::path bad = work / "bad" / "neuron-cache.yaml";
  fs::create_directories(bad.parent_path());
  write_file(bad,
             "trusted_keys:\n  - \"acme-ci-1:notbase64\"\n" + testing::stand_in_manifest({model}));
  ToolResult typo = on(1, "plan " + quoted(bad));
  EXPECT_EQ(typo.code, 2) << typo.all();
  EXPECT_TRUE(contains(typo.err, "neuron-cache.yaml:2:5:")) << typo.all();

  write_file(bad, "require_signatures: true\n" + testing::stand_in_manifest({model}));
  ToolResult none = on(1, "plan " + quoted(bad));
  EXPECT_EQ(none.code, 2) << none.all();
  EXPECT_TRUE(contains(none.err, "no key is trusted")) << none.all();

  // `fetch` installs folders by name, outside any index entry: refused where signatures are
  // required, before the store is asked anything.
  ToolResult by_hand = on(1,
                          "fetch MODULE_0123456789abcdef0123+abcdef01 --compiler-version " +
                              std::string(testing::kTestCompilerVersion),
                          "NEURON_CACHE_REQUIRE_SIGNATURES=1");
  EXPECT_EQ(by_hand.code, 2) << by_hand.all();
  EXPECT_TRUE(contains(by_hand.err, "no signature covers")) << by_hand.all();

  fs::permissions(keys["acme-ci-1"].secret_file, fs::perms::group_read, fs::perm_options::add);
  ToolResult exposed = on(1, "ci " + quoted(manifest), signing("acme-ci-1"));
  EXPECT_EQ(exposed.code, 2) << exposed.all();
  EXPECT_TRUE(contains(exposed.err, "chmod 600")) << exposed.all();
  EXPECT_FALSE(contains(exposed.out + exposed.err, "compiled")) << exposed.all();
}

INSTANTIATE_TEST_SUITE_P(Stores, SigningCliTest, ::testing::Values("folder", "hub", "s3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace neuron_cache
