// The progress display: a redrawn line with rate and ETA on a terminal, plain lines in logs,
// nothing when quiet. stderr is captured through a pipe.
#include "neuron_cache/cli/progress.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

namespace neuron_cache::cli {
namespace {

// Runs `body` with stderr redirected and returns what it printed.
std::string capture_stderr(const std::function<void()>& body) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  int saved = dup(STDERR_FILENO);
  dup2(fds[1], STDERR_FILENO);
  close(fds[1]);
  body();
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;)
    text.append(buffer, static_cast<size_t>(n));
  close(fds[0]);
  return text;
}

TEST(Progress, TerminalRedrawsOneLineWithRateAndEta) {
  std::string out = capture_stderr([] {
    Progress progress("Uploading", Progress::Mode::Terminal);
    progress.set_total(10 << 20);
    progress.add(1 << 20);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    progress.add(1 << 20);
    progress.finish();
  });
  EXPECT_NE(out.find("\r\033[K"), std::string::npos) << out;
  EXPECT_NE(out.find("Uploading: 2.0 MiB / 10.0 MiB"), std::string::npos) << out;
  EXPECT_NE(out.find("/s"), std::string::npos);
  EXPECT_NE(out.find("ETA"), std::string::npos) << out;
  EXPECT_NE(out.find(" in "), std::string::npos) << "the final line gives the time taken";
}

TEST(Progress, LogsGetPlainLinesAndQuietGetsNothing) {
  std::string lines = capture_stderr([] {
    Progress progress("Downloading", Progress::Mode::Lines);
    progress.add(2048);
  });
  EXPECT_EQ(lines.find('\r'), std::string::npos) << "no terminal control in logs";
  EXPECT_NE(lines.find("Downloading: 2.0 KiB"), std::string::npos) << lines;
  EXPECT_EQ(lines.back(), '\n');
  std::string quiet = capture_stderr([] {
    Progress progress("Downloading", Progress::Mode::Quiet);
    progress.add(2048);
  });
  EXPECT_TRUE(quiet.empty()) << quiet;
}

}  // namespace
}  // namespace neuron_cache::cli
