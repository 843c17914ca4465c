// One resolution (issue 12): every knob's precedence across the layers docs/configuration.md
// documents (built-in default, saved file, manifest, environment, command line), resolved by
// Settings alone; and library code that reads no environment beyond what Settings was given.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <functional>

#include "neuron_cache/config/settings.h"
#include "neuron_cache/error.h"
#include "neuron_cache/pipeline/pipeline.h"
#include "neuron_cache/pipeline/run.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::write_file;

constexpr const char* kInstalled = "2.21.33363.0+82129205";

// What one case resolves from: a fresh HOME, no neuronx-cc unless a layer puts one on PATH.
struct Inputs {
  explicit Inputs(const TempDir& home) : home(home.path()) {
    env = {{"HOME", home.path().string()}, {"PATH", "/nonexistent"}};
  }
  fs::path hf_home() const { return home / ".cache/huggingface"; }

  fs::path home;
  std::map<std::string, std::string> env;
  config::SettingOverrides overrides;
  config::ManifestLayer manifest{"/project/neuron-cache.yaml", {}, {}, {}, {}, {}};
};

// One layer of one knob: how to set it, and what it then gives.
struct Layer {
  std::string name;
  std::function<void(Inputs&)> apply;
  std::string value;   // the knob's value when this layer wins
  std::string origin;  // its recorded origin
};

struct Knob {
  std::string name;
  std::function<config::Setting(const config::Settings&)> read;
  std::vector<Layer> layers;  // lowest precedence first; the first is what nothing set gives
};

Layer env_layer(const std::string& var, const std::string& value, const std::string& gives) {
  return {var, [var, value](Inputs& in) { in.env[var] = value; }, gives, var};
}

Layer env_layer(const std::string& var, const std::string& value) {
  return env_layer(var, value, value);
}

Layer nothing(const std::string& value, const std::string& origin) {
  return {"nothing set", [](Inputs&) {}, value, origin};
}

// A neuronx-cc on PATH that reports kInstalled.
void install_compiler(Inputs& in) {
  fs::path bin = in.home / "bin";
  write_file(bin / "neuronx-cc",
             std::string("#!/bin/sh\necho 'NeuronX Compiler version ") + kInstalled + "'\n");
  chmod((bin / "neuronx-cc").c_str(), 0755);
  in.env["PATH"] = bin.string();
}

