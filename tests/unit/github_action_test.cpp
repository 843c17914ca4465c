// The GitHub Action (github-action/) under the runner's contract: the binary runs with a clean
// environment holding only what a runner gives a composite step (INPUT_*, GITHUB_OUTPUT,
// GITHUB_STEP_SUMMARY, GITHUB_EVENT_NAME/PATH, RUNNER_TEMP) against the local Hub server with the
// demo's repos, compiling examples/neuron-cache.yaml with the stand-in behind an `optimum-cli`
// shim. Facts come from the files the runner would read, the Hub's access log and action.yml.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "aws_stand_in.h"
#include "hub_fixture.h"
#include "neuron_cache/hub/client.h"
#include "neuron_cache/storage/folder_store.h"
#include "s3_server.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

using nlohmann::json;
using testing::contains;
using testing::HubServer;
using testing::read_file;
using testing::TempDir;
using testing::write_file;
namespace fs = std::filesystem;

constexpr const char* kToken = "hf_alice_write";
const std::vector<std::string> kConfigs = {"llama3-8b-chat", "llama3-8b-batch", "llama3-8b-long",
                                           "qwen2.5-7b-trn2", "mistral-7b-inf2"};

fs::path repo_root() {
  return fs::path(NEURON_CACHE_TESTS_DIR).parent_path();
}

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char ch : text) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

size_t occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// The workflow commands a runner would obey in `out`, as actions/runner reads them: a line whose
// text after leading spaces starts with "::" and has a second "::", or the legacy "##[name]"
// anywhere in a line; nothing between ::stop-commands::TOKEN and ::TOKEN:: but that resume.
std::vector<std::string> obeyed_commands(const std::string& out) {
  std::vector<std::string> obeyed;
  std::string stop;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::string text = line.substr(std::min(line.find_first_not_of(" \t"), line.size()));
    if (!stop.empty()) {
      if (text == "::" + stop + "::") stop.clear();
      continue;
    }
    bool modern = text.starts_with("::") && text.find("::", 2) != std::string::npos;
    size_t legacy = line.find("##[");
    if (!modern && (legacy == std::string::npos || line.find(']', legacy) == std::string::npos))
      continue;
    obeyed.push_back(line);
    if (text.starts_with("::stop-commands::")) stop = text.substr(17);
  }
  return obeyed;
}

bool is_commit(const json& e) {
  return e["method"] == "POST" && contains(e["path"].get<std::string>(), "/commit/");
}

// GITHUB_OUTPUT as the runner reads it: `name=value` and `name<<DELIM` ... `DELIM`.
std::vector<std::pair<std::string, std::string>> parse_outputs(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (size_t heredoc = line.find("<<"); heredoc != std::string::npos) {
      std::string name = line.substr(0, heredoc), delimiter = line.substr(heredoc + 2), value;
      bool closed = false;
      for (std::string body; std::getline(in, body);) {
        if (body == delimiter) {
          closed = true;
          break;
        }
        value += (value.empty() ? "" : "\n") + body;
      }
      EXPECT_TRUE(closed) << "unterminated " << name << " in\n" << text;
      out.emplace_back(name, value);
    } else if (size_t eq = line.find('='); eq != std::string::npos) {
      out.emplace_back(line.substr(0, eq), line.substr(eq + 1));
    } else if (!line.empty()) {
      ADD_FAILURE() << "not an output line: " << line;
    }
  }
  return out;
}

// What one run of the action left where the runner looks.
struct ActionRun {
  int code = -1;
  std::string out;  // stdout: workflow commands and the log
  std::string err;
  std::string output_file;  // GITHUB_OUTPUT
  std::map<std::string, std::string> outputs;
  std::vector<std::string> output_names;  // in order, repeats kept
  std::string summary;                    // GITHUB_STEP_SUMMARY
  json report;                            // the file the `report` output names
  std::string report_text;
};

class GithubActionTest : public ::testing::Test {
 protected:
  GithubActionTest()
      : server(json::parse(read_file(repo_root() / "examples/demo-hub.json"))),
        endpoint(server.url()) {
    fs::create_directories(work / "bin");
    fs::create_directories(work / "temp");
    // The demo's compile command is `optimum-cli export neuron ...`; the shim runs the stand-in
    // instead, records its environment (to prove the token never reaches it) and prints a
    // workflow command, as a compiler log could, that the action must not obey.
    write_file(work / "bin/optimum-cli",
               "#!/bin/sh\nenv > \"$(mktemp " + (work / "child-env-XXXXXX").string() +
                   ")\"\necho '::error title=injected::from the compile log'\n"
                   "[ \"$1 $2\" = \"export neuron\" ] && shift 2\nexec " +
                   std::string(STAND_IN_EXPORT) + " \"$@\"\n");
    fs::permissions(work / "bin/optimum-cli", fs::perms::owner_all);
    fs::copy_file(repo_root() / "examples/neuron-cache.yaml", work / "neuron-cache.yaml");
    write_file(work / "push-event.json", R"({"ref": "refs/heads/main"})");
  }

  // Runs `program` (a command line; the action binary by default) in the work folder with only
  // the runner's variables, `inputs` as INPUT_<NAME>, and `env` on top.
  ActionRun run(const std::map<std::string, std::string>& inputs,
                std::map<std::string, std::string> env = {},
                const std::string& program = quoted(NEURON_CACHE_ACTION)) {
    std::string id = std::to_string(runs_++);
    fs::path output_file = work / ("output-" + id), summary = work / ("summary-" + id);
    fs::path err_file = work / ("stderr-" + id);
    std::map<std::string, std::string> vars = {
        {"PATH", (work / "bin").string() + ":/usr/bin:/bin"},
        {"HOME", "/nonexistent-home"},
        {"HF_HOME", (work / "hf-home").string()},
        {"HF_ENDPOINT", endpoint},
        {"NEURON_COMPILE_CACHE_URL", (work / "default-cache").string()},
        {"NEURON_CACHE_RETRY_BASE_MS", "10"},
        {"STAND_IN_DELAY", "0"},
        {"GITHUB_ACTIONS", "true"},
        {"GITHUB_EVENT_NAME", "push"},
        {"GITHUB_EVENT_PATH", (work / "push-event.json").string()},
        {"GITHUB_OUTPUT", output_file.string()},
        {"GITHUB_STEP_SUMMARY", summary.string()},
        {"RUNNER_TEMP", (work / "temp").string()}};
    for (const auto& [name, value] : inputs) vars[input_variable(name)] = value;
    for (const auto& [name, value] : env) vars[name] = value;
    std::string command = "cd " + quoted(work.path()) + " && " + std::string(testing::kCleanEnv);
    for (const auto& [name, value] : vars) command += " " + name + "=" + quoted(value);
    command += " " + program + " 2>" + quoted(err_file);
    ActionRun result;
    result.code = testing::run_command(command, &result.out);
    result.err = fs::exists(err_file) ? read_file(err_file) : "";
    result.output_file = fs::exists(output_file) ? read_file(output_file) : "";
    for (const auto& [name, value] : parse_outputs(result.output_file)) {
      result.outputs[name] = value;
      result.output_names.push_back(name);
    }
    result.summary = fs::exists(summary) ? read_file(summary) : "";
    if (auto it = result.outputs.find("report"); it != result.outputs.end()) {
      result.report_text = read_file(it->second);
      result.report = json::parse(result.report_text);
    }
    return result;
  }

  static std::string input_variable(const std::string& name) {
    std::string variable = "INPUT_";
    for (char ch : name) variable += ch == '-' ? '_' : static_cast<char>(std::toupper(ch));
    return variable;
  }

  // mode all on main with the write token, compiling into `cache`.
  ActionRun main_push(const std::string& cache, std::map<std::string, std::string> env = {}) {
    return run({{"manifest", "neuron-cache.yaml"},
                {"mode", "all"},
                {"token", kToken},
                {"cache-dir", (work / cache).string()}},
               std::move(env));
  }

