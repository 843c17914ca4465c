// Transfer progress as a user sees it (issue 22): the real tool against the local Hub server,
// through a pipe (plain lines) and a pseudo-terminal (`script`: a bar redrawn with \r), with the
// line interval shortened through NEURON_CACHE_PROGRESS_INTERVAL_MS so a transfer of tens of MiB
// shows its lines.
#include <regex>

#include "pipeline_cli_fixture.h"

namespace neuron_cache {
namespace {

constexpr uint64_t kNeffBytes = 40ull << 20;
const std::string kBigNeffs = "STAND_IN_NEFF_BYTES=" + std::to_string(kNeffBytes) +
                              " STAND_IN_TKG_NEFF_BYTES=" + std::to_string(kNeffBytes) +
                              " NEURON_CACHE_PROGRESS_INTERVAL_MS=5";

class ProgressCliTest : public PipelineCliTest {
 protected:
  // The tool's stdout and stderr as one stream, read through `wrap`'s pipe or terminal.
  std::string output_of(const std::string& args, const std::string& extra_env,
                        const fs::path& cache_dir, bool on_a_terminal) {
    testing::ToolRunner runner(work.path(), home.path(), endpoint, cache);
    std::string command = runner.command(args, extra_env, cache_dir);
    std::string line = on_a_terminal ? "script -qfec " + shell_quote(command) + " /dev/null"
                                     : "(" + command + ") 2>&1 | cat";
    std::string output;
    EXPECT_EQ(testing::run_command(line, &output), 0) << output;
    return output;
  }
  static std::string shell_quote(const std::string& text) {
    std::string quoted = "'";
    for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return quoted + "'";
  }
  // The MiB a "<label> done: X MiB" final line reports, or -1 without one.
  static double done_mib(const std::string& output, const std::string& label) {
    std::smatch match;
    std::regex final_line(label + R"( done: ([0-9.]+) MiB, [0-9]+ files? in )");
    return std::regex_search(output, match, final_line) ? std::stod(match[1]) : -1;
  }
  // The Hub holds one configuration with two NEFFs of kNeffBytes: what `ci` pushed.
  fs::path pushed_manifest(std::string* ci_output) {
    ManifestSpec spec;
    spec.confs = {{"big", 1, 4096}};
    fs::path manifest = write_manifest(spec);
    *ci_output = output_of("ci " + quoted(manifest) + " --output-dir " + quoted(work / "out"),
                           kBigNeffs, {}, false);
    return manifest;
  }
};

TEST_F(ProgressCliTest, APipeGetsPlainLinesWithBytesRateAndAFinalLineCountingLfsBytes) {
  std::string ci;
  fs::path manifest = pushed_manifest(&ci);
  EXPECT_NE(ci.find("Uploading: "), std::string::npos) << ci;
  EXPECT_GE(done_mib(ci, "Uploading"), 2.0 * kNeffBytes / (1 << 20))
      << "the LFS uploads are counted: " << ci;
  EXPECT_EQ(ci.find('\r'), std::string::npos) << "no terminal control in a log";

  std::string prefetch =
      output_of("prefetch " + quoted(manifest), kBigNeffs, work / "fresh", false);
  std::regex progress_line(R"(Downloading: [0-9.]+ (B|KiB|MiB) of [0-9.]+ MiB \([0-9]+%\), )"
                           R"([0-9]+ of [0-9]+ files, [0-9.]+ (B|KiB|MiB|GiB)/s)");
  EXPECT_TRUE(std::regex_search(prefetch, progress_line)) << prefetch;
  EXPECT_GE(done_mib(prefetch, "Downloading"), 2.0 * kNeffBytes / (1 << 20)) << prefetch;
  EXPECT_EQ(prefetch.find('\r'), std::string::npos) << prefetch;
  EXPECT_EQ(prefetch.find("\033["), std::string::npos) << prefetch;
}

TEST_F(ProgressCliTest, ATerminalGetsABarRedrawnInPlaceInColourUnlessNoColor) {
  std::string ci;
  fs::path manifest = pushed_manifest(&ci);
  std::string bar = output_of("prefetch " + quoted(manifest), kBigNeffs, work / "tty", true);
  EXPECT_NE(bar.find("\r\033[KDownloading ["), std::string::npos) << bar;
  EXPECT_NE(bar.find("\033[32m"), std::string::npos) << "the bar's fill is coloured";
  EXPECT_GE(done_mib(bar, "Downloading"), 2.0 * kNeffBytes / (1 << 20)) << bar;

  std::string plain =
      output_of("prefetch " + quoted(manifest), kBigNeffs + " NO_COLOR=1", work / "nocolor", true);
  EXPECT_NE(plain.find("\r\033[KDownloading ["), std::string::npos) << plain;
  EXPECT_FALSE(std::regex_search(plain, std::regex("\033\\[[0-9;]*m"))) << "NO_COLOR: " << plain;
}

TEST_F(ProgressCliTest, DumbTerminalsDisabledBarsAndQuietShowNoProgress) {
  std::string ci;
  fs::path manifest = pushed_manifest(&ci);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"TERM=dumb", ""},
      {"HF_HUB_DISABLE_PROGRESS_BARS=1", ""},
      {"", " --quiet"},
  };
  int n = 0;
  for (const auto& [env, flag] : cases) {
    for (bool terminal : {true, false}) {
      fs::path fresh = work / ("off-" + std::to_string(n++));
      std::string out = output_of("prefetch" + flag + " " + quoted(manifest), kBigNeffs + " " + env,
                                  fresh, terminal);
      EXPECT_EQ(out.find("Downloading"), std::string::npos) << env << flag << ": " << out;
      EXPECT_EQ(out.find("\033["), std::string::npos) << env << flag << ": " << out;
      EXPECT_TRUE(fs::exists(fresh / kCompiler)) << "the prefetch itself ran: " << out;
    }
  }
}