std::vector<Knob> knobs() {
  const std::string manifest = "/project/neuron-cache.yaml";
  return {
      {"cache_repo",
       [](const config::Settings& s) { return s.cache_repo; },
       {nothing("aws-neuron/optimum-neuron-cache", "optimum-neuron's default"),
        {"saved repo",
         [](Inputs& in) {
           write_file(in.hf_home() / "optimum_neuron_custom_cache", "acme/saved\n");
         },
         "acme/saved", "<hf_home>/optimum_neuron_custom_cache"},
        env_layer("CUSTOM_CACHE_REPO", "acme/from-env"),
        {"manifest", [](Inputs& in) { in.manifest.cache_repo = "acme/manifest"; }, "acme/manifest",
         "the manifest's cache_repo in " + manifest},
        {"--repo", [](Inputs& in) { in.overrides.cache_repo = "acme/given"; }, "acme/given",
         "--repo"}}},
      {"cache_dir",
       [](const config::Settings& s) { return s.cache_dir; },
       {nothing("/var/tmp/neuron-compile-cache", "default"),
        {"manifest", [](Inputs& in) { in.manifest.cache_dir = "/project/cache"; }, "/project/cache",
         "the manifest's cache_dir in " + manifest},
        env_layer("NEURON_COMPILE_CACHE_URL", "/data/url"),
        {"NEURON_CC_FLAGS",
         [](Inputs& in) { in.env["NEURON_CC_FLAGS"] = "-O1 --cache_dir=/data/flags"; },
         "/data/flags", "NEURON_CC_FLAGS --cache_dir"},
        {"--cache-dir", [](Inputs& in) { in.overrides.cache_dir = "/given"; }, "/given",
         "--cache-dir"}}},
      {"compiler_version",
       [](const config::Settings& s) { return s.compiler_version; },
       {nothing("", "neuronx-cc is not on PATH"),
        {"neuronx-cc on PATH", install_compiler, kInstalled, "<home>/bin/neuronx-cc --version"},
        {"manifest", [](Inputs& in) { in.manifest.compiler_version = "2.20.1.0+aaaa"; },
         "2.20.1.0+aaaa", "the manifest's compiler_version in " + manifest},
        {"--compiler-version", [](Inputs& in) { in.overrides.compiler_version = "2.19.2.0+bbbb"; },
         "2.19.2.0+bbbb", "--compiler-version"}}},
      {"token",
       [](const config::Settings& s) { return s.token; },
       {nothing("", "unset"),
        {"token file", [](Inputs& in) { write_file(in.hf_home() / "token", "hf_fromfile\n"); },
         "hf_fromfile", "<hf_home>/token"},
        {"HF_TOKEN_PATH",
         [](Inputs& in) {
           write_file(in.home / "elsewhere", "hf_frompath");
           in.env["HF_TOKEN_PATH"] = (in.home / "elsewhere").string();
         },
         "hf_frompath", "<home>/elsewhere"},
        env_layer("HUGGING_FACE_HUB_TOKEN", "hf_legacy"),
        env_layer("HF_TOKEN", "hf_current")}},
      {"endpoint",
       [](const config::Settings& s) { return s.endpoint; },
       {nothing("https://huggingface.co", "default"),
        env_layer("HF_ENDPOINT", "http://127.0.0.1:9/", "http://127.0.0.1:9")}},
      {"offline",
       [](const config::Settings& s) { return s.offline_origin; },
       {nothing("false", "default"), env_layer("HF_HUB_OFFLINE", "1", "true"),
        env_layer("NEURON_CACHE_OFFLINE", "1", "true")}},
      {"store_offline",
       [](const config::Settings& s) { return s.store_offline_origin; },
       {nothing("false", "default"), env_layer("NEURON_CACHE_OFFLINE", "1", "true")}},
      {"hf_home",
       [](const config::Settings& s) { return s.hf_home; },
       {nothing("<home>/.cache/huggingface", "default"),
        env_layer("XDG_CACHE_HOME", "/xdg", "/xdg/huggingface"), env_layer("HF_HOME", "/hf")}},
      {"hf_hub_cache",
       [](const config::Settings& s) { return s.hf_hub_cache; },
       {nothing("<home>/.cache/huggingface/hub", "hf_home/hub"),
        env_layer("HF_HUB_CACHE", "/hub")}},
      {"cc_flags",
       [](const config::Settings& s) { return s.cc_flags; },
       {nothing("", "unset"), env_layer("NEURON_CC_FLAGS", "--optlevel=1")}},
      {"seeding",
       [](const config::Settings& s) { return s.seeding_origin; },
       {nothing("true", "default"), env_layer("NEURON_CACHE_SEED", "0", "false")}},
      {"timeout_ms",
       [](const config::Settings& s) { return s.timeout_ms; },
       {nothing("15000", "default"), env_layer("NEURON_CACHE_HUB_TIMEOUT_MS", "2500"),
        env_layer("NEURON_CACHE_TIMEOUT_MS", "4000")}},
      {"retry_base_ms",
       [](const config::Settings& s) { return s.retry_base_ms; },
       {nothing("", "default (1 s, doubling up to 30 s)"),
        env_layer("NEURON_CACHE_RETRY_BASE_MS", "10")}},
      {"s3_recheck_ms",
       [](const config::Settings& s) { return s.s3_recheck_ms; },
       {nothing("2000", "default"), env_layer("NEURON_CACHE_S3_RECHECK_MS", "0")}},
      {"progress",
       [](const config::Settings& s) { return s.progress_origin; },
       {nothing("true", "default"), env_layer("HF_HUB_DISABLE_PROGRESS_BARS", "1", "false")}},
      {"progress_interval_ms",
       [](const config::Settings& s) { return s.progress_interval_ms; },
       {nothing("10000", "default"), env_layer("NEURON_CACHE_PROGRESS_INTERVAL_MS", "50")}},
      {"heartbeat_seconds",
       [](const config::Settings& s) { return s.heartbeat_seconds; },
       {nothing("120", "default"), env_layer("NEURON_CACHE_HEARTBEAT_SECONDS", "1")}},
      {"max_size",
       [](const config::Settings& s) { return s.max_size; },
       {nothing("", "unset"),
        env_layer("NEURON_CACHE_MAX_SIZE", "200GiB"),
        {"--max-size", [](Inputs& in) { in.overrides.max_size = "1.5TB"; }, "1.5TB",
         "--max-size"}}},
      // The nearest layer's whole list wins (a key taken out of the manifest is not trusted
      // because the environment still lists it only when the environment sets the list).
      {"trusted_keys",
       [](const config::Settings& s) { return s.trusted_keys; },
       {nothing("", "unset"),
        {"manifest",
         [](Inputs& in) {
           in.manifest.trusted_keys = {{"a-1:x", "b-2:y"}};
         },
         "a-1:x\nb-2:y", "the manifest's trusted_keys in " + manifest},
        env_layer("NEURON_CACHE_TRUSTED_KEYS", "c-3:z, d-4:w", "c-3:z\nd-4:w"),
        {"--trusted-key", [](Inputs& in) { in.overrides.trusted_keys = {"e-5:v"}; }, "e-5:v",
         "--trusted-key"}}},
      // Any layer turns it on; the nearest one that does is its origin.
      {"require_signatures",
       [](const config::Settings& s) { return s.require_signatures_origin; },
       {nothing("false", "default"),
        {"manifest", [](Inputs& in) { in.manifest.require_signatures = true; }, "true",
         "the manifest's require_signatures in " + manifest},
        env_layer("NEURON_CACHE_REQUIRE_SIGNATURES", "1", "true"),
        {"--require-signatures", [](Inputs& in) { in.overrides.require_signatures = true; }, "true",
         "--require-signatures"}}},
      {"signing_key",
       [](const config::Settings& s) { return s.signing_key; },
       {nothing("", "unset (pushes do not sign)"),
        env_layer("NEURON_CACHE_SIGNING_KEY", "/secrets/ci.key")}},
      {"debug_log",
       [](const config::Settings& s) { return s.debug_log_origin; },
       {nothing("false", "default"),
        env_layer("RUNNER_DEBUG", "1", "true"),
        env_layer("NEURON_CACHE_LOG", "debug", "true"),
        {"--verbose", [](Inputs& in) { in.overrides.verbose = true; }, "true", "--verbose"}}},
  };
}