  // Main's run compiles and pushes to `store`, a second machine's run fetches everything.
  void store_round_trip(const std::string& store, const std::map<std::string, std::string>& env) {
    std::string label = std::to_string(runs_);
    auto job = [&](const std::string& cache) {
      return run({{"manifest", "neuron-cache.yaml"},
                  {"mode", "all"},
                  {"token", kToken},
                  {"cache-repo", store},
                  {"cache-dir", (work / cache).string()}},
                 env);
    };
    ActionRun first = job("store-first-" + label);
    ASSERT_EQ(first.code, 0) << first.out << first.err;
    EXPECT_EQ(first.outputs["compiled"], "5") << first.out;
    EXPECT_TRUE(contains(first.out, "::group::neuron-cache all: " + store)) << first.out;
    ActionRun second = job("store-second-" + label);
    ASSERT_EQ(second.code, 0) << second.out << second.err;
    EXPECT_EQ(second.outputs["cache-hit"], "true") << second.out;
    EXPECT_EQ(second.outputs["compiled"], "0");
    EXPECT_EQ(second.report["store"], store.starts_with("s3://") ? "s3" : "folder")
        << second.report_text;
    // Only the Hub has commits, and S3 or a shared folder is never called the Hub.
    const std::string where = store.starts_with("s3://") ? "S3" : "the shared folder";
    EXPECT_TRUE(contains(first.out, "pushed 5 configurations to ")) << first.out;
    EXPECT_FALSE(contains(first.out, "in commit")) << first.out;
    EXPECT_TRUE(contains(second.out, "5 fetched from " + where + ")")) << second.out;
    EXPECT_FALSE(contains(second.out, "fetched from the Hub")) << second.out;
    for (const auto& [name, value] : env) {
      if (name == "AWS_SECRET_ACCESS_KEY") {
        EXPECT_FALSE(contains(second.out + second.err, value));
      }
    }
  }

  fs::path event_file(const json& payload) {
    fs::path path = work / ("event-" + std::to_string(runs_) + ".json");
    write_file(path, payload.dump());
    return path;
  }

  static json pull_request(const json& head_repo, const std::string& base) {
    return {{"action", "opened"},
            {"pull_request",
             {{"number", 7},
              {"head", {{"ref", "feature"}, {"repo", head_repo}}},
              {"base", {{"ref", "main"}, {"repo", {{"full_name", base}, {"fork", false}}}}}}}};
  }

  // Every environment the compile commands ran with, concatenated.
  std::string child_environments() const {
    std::string all;
    for (const auto& entry : fs::directory_iterator(work.path())) {
      if (entry.path().filename().string().starts_with("child-env-"))
        all += read_file(entry.path());
    }
    return all;
  }

  // The Outcome cell of a configuration's row in the summary table ("| name | model | outcome |").
  static std::string outcome_cell(const std::string& summary, const std::string& name) {
    size_t row = summary.find("\n| " + name + " | ");
    if (row == std::string::npos) return "";
    size_t model = summary.find(" | ", row + 1);
    size_t outcome = summary.find(" | ", model + 3);
    size_t end = summary.find(" |", outcome + 3);
    if (outcome == std::string::npos || end == std::string::npos) return "";
    return summary.substr(outcome + 3, end - outcome - 3);
  }

  // No std::regex here: GCC 12 with ASan warns falsely inside <regex>.
  static void expect_summary_rows(const std::string& summary,
                                  const std::vector<std::string>& outcomes) {
    for (const auto& name : kConfigs) {
      std::string cell = outcome_cell(summary, name);
      EXPECT_NE(std::find(outcomes.begin(), outcomes.end(), cell), outcomes.end())
          << name << " has outcome \"" << cell << "\" in\n"
          << summary;
    }
  }

  TempDir work;
  HubServer server;
  std::string endpoint;

 private:
  int runs_ = 0;
};

// (1) main: compiles the 5 configurations, pushes them in one commit, sets every output, writes
// the summary table, and the token shows up once, in the mask command, and nowhere else.
TEST_F(GithubActionTest, MainPushCompilesPushesAndMasksTheToken) {
  ActionRun r = main_push("cache");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.outputs["cache-hit"], "false");
  EXPECT_EQ(r.outputs["hits"], "0");
  EXPECT_EQ(r.outputs["misses"], "5");
  EXPECT_EQ(r.outputs["compiled"], "5");
  EXPECT_EQ(json::parse(r.outputs["missing"]), json::array());
  EXPECT_TRUE(contains(r.output_file, "missing<<")) << "JSON goes in the multi-line form";
  EXPECT_EQ(r.report["totals"]["compiled"], 5);
  EXPECT_FALSE(r.report["push"]["commit"].get<std::string>().empty()) << r.report_text;
  EXPECT_EQ(r.report["action"]["read_only"], false);
  EXPECT_TRUE(fs::path(r.outputs["report"]).parent_path() == work / "temp");
  // A compile lease claimed before each of the 5 compiles (jobs: 1), one push whose commit marks
  // the leases done (docs/fleet.md: 1 + ceil(N/J) commits).
  EXPECT_EQ(testing::count_requests(server.access_log(), is_commit), 6u);
  for (const auto& row : r.report["configurations"]) EXPECT_EQ(row["lease"]["outcome"], "held");

  expect_summary_rows(r.summary, {"compiled"});
  EXPECT_TRUE(contains(r.out, "::notice title=neuron-cache::5 configurations: 0 hits"));
  EXPECT_TRUE(contains(r.out, "::group::neuron-cache all: acme/neuron-cache")) << r.out;

  EXPECT_TRUE(r.out.starts_with(std::string("::add-mask::") + kToken + "\n")) << r.out;
  EXPECT_EQ(occurrences(r.out, kToken), 1u) << r.out;
  for (const auto& text : {r.err, r.output_file, r.summary, r.report_text})
    EXPECT_FALSE(contains(text, kToken));
  // The compile commands ran; they read the cache repo through optimum-neuron's hub proxy, so
  // the token reaches them as HF_TOKEN with the repo, and in no other variable.
  std::string children = child_environments();
  EXPECT_TRUE(contains(children, "NEURON_COMPILE_CACHE_URL="));
  EXPECT_TRUE(contains(children, "CUSTOM_CACHE_REPO=acme/neuron-cache\n")) << children;
  EXPECT_EQ(occurrences(children, kToken),
            occurrences(children, std::string("HF_TOKEN=") + kToken));
  EXPECT_FALSE(contains(children, "INPUT_TOKEN"));
}

// The signing-key input (a secret key file's text) signs what main's run pushes: masked before
// anything is printed, never in a file the runner keeps, gone from the compile commands'
// environment. With require-signatures, optimum-neuron's hub proxy is kept from the compiles; a
// second machine trusting the key fetches everything, one trusting another key fetches nothing.
TEST_F(GithubActionTest, SigningKeyInputSignsThePushAndRequiredSignaturesAreChecked) {
  auto key = [this](const std::string& name) {
    fs::path file = work / (name + ".secret");
    std::string public_line;
    EXPECT_EQ(testing::run_command(quoted(NEURON_CACHE_TOOL) + " key generate " + name +
                                       " --secret-file " + quoted(file),
                                   &public_line),
              0);
    return std::pair{read_file(file), public_line.substr(0, public_line.find('\n'))};
  };
  auto [secret, trusted] = key("acme-ci-1");
  auto [other_secret, other] = key("other-1");
  std::string seed = secret.substr(secret.find(':') + 1, 44);
  std::map<std::string, std::string> inputs = {{"manifest", "neuron-cache.yaml"},
                                               {"mode", "all"},
                                               {"token", kToken},
                                               {"cache-dir", (work / "signer").string()},
                                               {"trusted-keys", trusted},
                                               {"require-signatures", "true"},
                                               {"signing-key", secret}};
  ActionRun r = run(inputs);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.outputs["compiled"], "5");
  EXPECT_TRUE(contains(r.out, "::add-mask::" + seed + "\n")) << r.out;
  EXPECT_EQ(occurrences(r.out, seed), 2u) << "only in the two add-mask lines: " << r.out;
  for (const auto& text : {r.err, r.output_file, r.summary, r.report_text})
    EXPECT_FALSE(contains(text, seed));
  std::string children = child_environments();
  EXPECT_FALSE(contains(children, seed));
  EXPECT_FALSE(contains(children, "INPUT_SIGNING_KEY")) << children;
  EXPECT_TRUE(contains(children, "CUSTOM_CACHE_REPO=neuron-cache--signatures-required"))
      << children;

  inputs.erase("signing-key");
  inputs["cache-dir"] = (work / "trusting").string();
  ActionRun fetched = run(inputs);
  ASSERT_EQ(fetched.code, 0) << fetched.out << fetched.err;
  EXPECT_EQ(fetched.outputs["hits"], "5") << fetched.out;
  EXPECT_EQ(fetched.report["totals"]["refused"], 0);

  inputs["cache-dir"] = (work / "distrusting").string();
  inputs["trusted-keys"] = other;
  inputs["mode"] = "plan";
  ActionRun refused = run(inputs);
  ASSERT_EQ(refused.code, 0) << refused.out << refused.err;
  EXPECT_EQ(refused.outputs["misses"], "5") << refused.out;
  EXPECT_EQ(refused.report["totals"]["refused"], 5) << refused.report_text;
  EXPECT_TRUE(contains(refused.summary, "signed only by keys that are not trusted: acme-ci-1"))
      << refused.summary;
}

