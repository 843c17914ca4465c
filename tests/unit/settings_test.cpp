#include "neuron_cache/config/settings.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "neuron_cache/config/redact.h"
#include "neuron_cache/error.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

using testing::TempDir;
using testing::write_file;

config::Settings resolve(std::map<std::string, std::string> vars,
                         config::SettingOverrides overrides = {}) {
  vars.emplace("PATH", "/nonexistent");  // no neuronx-cc unless a test puts one there
  return config::Settings::resolve(config::Environment(std::move(vars)), overrides);
}

TEST(SettingsCacheDir, DefaultIsVarTmp) {
  config::Settings s = resolve({});
  EXPECT_EQ(s.cache_dir.value, "/var/tmp/neuron-compile-cache");
  EXPECT_EQ(s.cache_dir.origin, "default");
  EXPECT_FALSE(s.cache_dir_is_s3);
}

TEST(SettingsCacheDir, CompileCacheUrlBeatsDefault) {
  config::Settings s = resolve({{"NEURON_COMPILE_CACHE_URL", "/data/cache"}});
  EXPECT_EQ(s.cache_dir.value, "/data/cache");
  EXPECT_EQ(s.cache_dir.origin, "NEURON_COMPILE_CACHE_URL");
}

TEST(SettingsCacheDir, CcFlagsCacheDirBeatsCompileCacheUrl) {
  config::Settings s =
      resolve({{"NEURON_COMPILE_CACHE_URL", "/data/url"},
               {"NEURON_CC_FLAGS", "--model-type=transformer --cache_dir=/data/flags -O1"}});
  EXPECT_EQ(s.cache_dir.value, "/data/flags");
  EXPECT_EQ(s.cache_dir.origin, "NEURON_CC_FLAGS --cache_dir");
}

// libneuronxla's parser takes both forms; the last one wins, as with argparse (issue 24: the space
// form was stripped from the compiler's flags but not read, so the cache moved silently).
TEST(SettingsCacheDir, CcFlagsCacheDirInEitherForm) {
  EXPECT_EQ(
      resolve({{"NEURON_CC_FLAGS", "-O1 --cache_dir /data/spaced --retry_failed_compilation"}})
          .cache_dir.value,
      "/data/spaced");
  EXPECT_EQ(
      resolve({{"NEURON_CC_FLAGS", "--cache_dir=/first --cache_dir /second"}}).cache_dir.value,
      "/second");
  EXPECT_EQ(resolve({{"NEURON_CC_FLAGS", "--cache_dir"}}).cache_dir.origin, "default");
}

TEST(SettingsCacheDir, ExplicitOptionBeatsEverything) {
  config::SettingOverrides o;
  o.cache_dir = "/explicit";
  config::Settings s = resolve(
      {{"NEURON_COMPILE_CACHE_URL", "/data/url"}, {"NEURON_CC_FLAGS", "--cache_dir=/data/flags"}},
      o);
  EXPECT_EQ(s.cache_dir.value, "/explicit");
  EXPECT_EQ(s.cache_dir.origin, "--cache-dir");
}

// RFC 8089: file:///p, file://localhost/p and file:/p all name the local /p, percent-decoded.
TEST(SettingsCacheDir, FileUrlIsTheLocalPathItNames) {
  const std::pair<const char*, const char*> cases[] = {
      {"file:///data/cache", "/data/cache"},
      {"file://localhost/data/cache", "/data/cache"},
      {"FILE://LocalHost/data/cache", "/data/cache"},
      {"file:/data/cache", "/data/cache"},
      {"file:///data/my%20cache/%C3%A9t%c3%a9", "/data/my cache/\xC3\xA9t\xC3\xA9"},
      {"/data/file:name", "/data/file:name"},
  };
  for (const auto& [url, path] : cases) {
    config::Settings s = resolve({{"NEURON_COMPILE_CACHE_URL", url}});
    EXPECT_EQ(s.cache_dir.value, path) << url;
    EXPECT_EQ(s.cache_dir.origin, "NEURON_COMPILE_CACHE_URL") << url;
    EXPECT_EQ(s.local_cache_root(), path) << url;
  }
  EXPECT_EQ(resolve({{"NEURON_CC_FLAGS", "--cache_dir=file:///data/flags"}}).cache_dir.value,
            "/data/flags");
}