// "<home>" and "<hf_home>" in expectations stand for the case's temporary folders.
std::string expand(std::string text, const Inputs& in) {
  for (const auto& [mark, path] :
       {std::pair<std::string, fs::path>{"<hf_home>", in.hf_home()}, {"<home>", in.home}}) {
    if (size_t at = text.find(mark); at != std::string::npos)
      text.replace(at, mark.size(), path.string());
  }
  return text;
}

// As the CLI and the Action resolve: the environment and options first, the compiler when a
// command needs it, then the manifest once the pipeline has read it.
config::Settings resolve_as_a_run(const Inputs& in) {
  config::Environment env(in.env);
  config::Settings settings = config::Settings::resolve(env, in.overrides);
  settings.detect_compiler(env);
  return settings.with_manifest(in.manifest);
}

// Each layer, with every layer below it set too, wins; and resolving with the manifest at once
// gives the same as adding it afterwards.
TEST(SettingsLayers, EachLayerWinsOverEveryLayerBelowIt) {
  for (const Knob& knob : knobs()) {
    for (size_t top = 0; top < knob.layers.size(); ++top) {
      TempDir home;
      Inputs in(home);
      for (size_t i = 0; i <= top; ++i) knob.layers[i].apply(in);
      const Layer& winner = knob.layers[top];
      config::Setting got = knob.read(resolve_as_a_run(in));
      std::string what = knob.name + " with layers up to " + winner.name;
      EXPECT_EQ(got.value, expand(winner.value, in)) << what;
      EXPECT_EQ(got.origin, expand(winner.origin, in)) << what;

      config::Environment env(in.env);
      config::Settings at_once = config::Settings::resolve(env, in.overrides, in.manifest);
      at_once.detect_compiler(env);
      EXPECT_EQ(knob.read(at_once).value, got.value) << what << ", manifest given at once";
    }
  }
}

// And alone, over the built-in default: no layer depends on one below it being set.
TEST(SettingsLayers, EachLayerAloneWinsOverTheDefault) {
  for (const Knob& knob : knobs()) {
    for (const Layer& layer : knob.layers) {
      TempDir home;
      Inputs in(home);
      layer.apply(in);
      config::Setting got = knob.read(resolve_as_a_run(in));
      EXPECT_EQ(got.value, expand(layer.value, in)) << knob.name << ": " << layer.name;
      EXPECT_EQ(got.origin, expand(layer.origin, in)) << knob.name << ": " << layer.name;
    }
  }
}