// (2) a second machine (empty cache) after main's run: everything comes from the Hub.
// Issue 22: the action's user has inputs and secrets, not `neuron-cache whoami`: a missing
// token, a refused one and a missing repo are each explained in those words.
TEST_F(GithubActionTest, TokenAndRepoAdviceSpeaksOfInputsNotCommands) {
  auto job = [&](const std::string& token, const std::string& repo) {
    return run({{"manifest", "neuron-cache.yaml"},
                {"mode", "all"},
                {"token", token},
                {"cache-repo", repo},
                {"cache-dir", (work / ("cache-" + token.substr(0, 6) + repo.substr(5))).string()}});
  };
  ActionRun none = job("", "acme/private-cache");
  EXPECT_EQ(none.code, 0) << none.out << none.err;
  EXPECT_TRUE(contains(none.out, "no Hugging Face token: ")) << none.out;
  EXPECT_TRUE(contains(none.out, "give the action's `token` input a token")) << none.out;
  EXPECT_FALSE(contains(none.out, "set HF_TOKEN")) << none.out;
  ActionRun refused = job("hf_revoked_token_0000", "acme/private-cache");
  EXPECT_TRUE(contains(refused.out, "give the action's `token` input a valid token"))
      << refused.out;
  ActionRun missing = job(kToken, "acme/new-cache");
  EXPECT_TRUE(contains(missing.out, "does not exist or the token cannot read it")) << missing.out;
  EXPECT_TRUE(contains(missing.out, "created once, on the Hub (private), before the first push"))
      << missing.out;
  for (const ActionRun* r : {&none, &refused, &missing}) {
    EXPECT_FALSE(contains(r->out + r->err, "neuron-cache whoami")) << r->out << r->err;
    EXPECT_FALSE(contains(r->out + r->err, "neuron-cache create")) << r->out << r->err;
  }
}

// The step's log is never silent for long: a running compile says so every
// NEURON_CACHE_HEARTBEAT_SECONDS (its configuration, the time so far, the time expected, its log),
// and a download from a slow CDN prints a plain line every NEURON_CACHE_PROGRESS_INTERVAL_MS with
// its bytes, rate and ETA, then a final line, as the CLI does off a terminal (never a bar).
TEST_F(GithubActionTest, LongCompilesAndTransfersPrintLinesAsTheyGo) {
  auto job = [&](const std::string& cache, const std::map<std::string, std::string>& env) {
    return run({{"manifest", "neuron-cache.yaml"},
                {"mode", "all"},
                {"token", kToken},
                {"configs", "llama3-8b-chat"},
                {"cache-dir", (work / cache).string()}},
               env);
  };
  auto count = [](const std::string& text, const std::string& part) {
    size_t n = 0;
    for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
    return n;
  };
  ActionRun first = job("cache", {{"STAND_IN_DELAY", "2.5"},
                                  {"STAND_IN_NEFF_BYTES", std::to_string(1 << 20)},
                                  {"NEURON_CACHE_HEARTBEAT_SECONDS", "1"}});
  ASSERT_EQ(first.code, 0) << first.out << first.err;
  const std::string beat = "neuron-cache: still compiling llama3-8b-chat: ";
  EXPECT_GE(count(first.out, beat), 2u) << first.out;
  EXPECT_TRUE(contains(first.out,
                       " s so far, expected time unknown (no earlier compile of it "
                       "recorded); log: " +
                           (work / "neuron-cache-output" / "llama3-8b-chat.log").string() + "\n"))
      << first.out;
  EXPECT_TRUE(contains(first.out, "\nUploading done: ")) << first.out;

  server.set_faults(json::array({{{"match", {{"listener", "cdn"}, {"method", "GET"}}},
                                  {"count", -1},
                                  {"action", "trickle"},
                                  {"bytes_per_second", 1 << 20}}}));
  ActionRun second = job("second", {{"NEURON_CACHE_PROGRESS_INTERVAL_MS", "100"}});
  server.clear_faults();
  ASSERT_EQ(second.code, 0) << second.out << second.err;
  EXPECT_EQ(second.outputs["cache-hit"], "true") << second.out;
  EXPECT_GE(count(second.out, "\nDownloading: "), 2u) << second.out;
  EXPECT_TRUE(contains(second.out, "/s, ETA ")) << second.out;
  EXPECT_TRUE(contains(second.out, "\nDownloading done: ")) << second.out;
  EXPECT_FALSE(contains(second.out + second.err, "\r")) << "no redraws in a CI log";
  EXPECT_FALSE(contains(second.err, "Downloading")) << "the log is stdout: " << second.err;
}

TEST_F(GithubActionTest, SecondRunIsACacheHit) {
  ASSERT_EQ(main_push("cache").code, 0);
  server.clear_log();
  ActionRun r = main_push("second-machine");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.outputs["cache-hit"], "true");
  EXPECT_EQ(r.outputs["hits"], "5");
  EXPECT_EQ(r.outputs["misses"], "0");
  EXPECT_EQ(r.outputs["compiled"], "0");
  EXPECT_EQ(json::parse(r.outputs["missing"]), json::array());
  EXPECT_EQ(r.report["totals"]["hub_hits"], 5);
  expect_summary_rows(r.summary, {"fetched from the Hub"});
  EXPECT_EQ(testing::count_requests(server.access_log(), is_commit), 0u);
  EXPECT_TRUE(child_environments().size() > 0);  // only the first run's compiles

  ActionRun again = main_push("second-machine");  // and the same machine again: all local
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(again.outputs["cache-hit"], "true");
  EXPECT_EQ(again.report["totals"]["local"], 5);
}

// The same two machines against a shared folder and an S3 bucket: only the cache-repo input
// changes; the first compiles and pushes, the second fetches all five and compiles nothing.
TEST_F(GithubActionTest, FolderStoreServesASecondMachine) {
  fs::create_directories(work / "shared");
  storage::create_folder_store(work / "shared");  // `neuron-cache create -n file://...`, once
  store_round_trip("file://" + (work / "shared").string(), {});
}

TEST_F(GithubActionTest, S3StoreServesASecondMachine) {
  if (std::getenv("NEURON_CACHE_S3RVER") == nullptr) {
    GTEST_SKIP() << "runs under ctest action_s3 (tests/s3/run-s3-tests.sh starts s3rver)";
  }
  testing::S3Server s3;
  std::map<std::string, std::string> env;
  for (const auto& [name, value] : s3.env()) env[name] = value;
  store_round_trip(s3.url("action-cache"), env);
}