TEST(SettingsCacheDir, FileUrlOfAnotherHostOrNoAbsolutePathIsRefused) {
  for (const char* url : {"file://fileserver/cache", "file://10.0.0.2/cache", "file:relative",
                          "file:///data/%zz", "file:///data/%00x", "file:///data/%4"}) {
    try {
      resolve({{"NEURON_COMPILE_CACHE_URL", url}});
      ADD_FAILURE() << url << " accepted";
    } catch (const Error& e) {
      std::string what = e.what();
      EXPECT_EQ(e.kind(), ErrorKind::Input) << url;
      EXPECT_NE(what.find("NEURON_COMPILE_CACHE_URL is the file URL"), std::string::npos) << what;
      EXPECT_NE(what.find("set it to"), std::string::npos) << what;
    }
  }
}

TEST(SettingsCacheDir, S3UrlIsRecognisedAndRefusedAsLocalPath) {
  config::Settings s = resolve({{"NEURON_COMPILE_CACHE_URL", "s3://bucket/prefix"}});
  EXPECT_TRUE(s.cache_dir_is_s3);
  try {
    s.local_cache_root();
    FAIL() << "an s3 URL must not be used as a local path";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    EXPECT_NE(std::string(e.what()).find("S3 URL"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("--cache-dir"), std::string::npos);
  }
}

TEST(SettingsCacheDir, NoCacheFlagIsReported) {
  config::Settings s = resolve({{"NEURON_CC_FLAGS", "--no_cache"}});
  EXPECT_TRUE(s.caching_disabled);
  ASSERT_EQ(s.warnings.size(), 1u);
}

TEST(SettingsRepo, PrecedenceOptionEnvFileDefault) {
  TempDir home;
  write_file(home / "optimum_neuron_custom_cache", "  me/my-cache\n");
  EXPECT_EQ(resolve({{"HF_HOME", home.path()}}).cache_repo.value, "me/my-cache");
  EXPECT_EQ(resolve({{"HF_HOME", home.path()}}).cache_repo.origin,
            (home / "optimum_neuron_custom_cache").string());
  config::Settings env =
      resolve({{"HF_HOME", home.path()}, {"CUSTOM_CACHE_REPO", "org/env-cache"}});
  EXPECT_EQ(env.cache_repo.value, "org/env-cache");
  EXPECT_EQ(env.cache_repo.origin, "CUSTOM_CACHE_REPO");
  config::SettingOverrides o;
  o.cache_repo = "org/explicit";
  EXPECT_EQ(resolve({{"CUSTOM_CACHE_REPO", "org/env-cache"}}, o).cache_repo.value, "org/explicit");
  TempDir empty_home;
  config::Settings fallback = resolve({{"HF_HOME", empty_home.path()}});
  EXPECT_EQ(fallback.cache_repo.value, "aws-neuron/optimum-neuron-cache");
  EXPECT_EQ(fallback.cache_repo.origin, "optimum-neuron's default");
}

TEST(SettingsRepo, MalformedRepoIsWarnedAboutAndNeverSaved) {
  TempDir home;
  config::Settings s =
      resolve({{"HF_HOME", home.path()}, {"CUSTOM_CACHE_REPO", "../../api/whoami-v2"}});
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_EQ(s.warnings[0],
            "the cache repo \"../../api/whoami-v2\" from CUSTOM_CACHE_REPO is not a Hub repo id");
  try {
    config::save_custom_cache_repo(s, "a/../b");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    EXPECT_NE(std::string(e.what()).find("the cache repo \"a/../b\" is not a Hub repo id"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(home / "optimum_neuron_custom_cache"));
}

// How often a running compile prints a line: every 2 minutes unless the variable says otherwise;
// a value that is not a positive number of seconds is an input error that names the variable.
TEST(SettingsHeartbeat, TwoMinutesByDefaultAndAPositiveNumberOtherwise) {
  EXPECT_EQ(resolve({}).compile_heartbeat(), std::chrono::seconds(120));
  EXPECT_EQ(resolve({{"NEURON_CACHE_HEARTBEAT_SECONDS", "1"}}).compile_heartbeat(),
            std::chrono::seconds(1));
  for (const char* bad : {"0", "-5", "2m", "1.5"}) {
    try {
      resolve({{"NEURON_CACHE_HEARTBEAT_SECONDS", bad}}).compile_heartbeat();
      ADD_FAILURE() << "expected an error for " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Input) << bad;
      EXPECT_NE(std::string(e.what()).find(
                    "NEURON_CACHE_HEARTBEAT_SECONDS must be a positive number of seconds"),
                std::string::npos)
          << e.what();
    }
  }
}

// Other machines read a lease living longer than an hour past its heartbeat as damaged.
TEST(SettingsLease, TheLeaseLifeIsBoundedByWhatOtherMachinesTrust) {
  EXPECT_EQ(resolve({}).lease_ttl(), std::chrono::seconds(600));
  EXPECT_EQ(resolve({{"NEURON_CACHE_LEASE_SECONDS", "3600"}}).lease_ttl(),
            std::chrono::seconds(3600));
  try {
    resolve({{"NEURON_CACHE_LEASE_SECONDS", "3601"}}).lease_ttl();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    EXPECT_NE(std::string(e.what()).find("NEURON_CACHE_LEASE_SECONDS must be at most 3600"),
              std::string::npos)
        << e.what();
  }
}

TEST(SettingsRepo, StagingHasNoDefaultRepo) {
  TempDir home;
  config::Settings s = resolve({{"HF_HOME", home.path()}, {"HUGGINGFACE_CO_STAGING", "1"}});
  EXPECT_EQ(s.cache_repo.value, "");
}

TEST(SettingsHome, XdgAndHomeFallbacks) {
  EXPECT_EQ(resolve({{"XDG_CACHE_HOME", "/xdg"}}).hf_home.value, "/xdg/huggingface");
  EXPECT_EQ(resolve({{"HOME", "/home/u"}}).hf_home.value, "/home/u/.cache/huggingface");
  EXPECT_EQ(resolve({{"HF_HOME", "/hf"}, {"XDG_CACHE_HOME", "/xdg"}}).hf_home.value, "/hf");
  EXPECT_EQ(resolve({{"HF_HOME", "/hf"}}).custom_cache_file.value,
            "/hf/optimum_neuron_custom_cache");
  EXPECT_EQ(resolve({{"HF_HOME", "/hf"}}).hf_hub_cache.value, "/hf/hub");
  EXPECT_EQ(resolve({{"HF_HUB_CACHE", "/blobs"}}).hf_hub_cache.value, "/blobs");
}

TEST(SettingsToken, PrecedenceEnvLegacyEnvFile) {
  TempDir home;
  write_file(home / "token", "hf_storedtoken1234\n");
  write_file(home / "other-token", "hf_pathtoken5678");
  EXPECT_EQ(resolve({{"HF_HOME", home.path()}}).token.value, "hf_storedtoken1234");
  config::Settings by_path =
      resolve({{"HF_HOME", home.path()}, {"HF_TOKEN_PATH", (home / "other-token").string()}});
  EXPECT_EQ(by_path.token.value, "hf_pathtoken5678");
  config::Settings legacy =
      resolve({{"HF_HOME", home.path()}, {"HUGGING_FACE_HUB_TOKEN", "hf_legacy0000"}});
  EXPECT_EQ(legacy.token.value, "hf_legacy0000");
  EXPECT_EQ(legacy.token.origin, "HUGGING_FACE_HUB_TOKEN");
  config::Settings env = resolve({{"HF_HOME", home.path()},
                                  {"HF_TOKEN", " hf_envtoken9999 "},
                                  {"HUGGING_FACE_HUB_TOKEN", "hf_legacy0000"}});
  EXPECT_EQ(env.token.value, "hf_envtoken9999");
  EXPECT_EQ(env.token.origin, "HF_TOKEN");
  TempDir empty;
  EXPECT_EQ(resolve({{"HF_HOME", empty.path()}, {"HF_TOKEN", ""}}).token.value, "");
  // No default token file is usual; an HF_TOKEN_PATH naming a missing file is a mistake, named.
  EXPECT_TRUE(resolve({{"HF_HOME", empty.path()}}).warnings.empty());
  config::Settings missing =
      resolve({{"HF_HOME", empty.path()}, {"HF_TOKEN_PATH", (empty / "nope").string()}});
  EXPECT_EQ(missing.token.value, "");
  EXPECT_NE(missing.token.origin.find((empty / "nope").string()), std::string::npos);
  ASSERT_EQ(missing.warnings.size(), 1u);
  EXPECT_NE(missing.warnings[0].find("HF_TOKEN_PATH names " + (empty / "nope").string() +
                                     ", which cannot be read"),
            std::string::npos)
      << missing.warnings[0];
}

// Every credential of the environment is known to the writers once the settings are resolved; a
// variable that says where a secret is kept is not one.
TEST(SettingsToken, EveryCredentialOfTheEnvironmentIsMasked) {
  resolve({{"AWS_SECRET_ACCESS_KEY", "settings/secret/0123456789abcdef"},
           {"db_password", "settings-password-42"},
           {"HF_TOKEN_PATH", "/settings/where/the/token/is"}});
  EXPECT_EQ(config::redact("k=settings/secret/0123456789abcdef p=SETTINGS-PASSWORD-42"),
            "k=aws_secret_****cdef p=db_password_****d-42");
  EXPECT_EQ(config::redact("/settings/where/the/token/is"), "/settings/where/the/token/is");
}

TEST(SettingsToken, MaskShowsAtMostTheLastFourCharacters) {
  EXPECT_EQ(config::mask_token("hf_abcdefghijklmnopWXYZ"), "hf_****WXYZ");
  EXPECT_EQ(config::mask_token("hf_short"), "hf_****");
  EXPECT_EQ(config::mask_token(""), "");
}

TEST(SettingsHub, EndpointStripsTrailingSlashAndOfflineIsTruthy) {
  EXPECT_EQ(resolve({}).endpoint.value, "https://huggingface.co");
  EXPECT_EQ(resolve({{"HF_ENDPOINT", "http://127.0.0.1:8080//"}}).endpoint.value,
            "http://127.0.0.1:8080");
  for (const char* yes : {"1", "true", "YES", "on"}) {
    EXPECT_TRUE(resolve({{"HF_HUB_OFFLINE", yes}}).offline) << yes;
  }
  for (const char* no : {"0", "false", "no", ""}) {
    EXPECT_FALSE(resolve({{"HF_HUB_OFFLINE", no}}).offline) << no;
  }
}

// Credentials in HF_ENDPOINT would be printed by `config show` and written by Bazel in its marker
// file: refused, as for the S3 endpoint, without quoting them.
TEST(SettingsHub, EndpointWithCredentialsIsRefused) {
  for (const char* endpoint : {"http://alice:s3cr3t-word@hub.local", "https://alice@hub.local/x",
                               "http://alice:s3cr3t-word@hub.local:8080/"}) {
    try {
      resolve({{"HF_ENDPOINT", endpoint}});
      ADD_FAILURE() << endpoint << " accepted";
    } catch (const Error& e) {
      std::string what = e.what();
      EXPECT_EQ(e.kind(), ErrorKind::Input);
      EXPECT_NE(what.find("HF_ENDPOINT holds credentials"), std::string::npos) << what;
      EXPECT_EQ(what.find("alice"), std::string::npos) << what;
    }
  }
  EXPECT_EQ(resolve({{"HF_ENDPOINT", "https://hub.local/a@b"}}).endpoint.value,
            "https://hub.local/a@b");
}

TEST(SettingsCompiler, UnknownWithoutNeuronxCcAndExplainsHowToGiveIt) {
  config::Settings s = resolve({});
  s.detect_compiler(config::Environment(std::map<std::string, std::string>{}));
  EXPECT_EQ(s.compiler_version.value, "");
  EXPECT_EQ(s.compiler_version.origin, "neuronx-cc is not on PATH");
  try {
    s.require_compiler_version();
    FAIL() << "an unknown compiler version must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--compiler-version"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("the neuronx-cc version is unknown (neuronx-cc is not on "
                                         "PATH): pass"),
              std::string::npos)
        << e.what();
  }
}

TEST(SettingsCompiler, ReadsNeuronxCcVersionFromPath) {
  TempDir bin;
  write_file(bin / "neuronx-cc",
             "#!/bin/sh\n[ \"$1\" = --version ] || exit 3\n"
             "echo 'NeuronX Compiler version 2.21.33363.0+82129205'\necho\n"
             "echo 'Python version 3.10.12'\n");
  chmod((bin / "neuronx-cc").c_str(), 0755);
  config::Environment env({{"PATH", bin.path().string()}});
  config::Settings s = config::Settings::resolve(env, {});
  EXPECT_EQ(s.compiler_version.value, "") << "resolving alone never runs neuronx-cc";
  s.detect_compiler(env);
  EXPECT_EQ(s.compiler_version.value, "2.21.33363.0+82129205");
  EXPECT_NE(s.compiler_version.origin.find("--version"), std::string::npos);
  config::SettingOverrides o;
  o.compiler_version = "2.15.128.0+56dc5a86";
  config::Settings given = config::Settings::resolve(env, o);
  given.detect_compiler(env);
  EXPECT_EQ(given.compiler_version.value, "2.15.128.0+56dc5a86");
}

TEST(SettingsCompiler, ParsesVersionOutputs) {
  EXPECT_EQ(
      config::parse_compiler_version_output("NeuronX Compiler version 2.21.33363.0+82129205\n"),
      "2.21.33363.0+82129205");
  EXPECT_EQ(config::parse_compiler_version_output("neuronx-cc version 2.15.128.0"), "2.15.128.0");
  EXPECT_EQ(config::parse_compiler_version_output("garbage"), std::nullopt);
}

}  // namespace
}  // namespace neuron_cache