TEST(SettingsLayers, CustomCacheRepoOverruledByTheManifestIsNoted) {
  TempDir home;
  Inputs in(home);
  in.env["CUSTOM_CACHE_REPO"] = "acme/from-env";
  in.manifest.cache_repo = "acme/manifest";
  config::Settings s = resolve_as_a_run(in);
  EXPECT_EQ(s.cache_repo_note,
            "CUSTOM_CACHE_REPO=acme/from-env is not used: the manifest's cache_repo in "
            "/project/neuron-cache.yaml wins (pass --repo to choose)");
  in.overrides.cache_repo = "acme/given";
  EXPECT_EQ(resolve_as_a_run(in).cache_repo_note, "") << "--repo is a choice: nothing to note";
  in.overrides.cache_repo.reset();
  in.env["CUSTOM_CACHE_REPO"] = "acme/manifest";
  EXPECT_EQ(resolve_as_a_run(in).cache_repo_note, "") << "the same repo: nothing to note";
}

TEST(SettingsLayers, ManifestLayerKeepsTheDetectedCompilerWithoutAskingAgain) {
  TempDir home;
  Inputs in(home);
  install_compiler(in);
  config::Environment env(in.env);
  config::Settings s = config::Settings::resolve(env, {});
  s.detect_compiler(env);
  fs::remove(in.home / "bin/neuronx-cc");  // a second detection would find nothing
  in.manifest.compiler_version = "2.20.1.0+aaaa";
  config::Settings with = s.with_manifest(in.manifest);
  EXPECT_EQ(with.compiler_version.value, "2.20.1.0+aaaa");
  EXPECT_EQ(with.installed_compiler.value, kInstalled);
  with.detect_compiler(env);
  EXPECT_EQ(with.installed_compiler.value, kInstalled) << "detected once per run";
}

TEST(SettingsLayers, BadKnobValuesAreInputErrorsWhenUsed) {
  TempDir home;
  Inputs in(home);
  in.env["NEURON_CACHE_HUB_TIMEOUT_MS"] = "soon";
  in.env["NEURON_CACHE_RETRY_BASE_MS"] = "fast";
  config::Settings s = resolve_as_a_run(in);  // config show still works
  EXPECT_EQ(s.timeout_ms.value, "soon");
  try {
    s.timeout();
    FAIL() << "a timeout that is no number";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    EXPECT_NE(std::string(e.what()).find("NEURON_CACHE_HUB_TIMEOUT_MS"), std::string::npos);
  }
  EXPECT_THROW(s.retry_base(), Error);
  in.env["NEURON_CACHE_S3_RECHECK_MS"] = "-1";
  EXPECT_THROW(resolve_as_a_run(in).s3_recheck(), Error);
  in.env.erase("NEURON_CACHE_S3_RECHECK_MS");
  in.env["NEURON_CACHE_HUB_TIMEOUT_MS"] = "2500";
  in.env["NEURON_CACHE_RETRY_BASE_MS"] = "10";
  config::Settings good = resolve_as_a_run(in);
  EXPECT_EQ(good.timeout(), std::chrono::milliseconds(2500));
  EXPECT_EQ(good.timeout_if_set(), std::chrono::milliseconds(2500));
  EXPECT_EQ(good.retry_base(), std::chrono::milliseconds(10));
  EXPECT_EQ(good.s3_recheck(), std::chrono::milliseconds(2000));
  EXPECT_EQ(resolve_as_a_run(Inputs(home)).timeout(), std::chrono::milliseconds(15000));
  EXPECT_EQ(resolve_as_a_run(Inputs(home)).timeout_if_set(), std::nullopt);
}

// HF_HUB_OFFLINE speaks of the Hugging Face Hub only; NEURON_CACHE_OFFLINE of every store.
TEST(SettingsLayers, HubOfflineIsNotStoreOffline) {
  TempDir home;
  Inputs hub(home);
  hub.env["HF_HUB_OFFLINE"] = "1";
  config::Settings s = resolve_as_a_run(hub);
  EXPECT_TRUE(s.offline);
  EXPECT_FALSE(s.store_offline) << "an S3 or folder store stays online";
  Inputs every(home);
  every.env["NEURON_CACHE_OFFLINE"] = "1";
  config::Settings all = resolve_as_a_run(every);
  EXPECT_TRUE(all.store_offline);
  EXPECT_TRUE(all.offline) << "the Hub is a store too";
  EXPECT_EQ(all.offline_origin.origin, "NEURON_CACHE_OFFLINE");
}