// Issue 23: the same round trip where runners get their credentials as on AWS: machine 1 from its
// instance role (IMDSv2), then a machine for every other source (a pod's web identity, a role
// assumed from a source profile, SSO, credential_process, the container endpoint), all from the
// loopback stand-ins; no AWS key is in any environment, and none is printed.
TEST_F(GithubActionTest, S3CredentialsFromEverySourceServeTheSameCache) {
  if (std::getenv("NEURON_CACHE_S3RVER") == nullptr) {
    GTEST_SKIP() << "runs under ctest action_s3 (tests/s3/run-s3-tests.sh starts s3rver)";
  }
  testing::S3Server s3;
  nlohmann::json config = testing::AwsStandIn::example_config();
  // s3rver knows one key id; the stand-ins hand it out with their session tokens.
  for (auto* credentials :
       {&config["imds"]["credentials"], &config["container"]["credentials"],
        &config["sts"]["web_identity"]["credentials"], &config["sts"]["assume_role"]["credentials"],
        &config["sso"]["credentials"], &config["process"]["credentials"]}) {
    (*credentials)["AccessKeyId"] = testing::kS3Key;
    (*credentials)["SecretAccessKey"] = testing::kS3Secret;
  }
  testing::AwsStandIn aws(config);
  std::string store = s3.url("role-cache");
  auto job = [&](const std::string& source) {
    std::map<std::string, std::string> env = aws.env_for(source, work / ("home-" + source));
    env["AWS_REGION"] = "us-east-1";
    env["AWS_ENDPOINT_URL_S3"] = s3.endpoint();
    return run({{"manifest", "neuron-cache.yaml"},
                {"mode", "all"},
                {"token", kToken},
                {"cache-repo", store},
                {"cache-dir", (work / ("cache-" + source)).string()}},
               env);
  };
  ActionRun first = job("imds");
  ASSERT_EQ(first.code, 0) << first.out << first.err;
  EXPECT_TRUE(contains(first.out, "pushed 5 configurations to ")) << first.out;
  std::string printed = first.out + first.err;
  for (const std::string source : {"web_identity", "assume_role", "sso", "process", "container"}) {
    ActionRun again = job(source);
    ASSERT_EQ(again.code, 0) << source << ": " << again.out << again.err;
    EXPECT_EQ(again.outputs["cache-hit"], "true") << source << ": " << again.out;
    EXPECT_EQ(again.outputs["compiled"], "0") << source;
    printed += again.out + again.err;
    // The installed artifacts are the bytes machine 1 compiled.
    fs::path root = work / "cache-imds";
    for (const auto& entry : fs::recursive_directory_iterator(root / testing::kCompilerDir)) {
      if (!entry.is_regular_file() || entry.path().filename() != "model.neff") continue;
      fs::path twin = work / ("cache-" + source) / fs::relative(entry.path(), root);
      ASSERT_TRUE(fs::exists(twin)) << source << ": " << twin;
      EXPECT_EQ(read_file(twin), read_file(entry.path())) << twin;
    }
  }
  size_t sts = 0;
  for (const auto& request : aws.log()) {
    sts += request.value("action", "") == "AssumeRoleWithWebIdentity" ? 1 : 0;
  }
  EXPECT_EQ(sts, 1u) << "fetched once per run, not per request: " << aws.log().dump();
  for (const auto& secret : {config["imds"]["credentials"]["SessionToken"].get<std::string>(),
                             config["sts"]["web_identity"]["token"].get<std::string>(),
                             config["sso"]["access_token"].get<std::string>(),
                             config["container"]["authorization_token"].get<std::string>()}) {
    EXPECT_FALSE(contains(printed, secret));
  }
}

// (3) a pull request from a fork, even given a write token: read-only, compiles locally, says so.
TEST_F(GithubActionTest, ForkPullRequestNeverWritesToTheHub) {
  json payload = pull_request({{"full_name", "mallory/neuron-app"}, {"fork", true}}, "acme/app");
  ActionRun r = run(
      {{"manifest", "neuron-cache.yaml"},
       {"mode", "all"},
       {"token", kToken},
       {"cache-dir", (work / "cache").string()}},
      {{"GITHUB_EVENT_NAME", "pull_request"}, {"GITHUB_EVENT_PATH", event_file(payload).string()}});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.outputs["compiled"], "5");
  EXPECT_EQ(json::parse(r.outputs["missing"]), json::array());
  EXPECT_EQ(r.report["action"]["read_only"], true);
  EXPECT_FALSE(r.report["push"]["attempted"].get<bool>());
  json log = server.access_log();
  EXPECT_EQ(testing::count_requests(log, is_commit), 0u);
  EXPECT_EQ(testing::count_requests(log,
                                    [](const json& e) {
                                      std::string path = e["path"];
                                      return contains(path, "preupload") ||
                                             contains(path, "/info/lfs/");
                                    }),
            0u);
  size_t notice =
      r.out.find("::notice title=neuron-cache::pushes are disabled for pull requests from forks");
  ASSERT_NE(notice, std::string::npos) << r.out;
  EXPECT_TRUE(
      contains(r.out.substr(notice, r.out.find('\n', notice) - notice), "mallory/neuron-app"))
      << r.out;
  EXPECT_TRUE(contains(r.summary, "read-only")) << r.summary;
}

// read-only: auto follows the event; explicit values win; an unreadable pull request payload
// counts as a fork's (plan mode: each run is a handful of requests).
TEST_F(GithubActionTest, ReadOnlyAutoFollowsTheEvent) {
  auto read_only = [&](const std::string& event, const json& payload,
                       const std::string& value = "auto") {
    fs::path path = payload.is_null() ? work / "missing-event.json" : event_file(payload);
    ActionRun r = run({{"manifest", "neuron-cache.yaml"}, {"mode", "plan"}, {"read-only", value}},
                      {{"GITHUB_EVENT_NAME", event}, {"GITHUB_EVENT_PATH", path.string()}});
    EXPECT_EQ(r.code, 0) << r.out;
    return r.report["action"]["read_only"] == true;
  };
  json same_repo = {{"full_name", "acme/app"}, {"fork", false}};
  EXPECT_FALSE(read_only("push", {{"ref", "refs/heads/main"}}));
  EXPECT_FALSE(read_only("pull_request", pull_request(same_repo, "acme/app")));
  // A base repository that is itself a fork: its own branches are not a fork's.
  EXPECT_FALSE(read_only("pull_request",
                         pull_request({{"full_name", "acme/app"}, {"fork", true}}, "acme/app")));
  EXPECT_TRUE(read_only("pull_request", pull_request({{"full_name", "eve/app"}}, "acme/app")));
  EXPECT_TRUE(
      read_only("pull_request_target", pull_request({{"full_name", "eve/app"}}, "acme/app")));
  EXPECT_TRUE(read_only("pull_request", pull_request(nullptr, "acme/app")));  // fork deleted
  EXPECT_TRUE(read_only("pull_request", nullptr));                            // no payload
  EXPECT_TRUE(read_only("push", {{"ref", "refs/heads/main"}}, "true"));
  EXPECT_FALSE(
      read_only("pull_request", pull_request({{"full_name", "eve/app"}}, "acme/app"), "FALSE"));
}

// (4) a failing compile: exit 1, its log tail folded (with workflow commands in it disabled), a
// warning, the other configurations still compiled and pushed.
TEST_F(GithubActionTest, FailedCompileExitsOneWithTheLogFolded) {
  ActionRun r = main_push("cache", {{"STAND_IN_FAIL", "sequence_length=8192"}});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_EQ(r.outputs["compiled"], "4");
  EXPECT_EQ(r.outputs["cache-hit"], "false");
  EXPECT_EQ(json::parse(r.outputs["missing"]), json::array({"llama3-8b-long"}));
  EXPECT_EQ(r.report["totals"]["failed"], 1);

  size_t group = r.out.find("::group::compile llama3-8b-long\n");
  ASSERT_NE(group, std::string::npos) << r.out;
  size_t end = r.out.find("::endgroup::", group);
  ASSERT_NE(end, std::string::npos);
  std::string folded = r.out.substr(group, end - group);
  EXPECT_TRUE(contains(folded, "terminated abnormally (stand-in failure)")) << folded;
  size_t stop = folded.find("::stop-commands::");
  ASSERT_NE(stop, std::string::npos) << folded;
  size_t token_start = stop + std::string("::stop-commands::").size();
  std::string token = folded.substr(token_start, folded.find('\n', token_start) - token_start);
  ASSERT_FALSE(token.empty()) << folded;
  size_t injected = folded.find("::error title=injected::");
  ASSERT_NE(injected, std::string::npos) << folded;
  EXPECT_GT(injected, stop);
  EXPECT_LT(injected, folded.find("::" + token + "::"));
  EXPECT_TRUE(contains(r.out,
                       "::warning title=neuron-cache::compile of llama3-8b-long failed: "
                       "the compile command exited with status 70"))
      << r.out;
  expect_summary_rows(r.summary, {"compiled", "compile FAILED"});
  // 5 leases claimed one by one, the failed one's released at once (a waiting job takes it over),
  // the push of the 4 others, whose commit marks their leases done.
  EXPECT_EQ(testing::count_requests(server.access_log(), is_commit), 7u);
}

