// Issue 22, "No debug log": --verbose, NEURON_CACHE_LOG=debug and a GitHub debug re-run
// (RUNNER_DEBUG=1) log each request (method, URL, status, bytes, time) and each decision (why a
// configuration is a hit, a miss, compiled, pushed or not), never a secret.

#include "neuron_cache/format/url.h"
#include "pipeline_cli_fixture.h"

namespace neuron_cache {
namespace {

constexpr const char* kDebug = "neuron-cache: debug: ";

// The debug lines of `text` whose topic is `topic` ("http", "decide", "folder").
std::vector<std::string> debug_lines(const std::string& text, const std::string& topic) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(kDebug) && contains(line, "s " + topic + ": ")) out.push_back(line);
  }
  return out;
}

bool any_line(const std::vector<std::string>& lines, const std::vector<std::string>& parts) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& line) {
    return std::all_of(parts.begin(), parts.end(),
                       [&](const std::string& part) { return contains(line, part); });
  });
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) out += line + "\n";
  return out;
}

class DebugLogCliTest : public PipelineCliTest {
 protected:
  // A manifest whose first configuration is on the Hub (pushed by a first run) and whose
  // second is not.
  fs::path hit_and_miss() {
    ManifestSpec spec;
    spec.confs = {{"llama-bs1", 1, 128}};
    fs::path manifest = write_manifest(spec);
    ToolResult first = tool("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"));
    EXPECT_EQ(first.code, 0) << first.all();
    spec.confs.push_back({"llama-bs2", 2, 128});
    return write_manifest(spec);
  }
};

// Every request the Hub server saw has its line (method, path, status, bytes, time), and every
// configuration its decision with its key and reason.
TEST_F(DebugLogCliTest, VerboseLogsEveryRequestAndEveryDecision) {
  fs::path manifest = hit_and_miss();
  std::map<std::string, std::string> keys = keys_of(plan_json(manifest));
  server.clear_log();
  ToolResult ci = tool("ci --verbose " + quoted(manifest) + " --output-dir " + quoted(work / "o2"),
                       "", work / "fresh-cache");
  ASSERT_EQ(ci.code, 0) << ci.all();
  std::vector<std::string> http = debug_lines(ci.err, "http");
  json log = server.access_log();
  ASSERT_GT(log.size(), 3u);
  EXPECT_EQ(http.size(), log.size()) << joined(http);
  for (const auto& request : log) {
    std::string path = request["path"].get<std::string>();
    EXPECT_TRUE(any_line(
        http, {" " + request["method"].get<std::string>() + " http://127.0.0.1:", path,
               "-> " + std::to_string(request["status"].get<int>()), " down, ", " up, ", " ms"}))
        << request.dump() << "\n"
        << joined(http);
  }
  std::vector<std::string> decisions = debug_lines(ci.err, "decide");
  EXPECT_TRUE(
      any_line(decisions, {"cache store " + std::string(kRepo) + " on the Hub (from the manifest"}))
      << ci.err;
  EXPECT_TRUE(any_line(decisions, {"llama-bs1 [key " + keys["llama-bs1"], "]: store: "}))
      << joined(decisions);
  EXPECT_TRUE(any_line(decisions, {"llama-bs2 [key " + keys["llama-bs2"], "]: compile: "}))
      << joined(decisions);
  EXPECT_TRUE(any_line(decisions, {"llama-bs2: compiling (no cached entry)"})) << ci.err;
  EXPECT_TRUE(any_line(decisions, {"llama-bs2: the compile command ended (exit 0"})) << ci.err;
  EXPECT_TRUE(any_line(decisions, {"push: llama-bs2 is offered to " + std::string(kRepo)}))
      << joined(decisions);
  EXPECT_TRUE(any_line(decisions, {"push: llama-bs1 is on " + std::string(kRepo) + " already"}))
      << joined(decisions);
  EXPECT_FALSE(contains(ci.all(), token)) << "the token is never logged";
  EXPECT_FALSE(contains(ci.all(), "Authorization")) << "no header is logged";
}