// No layer weakens another's require_signatures: the variable set to 0 under a manifest that
// requires signatures leaves them required and says so; a value that is no boolean is refused.
TEST(SettingsLayers, RequireSignaturesIsNeverTurnedOffByALowerLayer) {
  TempDir home;
  Inputs in(home);
  in.manifest.require_signatures = true;
  in.env["NEURON_CACHE_REQUIRE_SIGNATURES"] = "0";
  config::Settings s = resolve_as_a_run(in);
  EXPECT_TRUE(s.require_signatures);
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("does not turn off the require_signatures"), std::string::npos)
      << s.warnings[0];
  in.env["NEURON_CACHE_REQUIRE_SIGNATURES"] = "maybe";
  EXPECT_THROW(resolve_as_a_run(in), Error);
}

// NEURON_CACHE_TIMEOUT_MS is the name; NEURON_CACHE_HUB_TIMEOUT_MS an alias it wins over.
TEST(SettingsLayers, TimeoutHasANeutralName) {
  TempDir home;
  Inputs in(home);
  in.env["NEURON_CACHE_HUB_TIMEOUT_MS"] = "2500";
  in.env["NEURON_CACHE_TIMEOUT_MS"] = "soon";
  try {
    resolve_as_a_run(in).timeout();
    FAIL() << "a timeout that is no number";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NEURON_CACHE_TIMEOUT_MS"), std::string::npos);
  }
}

// ---- the pipeline reads its settings, not the process environment ----

constexpr const char* kManifest = R"(cache_repo: acme/manifest-repo
compiler_version: "2.21.33363.0+82129205"
instance_type: trn1
models:
  - model_id: acme/tiny
    revision: 0123456789abcdef0123456789abcdef01234567
    model_type: llama
    task: text-generation
    configurations:
      - name: tiny-bs1
        batch_size: 1
        sequence_length: 128
        num_cores: 2
        precision: bf16
)";