// The AWS secret key (and any variable named like a secret) that a compile command prints is
// masked on the Action's stdout, in its report and every file it leaves.
TEST_F(GithubActionTest, CredentialsTheCompileCommandPrintsAreMaskedEverywhere) {
  const std::map<std::string, std::string> secrets = {
      {"AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY"},
      {"MY_API_KEY", "sk-live-4242424242424242"}};
  std::map<std::string, std::string> env = secrets;
  env["STAND_IN_FAIL"] = "sequence_length=8192";
  env["STAND_IN_PRINT_ENV"] = "AWS_SECRET_ACCESS_KEY,MY_API_KEY";
  ActionRun r = main_push("cache", env);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "AWS_SECRET_ACCESS_KEY=aws_secret_****EKEY"))
      << "the tail: " << r.out;
  std::map<std::string, std::string> texts = {{"stdout", r.out}, {"stderr", r.err}};
  for (const auto& entry : fs::recursive_directory_iterator(work.path())) {
    // The environment the shim recorded holds the secrets by design.
    if (entry.is_regular_file() && !entry.path().filename().string().starts_with("child-env-"))
      texts[entry.path().string()] = read_file(entry.path());
  }
  EXPECT_TRUE(texts.count(r.outputs["report"])) << "the report is among the files";
  for (const auto& [where, text] : texts) {
    for (const auto& [name, value] : secrets) EXPECT_FALSE(contains(text, value)) << where;
  }
}

// (5) bad inputs: exit 2 with an ::error command, before any Hub request; the token is masked
// even then.
TEST_F(GithubActionTest, BadInputsExitTwo) {
  struct Case {
    std::map<std::string, std::string> inputs;
    std::string message;
  };
  std::vector<Case> cases = {
      {{{"manifest", "neuron-cache.yaml"}, {"mode", "bogus"}}, "input mode must be"},
      {{{"token", kToken}}, "input manifest is required"},
      {{{"manifest", "nowhere.yaml"}}, "input manifest: no file nowhere.yaml"},
      {{{"manifest", "neuron-cache.yaml"}, {"jobs", "0"}}, "input jobs must be"},
      {{{"manifest", "neuron-cache.yaml"}, {"strict", "maybe"}}, "input strict must be"},
      {{{"manifest", "neuron-cache.yaml"}, {"read-only", "sometimes"}}, "input read-only must"},
  };
  for (const auto& c : cases) {
    ActionRun r = run(c.inputs);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_TRUE(contains(r.out, "::error title=neuron-cache::" + c.message)) << r.out;
    EXPECT_TRUE(r.output_file.empty());
  }
  EXPECT_EQ(server.access_log().size(), 0u);
  ActionRun masked = run({{"token", kToken}});
  EXPECT_TRUE(masked.out.starts_with(std::string("::add-mask::") + kToken + "\n"));
  EXPECT_EQ(occurrences(masked.out, kToken), 1u);

  ActionRun unknown = run({{"manifest", "neuron-cache.yaml"}, {"configs", "llama3-8b-chat, nope"}});
  EXPECT_EQ(unknown.code, 2) << unknown.out;
  EXPECT_TRUE(contains(unknown.out, "::error title=neuron-cache::no configuration named"));
}

// A cache problem (here: the cache repo does not exist) is a warning and the run goes on; with
// strict it fails the step.
TEST_F(GithubActionTest, CacheProblemWarnsOrFailsWhenStrict) {
  std::map<std::string, std::string> inputs = {
      {"manifest", "neuron-cache.yaml"}, {"mode", "plan"}, {"cache-repo", "acme/no-such-cache"}};
  ActionRun lenient = run(inputs);
  EXPECT_EQ(lenient.code, 0) << lenient.out;
  EXPECT_TRUE(
      contains(lenient.out, "::warning title=neuron-cache::the Hub cache could not be read"))
      << lenient.out;
  EXPECT_EQ(lenient.outputs["misses"], "5");

  inputs["strict"] = "true";
  ActionRun strict = run(inputs);
  EXPECT_EQ(strict.code, 1) << strict.out;
  EXPECT_TRUE(contains(strict.out, "::error title=neuron-cache::the Hub cache could not be read"))
      << strict.out;
  EXPECT_TRUE(strict.output_file.empty());
}

// store-usage: the store's size ends the summary after the run; a store that cannot be measured
// is a warning line there, and the job still succeeds.
TEST_F(GithubActionTest, StoreUsageEndsTheSummaryAndNeverFailsTheJob) {
  ASSERT_EQ(main_push("cache").code, 0);
  std::map<std::string, std::string> inputs = {
      {"manifest", "neuron-cache.yaml"}, {"mode", "plan"}, {"store-usage", "true"}};
  ActionRun r = run(inputs);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  size_t section = r.summary.find("### Cache store usage");
  ASSERT_NE(section, std::string::npos) << r.summary;
  EXPECT_TRUE(contains(r.summary.substr(section), "| compiler version |")) << r.summary;
  EXPECT_TRUE(contains(r.summary.substr(section), " indexed configurations.")) << r.summary;

  inputs["cache-repo"] = "acme/no-such-cache";
  ActionRun missing = run(inputs);
  EXPECT_EQ(missing.code, 0) << missing.out;
  EXPECT_TRUE(contains(missing.summary, "Warning: could not measure")) << missing.summary;

  inputs.erase("store-usage");
  EXPECT_FALSE(contains(run(inputs).summary, "Cache store usage"));
}