// The environment knob and GitHub's debug re-run turn it on; without them, or with another
// level, nothing is logged; an unknown level is named.
TEST_F(DebugLogCliTest, TheEnvironmentTurnsItOnAndOnlyDebugDoes) {
  ManifestSpec spec;
  spec.confs = {{"llama-bs1", 1, 128}};
  fs::path manifest = write_manifest(spec);
  for (const std::string env :
       {"NEURON_CACHE_LOG=debug", "NEURON_CACHE_LOG=DEBUG", "RUNNER_DEBUG=1"}) {
    ToolResult plan = tool("plan " + quoted(manifest), env);
    EXPECT_EQ(plan.code, 0) << plan.all();
    EXPECT_FALSE(debug_lines(plan.err, "http").empty()) << env << ": " << plan.err;
    EXPECT_FALSE(debug_lines(plan.err, "decide").empty()) << env << ": " << plan.err;
  }
  for (const std::string env : {"", "NEURON_CACHE_LOG=info", "RUNNER_DEBUG=0"}) {
    ToolResult plan = tool("plan " + quoted(manifest), env);
    EXPECT_FALSE(contains(plan.err, kDebug)) << env << ": " << plan.err;
  }
  ToolResult odd = tool("plan " + quoted(manifest), "NEURON_CACHE_LOG=verbose");
  EXPECT_EQ(odd.code, 0) << odd.all();
  EXPECT_TRUE(contains(odd.err, "NEURON_CACHE_LOG=verbose is not a level neuron-cache knows"))
      << odd.err;
  EXPECT_FALSE(contains(odd.err, kDebug)) << odd.err;
  ToolResult shown = tool("config show --json", "NEURON_CACHE_LOG=debug");
  ASSERT_EQ(shown.code, 0) << shown.all();
  json config = json::parse(shown.out);
  EXPECT_EQ(config["debug_log"]["value"], true) << shown.out;
  EXPECT_EQ(config["debug_log"]["origin"], "NEURON_CACHE_LOG") << shown.out;
}

// --json keeps stdout a JSON document: the log goes to stderr.
TEST_F(DebugLogCliTest, TheLogNeverMixesWithJsonOnStdout) {
  ManifestSpec spec;
  spec.confs = {{"llama-bs1", 1, 128}};
  ToolResult plan = tool("plan --json -v " + quoted(write_manifest(spec)));
  ASSERT_EQ(plan.code, 0) << plan.all();
  EXPECT_NO_THROW(json::parse(plan.out)) << plan.out;
  EXPECT_FALSE(debug_lines(plan.err, "decide").empty()) << plan.err;
}

// A shared folder logs each of its operations as the Hub logs its requests.
TEST_F(DebugLogCliTest, AFolderStoreLogsItsOperations) {
  fs::path store = work / "shared-store";
  std::string url = "file://" + store.string();
  ASSERT_EQ(tool("create -n " + url).code, 0);
  ManifestSpec spec;
  spec.cache_repo = url;
  spec.confs = {{"llama-bs1", 1, 128}};
  fs::path manifest = write_manifest(spec);
  ToolResult ci = tool("ci -v " + quoted(manifest) + " --output-dir " + quoted(work / "out"));
  ASSERT_EQ(ci.code, 0) << ci.all();
  std::vector<std::string> folder = debug_lines(ci.err, "folder");
  EXPECT_TRUE(any_line(folder, {"write " + url + "/" + kCompiler + "/MODULE_", "-> done", " ms"}))
      << joined(folder);
  ToolResult again = tool("prefetch -v " + quoted(manifest), "", work / "second-cache");
  ASSERT_EQ(again.code, 0) << again.all();
  folder = debug_lines(again.err, "folder");
  EXPECT_TRUE(any_line(
      folder, {"copy " + url + "/" + kCompiler + "/MODULE_", "/model.neff -> ", "B, ", " ms"}))
      << joined(folder);
  EXPECT_TRUE(any_line(folder, {"copy " + url + "/neuron-cache-index/"})) << joined(folder);
}

// Presigned URLs (S3's, a CDN's) carry their credentials in the query: a log keeps the names,
// masks the values, and drops userinfo and fragments.
TEST(LoggableUrl, MasksEveryQueryValueNotKnownToBeHarmless) {
  EXPECT_EQ(url::loggable("https://bucket.s3.amazonaws.com/a/b?X-Amz-Algorithm=AWS4-HMAC-SHA256&"
                          "X-Amz-Credential=AKIAEXAMPLE%2F20261203&X-Amz-Signature=abcdef&"
                          "X-Amz-Security-Token=FwoGZX&partNumber=3&uploadId=u1"),
            "https://bucket.s3.amazonaws.com/a/b?X-Amz-Algorithm=***&X-Amz-Credential=***&"
            "X-Amz-Signature=***&X-Amz-Security-Token=***&partNumber=3&uploadId=u1");
  EXPECT_EQ(url::loggable("https://cdn.example/f?Expires=1&Policy=p&Signature=s&Key-Pair-Id=k"),
            "https://cdn.example/f?Expires=***&Policy=***&Signature=***&Key-Pair-Id=***");
  EXPECT_EQ(url::loggable("http://127.0.0.1:9/api/models/a/b/tree/main/x?recursive=1&expand=0"),
            "http://127.0.0.1:9/api/models/a/b/tree/main/x?recursive=1&expand=0");
  EXPECT_EQ(url::loggable("https://user:secret@host/p?token=t#frag"), "https://host/p?token=***");
  EXPECT_EQ(url::loggable("https://host/p?flag"), "https://host/p?flag");
}

}  // namespace
}  // namespace neuron_cache