// Sets a variable of the process for the scope, then restores it.
class ProcessVariable {
 public:
  ProcessVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ProcessVariable() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class PipelineSettingsTest : public ::testing::Test {
 protected:
  PipelineSettingsTest() { write_file(work / "neuron-cache.yaml", kManifest); }

  config::Settings settings(std::map<std::string, std::string> env,
                            const config::SettingOverrides& given = {}) const {
    env.emplace("HOME", work.path().string());
    env.emplace("PATH", "/nonexistent");
    config::SettingOverrides overrides = given;
    overrides.cache_dir = (work / "cache").string();
    return config::Settings::resolve(config::Environment(env), overrides);
  }

  // No Hub client: the pinned revision and model_type key the configuration offline.
  std::unique_ptr<pipeline::Pipeline> open(const config::Settings& s) const {
    pipeline::Options options;
    options.manifest = work / "neuron-cache.yaml";
    options.output_dir = work / "out";
    return std::make_unique<pipeline::Pipeline>(s, pipeline::Remotes{}, options);
  }

  std::string key(const config::Settings& s) const { return open(s)->targets().front().key; }

  TempDir work;
};

TEST_F(PipelineSettingsTest, NeuronCcFlagsOfTheProcessAloneChangeNoKey) {
  std::string plain = key(settings({}));
  std::string profile = open(settings({}))->profile_target("train").key;
  config::Settings flagged = settings({{"NEURON_CC_FLAGS", "--optlevel=1"}});
  EXPECT_NE(key(flagged), plain) << "NEURON_CC_FLAGS given to Settings is part of the key";
  EXPECT_NE(open(flagged)->profile_target("train").key, profile);
  ProcessVariable set("NEURON_CC_FLAGS", "--optlevel=1");
  EXPECT_EQ(key(settings({})), plain) << "the process's own NEURON_CC_FLAGS is not read";
  EXPECT_EQ(open(settings({}))->profile_target("train").key, profile);
}

TEST_F(PipelineSettingsTest, RepoAndCompilerComeFromTheSettingsLayers) {
  auto p = open(settings({{"CUSTOM_CACHE_REPO", "acme/from-env"}}));
  EXPECT_EQ(p->context().repo, "acme/manifest-repo");
  EXPECT_EQ(p->context().repo_origin,
            "the manifest's cache_repo in " + (work / "neuron-cache.yaml").string());
  ASSERT_EQ(p->context().notices.size(), 1u);
  EXPECT_NE(p->context().notices[0].text.find("CUSTOM_CACHE_REPO=acme/from-env is not used"),
            std::string::npos);
  config::SettingOverrides given;
  given.cache_repo = "acme/given";
  given.compiler_version = "2.19.2.0+bbbb";
  auto q = open(settings({{"CUSTOM_CACHE_REPO", "acme/from-env"}}, given));
  EXPECT_EQ(q->context().repo, "acme/given");
  EXPECT_EQ(q->context().compiler_version, "2.19.2.0+bbbb");
  EXPECT_TRUE(q->context().notices.empty());
  ProcessVariable set("CUSTOM_CACHE_REPO", "acme/process");
  auto r = open(settings({}));
  EXPECT_EQ(r->context().repo, "acme/manifest-repo");
  EXPECT_TRUE(r->context().notices.empty()) << "the process's own CUSTOM_CACHE_REPO is not read";
}

// pipeline::run: the plan first (shown through on_plan), then the steps asked for, nothing else.
TEST_F(PipelineSettingsTest, RunDoesTheStepsAskedForAfterThePlan) {
  auto p = open(settings({}));
  std::vector<std::string> seen;
  p->on_progress([&seen](const std::string& line) { seen.push_back(line); });
  size_t plans = 0;
  pipeline::RunResult result =
      pipeline::run(*p, {true, false, true, {}}, [&](const plan::Plan& plan) {
        ++plans;
        EXPECT_EQ(plan.rows.size(), 1u);
        EXPECT_EQ(plan.rows[0].status, plan::Status::Compile);
      });
  EXPECT_EQ(plans, 1u);
  ASSERT_TRUE(result.prefetch);
  EXPECT_EQ(result.prefetch->hits, 0u);
  EXPECT_FALSE(result.compile) << "not asked for";
  EXPECT_FALSE(result.compile_failed());
  ASSERT_TRUE(result.push);
  EXPECT_FALSE(result.push->attempted);
  EXPECT_EQ(result.push->skipped_reason, "offline");
  EXPECT_EQ(result.final.rows[0].status, plan::Status::Compile);
  EXPECT_GT(result.seconds, 0.0) << "the run is timed";
  EXPECT_LT(result.seconds, 60.0) << "an offline plan of one configuration";
  // The report reads the pipeline's side from the result alone.
  EXPECT_EQ(result.repo, p->context().repo);
  EXPECT_EQ(result.compiler_version, p->context().compiler_version);
  EXPECT_EQ(result.notices.size(), p->context().notices.size());
}

// `config show --manifest M`: the settings a run with that manifest uses, each with its origin.
TEST_F(PipelineSettingsTest, ConfigShowWithAManifestShowsItsLayer) {
  std::string manifest = (work / "neuron-cache.yaml").string();
  write_file(manifest, std::string(kManifest) + "cache_dir: cache\n");
  auto show = [&](const std::string& args) {
    std::string output;
    int code = testing::run_command(std::string(testing::kCleanEnv) + " PATH=/nonexistent HOME='" +
                                        work.path().string() +
                                        "' CUSTOM_CACHE_REPO=acme/from-env NEURON_CACHE_SEED=0 " +
                                        testing::tool_path() + " config show " + args,
                                    &output);
    EXPECT_EQ(code, 0) << output;
    return output;
  };
  std::string with = show("--manifest '" + manifest + "'");
  EXPECT_TRUE(testing::contains(
      with, "(the manifest's cache_repo in " + manifest + ") cache_repo = acme/manifest-repo"))
      << with;
  EXPECT_TRUE(testing::contains(with, "(the manifest's cache_dir in " + manifest +
                                          ") cache_dir = " + (work / "cache").string()))
      << with;
  EXPECT_TRUE(testing::contains(with, "(the manifest's compiler_version in " + manifest +
                                          ") compiler_version = 2.21.33363.0+82129205"))
      << with;
  EXPECT_TRUE(testing::contains(with, "(NEURON_CACHE_SEED) seed = false")) << with;
  std::string without = show("");
  EXPECT_TRUE(testing::contains(without, "(CUSTOM_CACHE_REPO) cache_repo = acme/from-env"))
      << without;
  EXPECT_TRUE(testing::contains(without, "(default) cache_dir = /var/tmp/neuron-compile-cache"))
      << without;
}

}  // namespace
}  // namespace neuron_cache