// Mode gc, for a scheduled workflow: a dry run lists the folder nothing references and removes
// nothing; the grace keeps what was just written; a fork's pull request cannot apply; gc-apply
// removes exactly that folder in one commit and the configurations stay; gc inputs belong to
// mode gc alone.
TEST_F(GithubActionTest, GcModeCleansTheStoreOnlyWhenAsked) {
  ASSERT_EQ(main_push("cache").code, 0);
  const std::string repo = "acme/neuron-cache";  // examples/neuron-cache.yaml's cache_repo
  hub::ClientOptions options;
  options.endpoint = endpoint;
  options.token = kToken;
  hub::HubClient client(options);
  std::string compiler_dir;
  std::set<std::string> folders;
  auto list_folders = [&] {
    std::set<std::string> out;
    for (const auto& entry : client.list_tree(repo)) {
      size_t at = entry.path.find("/MODULE_");
      if (!entry.path.starts_with("neuronxcc-") || at == std::string::npos) continue;
      compiler_dir = entry.path.substr(0, entry.path.find('/'));
      out.insert(entry.path.substr(0, entry.path.find('/', at + 1)));
    }
    return out;
  };
  folders = list_folders();
  ASSERT_FALSE(folders.empty());
  // What `neuron-cache run` pushes: a MODULE folder no index entry names.
  const std::string orphan = compiler_dir + "/MODULE_9999+e30acd3a";
  write_file(work / "orphan.neff", "an orphan");
  client.commit(repo,
                {{hub::CommitOperation::Kind::Add, orphan + "/model.neff", work / "orphan.neff"}},
                "an unindexed push", std::nullopt);
  std::map<std::string, std::string> gc = {
      {"manifest", "neuron-cache.yaml"}, {"mode", "gc"}, {"token", kToken}};

  ActionRun young = run(gc);
  ASSERT_EQ(young.code, 0) << young.out << young.err;
  EXPECT_TRUE(young.report["removed_modules"].empty()) << young.report_text;
  EXPECT_TRUE(contains(young.summary, "written within the grace period")) << young.summary;

  gc["gc-grace"] = "0s";
  server.clear_log();
  ActionRun dry = run(gc);
  ASSERT_EQ(dry.code, 0) << dry.out << dry.err;
  ASSERT_EQ(dry.report["removed_modules"].size(), 1u) << dry.report_text;
  EXPECT_EQ(dry.report["removed_modules"][0]["path"], orphan);
  EXPECT_EQ(dry.report["applied"], false);
  EXPECT_TRUE(contains(dry.summary, "### neuron-cache gc")) << dry.summary;
  EXPECT_TRUE(contains(dry.summary, "Would remove (dry run) 1 MODULE folders")) << dry.summary;
  EXPECT_TRUE(contains(dry.out, "::notice title=neuron-cache::gc dry run: would remove 1"))
      << dry.out;
  EXPECT_EQ(testing::count_requests(server.access_log(), is_commit), 0u);
  // The token only in the mask command, as in every mode.
  EXPECT_EQ(occurrences(dry.out, kToken), 1u) << dry.out;
  EXPECT_TRUE(contains(dry.out, std::string("::add-mask::") + kToken));
  EXPECT_FALSE(contains(dry.err + dry.summary + dry.report_text, kToken));

  gc["gc-apply"] = "true";
  json payload = pull_request({{"full_name", "mallory/neuron-app"}, {"fork", true}}, "acme/app");
  ActionRun fork = run(gc, {{"GITHUB_EVENT_NAME", "pull_request"},
                            {"GITHUB_EVENT_PATH", event_file(payload).string()}});
  EXPECT_EQ(fork.code, 2) << fork.out;
  EXPECT_TRUE(contains(fork.out, "read-only")) << fork.out;
  EXPECT_EQ(testing::count_requests(server.access_log(), is_commit), 0u);

  ActionRun applied = run(gc);
  ASSERT_EQ(applied.code, 0) << applied.out << applied.err;
  EXPECT_EQ(applied.report["applied"], true);
  EXPECT_TRUE(contains(applied.summary, "Removed 1 MODULE folders")) << applied.summary;
  EXPECT_TRUE(contains(applied.summary, "input gc-squash")) << applied.summary;
  EXPECT_EQ(testing::count_requests(server.access_log(), is_commit), 1u);
  EXPECT_EQ(list_folders(), folders);  // the orphan went, every configuration's folder stayed

  ActionRun wrong =
      run({{"manifest", "neuron-cache.yaml"}, {"mode", "plan"}, {"gc-apply", "true"}});
  EXPECT_EQ(wrong.code, 2);
  EXPECT_TRUE(contains(wrong.out, "are for mode gc")) << wrong.out;
  ActionRun squash_alone =
      run({{"manifest", "neuron-cache.yaml"}, {"mode", "gc"}, {"gc-squash", "true"}});
  EXPECT_EQ(squash_alone.code, 2);
  EXPECT_TRUE(contains(squash_alone.out, "set gc-apply too")) << squash_alone.out;
  for (const char* fetching : {"locked", "fail-on-miss"}) {
    ActionRun refused =
        run({{"manifest", "neuron-cache.yaml"}, {"mode", "gc"}, {fetching, "true"}});
    EXPECT_EQ(refused.code, 2) << fetching;
    EXPECT_TRUE(contains(refused.out, "mode gc cleans the cache store")) << refused.out;
  }
  EXPECT_EQ(testing::count_requests(server.access_log(), is_commit), 1u);  // the apply's only
}

// A store's error text carries workflow commands, after a newline and in the legacy form inside a
// line: the Action prints it (a progress line, a warning) where the runner obeys none of them.
TEST_F(GithubActionTest, WorkflowCommandsInAStoreAnswerAreNeverObeyed) {
  const std::string forged =
      "denied\n::error title=X::forged\n::add-mask::hf_forged ##[add-mask]hf_legacy";
  server.set_faults(json::array({{{"match", {{"path_contains", "/api/models/acme/neuron-cache"}}},
                                  {"count", -1},
                                  {"action", "status"},
                                  {"status", 403},
                                  {"message", ""},
                                  {"body", {{"error", forged}}}}}));
  ActionRun r = run({{"manifest", "neuron-cache.yaml"}, {"mode", "plan"}});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "the Hub cache could not be read")) << r.out;
  EXPECT_TRUE(contains(r.out, "hf_legacy")) << "the text is shown: " << r.out;
  // Only the Action's own commands; the forged text is in their (escaped) data at most.
  const std::vector<std::string> ours = {
      "::group::", "::endgroup::", "::stop-commands::", "::notice title=neuron-cache::",
      "::warning title=neuron-cache::"};
  for (const auto& command : obeyed_commands(r.out)) {
    EXPECT_TRUE(std::any_of(ours.begin(), ours.end(),
                            [&](const std::string& own) { return command.starts_with(own); }))
        << "the runner would obey: " << command << "\nin\n"
        << r.out;
  }
}

// `configs` takes names separated by newlines or commas.
// locked: exactly the lockfile's files, no index read; a manifest changed since fails (exit 2).
TEST_F(GithubActionTest, LockedFetchesTheLockfilesFilesOnly) {
  ASSERT_EQ(main_push("cache").code, 0);
  std::string lock_command = std::string(NEURON_CACHE_TOOL) + " lock neuron-cache.yaml";
  ActionRun locked = run({}, {{"HF_TOKEN", kToken}}, lock_command);
  ASSERT_EQ(locked.code, 0) << locked.out << locked.err;
  ASSERT_TRUE(fs::exists(work / "neuron-cache.lock"));
  server.clear_log();
  ActionRun r = run({{"manifest", "neuron-cache.yaml"},
                     {"mode", "prefetch"},
                     {"token", kToken},
                     {"locked", "true"},
                     {"cache-dir", (work / "locked-machine").string()}});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.outputs["hits"], "5");
  EXPECT_EQ(r.outputs["compiled"], "0");
  for (const auto& request : server.access_log()) {
    std::string path = request["path"];
    EXPECT_FALSE(contains(path, "neuron-cache-index") || contains(path, "/tree/")) << path;
  }
  write_file(work / "neuron-cache.yaml", read_file(work / "neuron-cache.yaml") + "# edited\n");
  ActionRun changed = run({{"manifest", "neuron-cache.yaml"},
                           {"mode", "prefetch"},
                           {"locked", "true"},
                           {"cache-dir", (work / "other-machine").string()}});
  EXPECT_EQ(changed.code, 2) << changed.out << changed.err;
  EXPECT_TRUE(contains(changed.out + changed.err, "neuron-cache lock")) << changed.out;
}

TEST_F(GithubActionTest, ConfigsSelectsConfigurations) {
  ActionRun r = run({{"manifest", "neuron-cache.yaml"},
                     {"mode", "plan"},
                     {"configs", "llama3-8b-chat,\n  mistral-7b-inf2\n"}});
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.outputs["misses"], "2");
  EXPECT_EQ(json::parse(r.outputs["missing"]), json::array({"llama3-8b-chat", "mistral-7b-inf2"}));
}

// The composite action as the runner executes it: each step's `run` under bash with its `env:`
// evaluated (inputs given or their defaults, the build step's output).
class CompositeAction {
 public:
  explicit CompositeAction(const fs::path& file) : yaml_(YAML::LoadFile(file.string())) {}
  const YAML::Node& yaml() const { return yaml_; }
  YAML::Node step(const std::string& id) const {
    for (const auto& s : yaml_["runs"]["steps"]) {
      if (s["id"] && s["id"].as<std::string>() == id) return s;
    }
    return {};
  }
  // ${{ inputs.X }} and ${{ steps.build.outputs.path }} replaced by their values.
  std::string evaluate(const std::string& expression,
                       const std::map<std::string, std::string>& inputs,
                       const std::string& built) const {
    const std::string prefix = "${{ inputs.", suffix = " }}";
    if (expression.starts_with(prefix) && expression.ends_with(suffix)) {
      std::string name =
          expression.substr(prefix.size(), expression.size() - prefix.size() - suffix.size());
      auto given = inputs.find(name);
      if (given != inputs.end()) return given->second;
      YAML::Node declared = yaml_["inputs"][name];
      return declared["default"] ? declared["default"].as<std::string>() : "";
    }
    if (expression == "${{ steps.build.outputs.path }}") return built;
    const std::string action_path = "${{ github.action_path }}";
    if (expression.starts_with(action_path))
      return (repo_root() / "github-action").string() + expression.substr(action_path.size());
    return expression;
  }