// --progress: a wrapper that shows stderr as it comes (the CMake module) gets the progress lines
// with --json too, and stdout keeps only the JSON report.
TEST_F(ProgressCliTest, ProgressFlagShowsTheLinesWithJson) {
  std::string ci;
  fs::path manifest = pushed_manifest(&ci);
  testing::ToolRunner runner(work.path(), home.path(), endpoint, cache);
  testing::ToolResult r =
      runner.run("prefetch --json --progress " + quoted(manifest), kBigNeffs, work / "json");
  ASSERT_EQ(r.code, 0) << r.all();
  const std::string& stderr_text = r.err;
  const std::string& stdout_text = r.out;
  EXPECT_GE(done_mib(stderr_text, "Downloading"), 2.0 * kNeffBytes / (1 << 20)) << stderr_text;
  EXPECT_EQ(stderr_text.find('\r'), std::string::npos) << stderr_text;
  EXPECT_TRUE(nlohmann::json::parse(stdout_text).contains("configurations")) << stdout_text;
}

// A compile of a few seconds with a 1 s heartbeat prints lines while it runs, between its start
// and its end, naming the configuration, the time so far and the log; once a compile of the
// configuration is recorded (here under other flags, so another key), the expected time too.
TEST_F(ProgressCliTest, ARunningCompileSaysSoWithItsTimeTheExpectedTimeAndItsLog) {
  ManifestSpec spec;
  spec.confs = {{"slow", 1, 4096}};
  fs::path manifest = write_manifest(spec);
  const std::string slow = "STAND_IN_DELAY=2.5 NEURON_CACHE_HEARTBEAT_SECONDS=1";
  const std::string args = "compile " + quoted(manifest) + " --output-dir " + quoted(work / "out");
  const std::string log = (work / "out" / "slow.log").string();
  auto heartbeats = [](const std::string& output, const std::string& expected) {
    std::regex line("neuron-cache: still compiling slow: [0-9.]+ s so far, " + expected +
                    "; log: [^\n]*/out/slow\\.log\n");
    return std::distance(std::sregex_iterator(output.begin(), output.end(), line),
                         std::sregex_iterator());
  };

  std::string first = output_of(args, slow, {}, false);
  EXPECT_GE(heartbeats(first, R"(expected time unknown \(no earlier compile of it recorded\))"), 2)
      << first;
  EXPECT_NE(first.find("log: " + log + "\n"), std::string::npos)
      << "the log's full path: " << first;
  size_t started = first.find("neuron-cache: compiling slow\n");
  size_t beat = first.find("neuron-cache: still compiling slow: ");
  size_t ended = first.find("neuron-cache: compiled slow\n");
  ASSERT_NE(started, std::string::npos) << first;
  ASSERT_NE(ended, std::string::npos) << first;
  EXPECT_LT(started, beat) << first;
  EXPECT_LT(first.rfind("neuron-cache: still compiling slow: "), ended) << first;

  std::string second = output_of(args, slow + " NEURON_CC_FLAGS=-O2", {}, false);
  EXPECT_GE(heartbeats(second, "expected about [0-9.]+ s from its last compile"), 2) << second;
}

}  // namespace
}  // namespace neuron_cache
