// The progress display (report/progress.h) fed by the transfer meter (net/meter.h): the rate and
// ETA math, the three line shapes, and the display drawing a phase into a file.
#include "neuron_cache/report/progress.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <thread>
#include <vector>

#include "neuron_cache/format/bytes.h"
#include "neuron_cache/local/cleanup.h"
#include "neuron_cache/report/report.h"

namespace neuron_cache::report {
namespace {

std::string read_all(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, file)) > 0;) text.append(buffer, n);
  return text;
}

TEST(Progress, RateAndEtaComeFromOnePlace) {
  net::MeterReading r{25 << 20, 100 << 20, 1, 4};
  Figures f = figures(r, 5.0);
  EXPECT_DOUBLE_EQ(f.rate, 5.0 * (1 << 20));
  ASSERT_TRUE(f.eta_seconds);
  EXPECT_DOUBLE_EQ(*f.eta_seconds, 15.0);
  EXPECT_FALSE(figures({10, 0, 0, 0}, 1.0).eta_seconds) << "no total, no ETA";
  EXPECT_FALSE(figures({10, 100, 0, 0}, 0.0).eta_seconds) << "no time yet, no rate";
  // A retried part sends bytes twice: never more than the total, never a negative ETA.
  Figures over = figures({120, 100, 1, 1}, 1.0);
  EXPECT_DOUBLE_EQ(over.rate, 100.0);
  EXPECT_FALSE(over.eta_seconds);
}

TEST(Progress, LinesSayBytesFilesRateAndEtaInIecUnits) {
  net::MeterReading r{25 << 20, 100 << 20, 1, 4};
  EXPECT_EQ(progress_line("Downloading", r, 5.0),
            "Downloading: 25.0 MiB of 100.0 MiB (25%), 1 of 4 files, 5.0 MiB/s, ETA 15 s");
  EXPECT_EQ(final_line("Uploading", {1ull << 30, 1ull << 30, 1, 1}, 4.0),
            "Uploading done: 1.0 GiB, 1 file in 4 s (256.0 MiB/s)");
  std::string bar = bar_line("Downloading", r, 5.0, false);
  EXPECT_EQ(bar,
            "Downloading [######..................] 25% 25.0 MiB/100.0 MiB 1/4 files "
            "5.0 MiB/s, ETA 15 s");
  EXPECT_NE(bar_line("Downloading", r, 5.0, true).find("\033[32m######\033[0m"), std::string::npos);
}

TEST(Progress, OneByteFormatterIecExceptOptimumNeuronsPinnedWording) {
  EXPECT_EQ(format::human_bytes(1ull << 30), "1.0 GiB");
  EXPECT_EQ(report::human_bytes(1ull << 30), "1.0 GiB");
  EXPECT_EQ(format::human_bytes(3 << 19), "1.5 MiB");
  EXPECT_EQ(format::human_bytes(512), "512 B");
  EXPECT_EQ(local::format_size(1ull << 30), "1.0 GB") << "optimum-cli cleanup/status wording";
}

TEST(Progress, LogsGetPlainLinesOnTheIntervalAndAFinalLine) {
  std::FILE* out = std::tmpfile();
  {
    ProgressDisplay display({ProgressMode::Lines, false, std::chrono::milliseconds(20)}, out);
    net::TransferPhase phase("Downloading");
    net::meter().expect(4 << 20, 2);
    for (int i = 0; i < 4; ++i) {
      net::meter().add_bytes(1 << 20);
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
    net::meter().add_file();
    net::meter().add_file();
  }
  std::string text = read_all(out);
  std::fclose(out);
  EXPECT_EQ(text.find('\r'), std::string::npos) << "no terminal control in logs";
  EXPECT_NE(text.find("Downloading: "), std::string::npos) << text;
  EXPECT_NE(text.find(" of 4.0 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("Downloading done: 4.0 MiB, 2 files in "), std::string::npos) << text;
  EXPECT_EQ(text.back(), '\n');
}

TEST(Progress, ATerminalGetsOneLineRedrawnAndAMessageClearsIt) {
  std::FILE* out = std::tmpfile();
  {
    ProgressDisplay display({ProgressMode::Bar, false, std::chrono::milliseconds(10)}, out);
    net::TransferPhase phase("Uploading");
    net::meter().expect(2 << 20, 1);
    net::meter().add_bytes(1 << 20);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ProgressDisplay::clear_line();
    net::meter().add_bytes(1 << 20);
    net::meter().add_file();
  }
  std::string text = read_all(out);
  std::fclose(out);
  EXPECT_NE(text.find("\r\033[KUploading [############"), std::string::npos) << text;
  EXPECT_NE(text.find("\r\033[KUploading done: 2.0 MiB, 1 file in "), std::string::npos) << text;
  EXPECT_EQ(text.find("\033[32m"), std::string::npos) << "colour off: none";
}

// The Action's display: a terminal style still gives plain lines (a CI log cannot redraw), each
// handed whole to the printer, never a bar or a control sequence.
TEST(Progress, APrinterGetsWholePlainLinesEvenForATerminalStyle) {
  std::vector<std::string> lines;
  {
    ProgressDisplay display({ProgressMode::Bar, true, std::chrono::milliseconds(20)},
                            [&lines](const std::string& line) { lines.push_back(line); });
    net::TransferPhase phase("Downloading");
    net::meter().expect(4 << 20, 1);
    for (int i = 0; i < 4; ++i) {
      net::meter().add_bytes(1 << 20);
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
    net::meter().add_file();
  }
  ASSERT_GE(lines.size(), 2u);
  EXPECT_TRUE(lines.front().starts_with("Downloading: ")) << lines.front();
  EXPECT_NE(lines.front().find(" of 4.0 MiB ("), std::string::npos) << lines.front();
  EXPECT_TRUE(lines.back().starts_with("Downloading done: 4.0 MiB, 1 file in ")) << lines.back();
  for (const auto& line : lines) {
    EXPECT_EQ(line.find_first_of("\r\n\033"), std::string::npos) << line;
  }
}

TEST(Progress, OffPrintsNothingAndANestedPhaseBelongsToTheOuterOne) {
  std::FILE* out = std::tmpfile();
  {
    ProgressDisplay display({ProgressMode::Off, false, std::chrono::milliseconds(1)}, out);
    net::TransferPhase phase("Downloading");
    net::meter().add_bytes(1 << 20);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(read_all(out).empty());
  std::fclose(out);
  out = std::tmpfile();
  {
    ProgressDisplay display({ProgressMode::Lines, false, std::chrono::hours(1)}, out);
    net::TransferPhase outer("Uploading");
    net::meter().add_bytes(1024);
    { net::TransferPhase retry("Uploading"); }
    net::meter().add_bytes(1024);
  }
  std::string text = read_all(out);
  std::fclose(out);
  EXPECT_TRUE(text.starts_with("Uploading done: 2.0 KiB, 0 files in ")) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << "one final line: " << text;
}

}  // namespace
}  // namespace neuron_cache::report