 private:
  YAML::Node yaml_;
};

// (6) action.yml: composite; every input used, and mapped to the INPUT_ variable the binary reads;
// every output is the run step's, and the binary writes exactly those; the steps run as written.
TEST_F(GithubActionTest, ActionYmlMapsEveryInputAndOutput) {
  CompositeAction action(repo_root() / "github-action/action.yml");
  const YAML::Node& yaml = action.yaml();
  ASSERT_EQ(yaml["runs"]["using"].as<std::string>(), "composite");
  ASSERT_TRUE(yaml["inputs"]["manifest"]["required"].as<bool>());

  std::string listed;
  ASSERT_EQ(testing::run_command(std::string(NEURON_CACHE_ACTION) + " --list-inputs", &listed), 0);
  std::set<std::string> read_by_binary;
  std::istringstream lines(listed);
  for (std::string name; std::getline(lines, name);) read_by_binary.insert(name);

  std::string steps_text;
  for (const auto& s : yaml["runs"]["steps"]) {
    steps_text += YAML::Dump(s) + "\n";
    if (s["uses"]) {  // the binary kept under the key step's key, restored and saved apart
      std::string uses = s["uses"].as<std::string>();
      EXPECT_TRUE(uses.starts_with("actions/cache/restore@") ||
                  uses.starts_with("actions/cache/save@"))
          << YAML::Dump(s);
      EXPECT_EQ(s["with"]["path"].as<std::string>(), "${{ steps.key.outputs.dir }}");
      std::string key = s["with"]["key"].as<std::string>();
      for (const char* part : {"${{ runner.os }}", "${{ runner.arch }}", "steps.key.outputs.key"})
        EXPECT_TRUE(contains(key, part)) << key;
      EXPECT_TRUE(s["if"].as<std::string>().starts_with("inputs.binary == ''")) << YAML::Dump(s);
      continue;
    }
    EXPECT_EQ(s["shell"].as<std::string>(), "bash");
  }
  std::set<std::string> declared;
  for (const auto& input : yaml["inputs"]) {
    std::string name = input.first.as<std::string>();
    declared.insert(name);
    EXPECT_TRUE(input.second["description"]) << name;
    EXPECT_TRUE(contains(steps_text, "${{ inputs." + name + " }}")) << name << " is never used";
  }
  std::set<std::string> expected = read_by_binary;
  // The setup step's own.
  for (const char* own : {"binary", "build-from-source", "release-url"}) expected.insert(own);
  EXPECT_EQ(declared, expected);

  YAML::Node run_step = action.step("run");
  ASSERT_TRUE(run_step);
  std::set<std::string> mapped;
  for (const auto& variable : run_step["env"]) {
    std::string name = variable.first.as<std::string>();
    if (!name.starts_with("INPUT_")) continue;
    mapped.insert(name);
  }
  std::set<std::string> wanted;
  for (const auto& name : read_by_binary) {
    wanted.insert(input_variable(name));
    YAML::Node value = run_step["env"][input_variable(name)];
    EXPECT_TRUE(value && value.as<std::string>() == "${{ inputs." + name + " }}")
        << input_variable(name) << " must be ${{ inputs." << name << " }}";
  }
  EXPECT_EQ(mapped, wanted);

  std::set<std::string> outputs;
  for (const auto& output : yaml["outputs"]) {
    std::string name = output.first.as<std::string>();
    outputs.insert(name);
    EXPECT_TRUE(output.second["description"]) << name;
    EXPECT_EQ(output.second["value"].as<std::string>(), "${{ steps.run.outputs." + name + " }}");
  }

  // The key step names the folder the build step fills.
  YAML::Node key_step = action.step("key");
  ASSERT_TRUE(key_step);
  fs::path key_script = work / "key.sh";
  write_file(key_script, key_step["run"].as<std::string>());
  std::map<std::string, std::string> key_env = {{"NEURON_CACHE_ACTION_CACHE", "/tool-cache"}};
  for (const auto& variable : key_step["env"])
    key_env[variable.first.as<std::string>()] =
        action.evaluate(variable.second.as<std::string>(), {}, "");
  ActionRun keyed = run({}, key_env, "/bin/bash -eo pipefail " + quoted(key_script));
  ASSERT_EQ(keyed.code, 0) << keyed.out << keyed.err;
  EXPECT_EQ(keyed.outputs["key"].size(), 16u) << keyed.output_file;
  EXPECT_EQ(keyed.outputs["dir"], "/tool-cache/" + keyed.outputs["key"]);

  // The build step with `binary` given, then the run step, as the runner would run them.
  std::map<std::string, std::string> inputs = {
      {"manifest", "neuron-cache.yaml"}, {"mode", "plan"}, {"binary", NEURON_CACHE_ACTION}};
  std::map<std::string, std::string> built;
  for (const char* id : {"build", "run"}) {
    YAML::Node s = action.step(id);
    ASSERT_TRUE(s) << id;
    fs::path script = work / (std::string(id) + ".sh");
    write_file(script, s["run"].as<std::string>());
    ASSERT_EQ(testing::run_command("bash -n " + quoted(script.string())), 0) << id;
    std::map<std::string, std::string> env;
    for (const auto& variable : s["env"]) {
      env[variable.first.as<std::string>()] =
          action.evaluate(variable.second.as<std::string>(), inputs, built["path"]);
    }
    ActionRun r = run({}, env, "/bin/bash --noprofile --norc -eo pipefail " + quoted(script));
    ASSERT_EQ(r.code, 0) << id << "\n" << r.out << r.err;
    if (std::string(id) == "build") {
      built = r.outputs;
      EXPECT_EQ(built["path"], NEURON_CACHE_ACTION);
      continue;
    }
    // Every output once, and no other.
    std::set<std::string> written(r.output_names.begin(), r.output_names.end());
    EXPECT_EQ(written, outputs);
    EXPECT_EQ(written.size(), r.output_names.size());
    EXPECT_EQ(r.report["action"]["mode"], "plan");
    EXPECT_EQ(r.report["action"]["strict"], false);  // the defaults were accepted
  }
}

// The build step keeps what it built under a key of the action's sources, OS and architecture:
// the next job with the same key installs and builds nothing, a changed source is a new key, and
// a runner it cannot serve gets a clear error before anything is installed.
TEST_F(GithubActionTest, BuildStepReusesTheBinaryOfTheSameSourcesOnly) {
  fs::path src = work / "action-src", cache = work / "tool-cache";
  for (const char* dir : {"core", "github-action", "cmake-module"})
    fs::create_directories(src / dir);
  write_file(src / "CMakeLists.txt", "project(neuron_cache VERSION 0.1.0)\n");
  write_file(src / "core/a.cpp", "int a;\n");
  fs::copy_file(repo_root() / "github-action/build-action.sh",
                src / "github-action/build-action.sh");
  // apt-get, sudo and cmake leave a mark: a reused build must call none of them.
  fs::path marks = work / "tool-calls";
  for (const char* tool : {"apt-get", "sudo", "cmake"}) {
    write_file(work / "bin" / tool, std::string("#!/bin/sh\necho ") + tool + " >> " +
                                        quoted(marks.string()) + "\nexit 1\n");
    fs::permissions(work / "bin" / tool, fs::perms::owner_all);
  }
  std::string script = "bash " + quoted((src / "github-action/build-action.sh").string());
  std::map<std::string, std::string> env = {{"NEURON_CACHE_SOURCE", src.string()},
                                            {"NEURON_CACHE_ACTION_CACHE", cache.string()}};
  ActionRun key_run = run({}, env, script + " --print-key");
  ASSERT_EQ(key_run.code, 0) << key_run.out << key_run.err;
  std::string key = key_run.out.substr(0, key_run.out.find('\n'));
  ASSERT_EQ(key.size(), 16u) << key_run.out;

  fs::create_directories(cache / key);
  write_file(cache / key / "neuron-cache-action", "#!/bin/sh\n");
  fs::permissions(cache / key / "neuron-cache-action", fs::perms::owner_all);
  ActionRun reused = run({}, env, script);
  ASSERT_EQ(reused.code, 0) << reused.out << reused.err;
  EXPECT_EQ(reused.outputs["path"], (cache / key / "neuron-cache-action").string());
  EXPECT_FALSE(fs::exists(marks)) << read_file(marks);
  EXPECT_TRUE(contains(reused.out, "using the build in")) << reused.out;

  write_file(src / "core/a.cpp", "int a = 1;\n");  // an upgraded action
  ActionRun changed = run({}, env, script + " --print-key");
  ASSERT_EQ(changed.code, 0);
  EXPECT_NE(changed.out.substr(0, changed.out.find('\n')), key);
  ActionRun rebuilt = run({}, env, script);
  EXPECT_NE(rebuilt.code, 0) << "the fake cmake fails the new build";
  EXPECT_TRUE(fs::exists(marks)) << "a changed source must build again";

  // A release without the library versions the build needs: said before anything is installed.
  write_file(work / "os-release", "ID=ubuntu\nVERSION_ID=\"22.04\"\n");
  env["NEURON_CACHE_OS_RELEASE"] = (work / "os-release").string();
  fs::remove(marks);
  ActionRun old_release = run({}, env, script);
  EXPECT_EQ(old_release.code, 2);
  EXPECT_TRUE(contains(old_release.out,
                       "needs nlohmann-json 3.11 and g++ 12 or newer: Ubuntu "
                       "24.04 or Debian 12 and later have them, this runner is "
                       "ubuntu 22.04. Use runs-on: ubuntu-24.04"))
      << old_release.out;
  EXPECT_FALSE(fs::exists(marks)) << "nothing is installed on a release the build cannot use";
  env.erase("NEURON_CACHE_OS_RELEASE");

  fs::remove(marks);
  env["RUNNER_OS"] = "macOS";
  ActionRun mac = run({}, env, script);
  EXPECT_EQ(mac.code, 2);
  EXPECT_TRUE(contains(mac.out,
                       "::error title=neuron-cache::neuron-cache-action runs on Linux "
                       "runners only (this one: macOS"))
      << mac.out;
  EXPECT_FALSE(fs::exists(marks)) << "nothing is installed on a runner the action cannot serve";
}

// The example workflow parses and splits the work as runners allow: a hosted job prefetches
// read-only on every event (no token for forks, a gate on misses when asked); a self-hosted Neuron
// job compiles and pushes on main with HF_TOKEN after checking the compiler is there. Every input
// it gives is one the action declares.
TEST_F(GithubActionTest, ExampleWorkflowUsesTheAction) {
  YAML::Node action = YAML::LoadFile((repo_root() / "github-action/action.yml").string());
  YAML::Node workflow = YAML::LoadFile((repo_root() / "examples/github/neuron-cache.yml").string());
  ASSERT_TRUE(workflow["on"]["pull_request"]);
  EXPECT_EQ(workflow["on"]["push"]["branches"][0].as<std::string>(), "main");
  std::map<std::string, YAML::Node> by_mode;
  std::map<std::string, std::string> job_of;
  for (const auto& job : workflow["jobs"]) {
    for (const auto& s : job.second["steps"]) {
      if (!s["uses"] || !contains(s["uses"].as<std::string>(), "github-action")) continue;
      for (const auto& with : s["with"])
        EXPECT_TRUE(action["inputs"][with.first.as<std::string>()]) << with.first.as<std::string>();
      std::string mode = s["with"]["mode"].as<std::string>();
      by_mode.emplace(mode, static_cast<const YAML::Node&>(s));
      job_of[mode] = job.first.as<std::string>();
    }
  }
  ASSERT_TRUE(by_mode.count("prefetch"));
  ASSERT_TRUE(by_mode.count("all"));
  YAML::Node hosted = workflow["jobs"][job_of["prefetch"]];
  YAML::Node neuron = workflow["jobs"][job_of["all"]];
  EXPECT_NE(job_of["prefetch"], job_of["all"]) << "a hosted runner cannot compile";
  EXPECT_TRUE(contains(hosted["runs-on"].as<std::string>(), "ubuntu"));
  EXPECT_FALSE(hosted["if"]) << "the hosted job runs on every event";
  YAML::Node pr = by_mode["prefetch"], main = by_mode["all"];
  EXPECT_EQ(pr["with"]["read-only"].as<std::string>(), "true");
  EXPECT_TRUE(contains(pr["with"]["token"].as<std::string>(), "head.repo.full_name"));
  EXPECT_TRUE(contains(pr["with"]["fail-on-miss"].as<std::string>(), "NEURON_CACHE_FAIL_ON_MISS"));
  EXPECT_TRUE(contains(neuron["if"].as<std::string>(), "push"));
  std::string labels = YAML::Dump(neuron["runs-on"]);
  EXPECT_TRUE(contains(labels, "self-hosted") && contains(labels, "neuron")) << labels;
  EXPECT_TRUE(contains(YAML::Dump(neuron["steps"]), "command -v optimum-cli"))
      << "the compile job checks the toolchain its manifest's command needs";
  EXPECT_EQ(main["with"]["token"].as<std::string>(), "${{ secrets.HF_TOKEN }}");
}

// The scheduled gc example: only inputs action.yml has, mode gc, a dry run unless scheduled or
// asked, no squash by default, the write token.
TEST_F(GithubActionTest, ExampleGcWorkflowUsesTheAction) {
  YAML::Node action = YAML::LoadFile((repo_root() / "github-action/action.yml").string());
  YAML::Node workflow =
      YAML::LoadFile((repo_root() / "examples/github/neuron-cache-gc.yml").string());
  ASSERT_TRUE(workflow["on"]["schedule"]);
  ASSERT_TRUE(workflow["on"]["workflow_dispatch"]);
  size_t steps = 0;
  for (const auto& job : workflow["jobs"]) {
    for (const auto& s : job.second["steps"]) {
      if (!s["uses"] || !contains(s["uses"].as<std::string>(), "github-action")) continue;
      ++steps;
      for (const auto& with : s["with"])
        EXPECT_TRUE(action["inputs"][with.first.as<std::string>()]) << with.first.as<std::string>();
      EXPECT_EQ(s["with"]["mode"].as<std::string>(), "gc");
      EXPECT_TRUE(contains(s["with"]["gc-apply"].as<std::string>(), "schedule"));
      EXPECT_EQ(s["with"]["gc-squash"].as<std::string>(), "false");
      EXPECT_EQ(s["with"]["token"].as<std::string>(), "${{ secrets.HF_TOKEN }}");
    }
  }
  EXPECT_EQ(steps, 1u);
}

// fail-on-miss: the outputs are written, then exit 3 names what no cache has; with everything
// cached it passes; a mode that compiles refuses it as an input error.
TEST_F(GithubActionTest, FailOnMissGatesARunnerThatCannotCompile) {
  std::map<std::string, std::string> inputs = {{"manifest", "neuron-cache.yaml"},
                                               {"mode", "prefetch"},
                                               {"configs", "llama3-8b-chat"},
                                               {"fail-on-miss", "true"}};
  ActionRun gate = run(inputs);
  EXPECT_EQ(gate.code, 3) << gate.out << gate.err;
  EXPECT_TRUE(contains(gate.out,
                       "::error title=neuron-cache::fail-on-miss: 1 configuration is "
                       "not cached (llama3-8b-chat)"))
      << gate.out;
  EXPECT_EQ(gate.outputs["cache-hit"], "false");
  EXPECT_TRUE(contains(gate.out, "::notice title=neuron-cache::1 configuration: 0 hits (0 local, "))
      << gate.out;
  EXPECT_TRUE(contains(gate.out, "), 1 miss, 0 compiled")) << gate.out;
  EXPECT_EQ(gate.report["action"]["fail_on_miss"], true);
  inputs["mode"] = "all";
  ActionRun refused = run(inputs);
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_TRUE(contains(refused.out, "fail-on-miss is for the plan and prefetch modes"));
  inputs.erase("fail-on-miss");
  ASSERT_EQ(run(inputs).code, 0);  // compiles llama3-8b-chat into the default cache
  inputs["mode"] = "prefetch";
  inputs["fail-on-miss"] = "true";
  ActionRun passes = run(inputs);
  EXPECT_EQ(passes.code, 0) << passes.out;
}

}  // namespace
}  // namespace neuron_cache
