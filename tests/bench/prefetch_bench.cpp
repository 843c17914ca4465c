// prefetch-bench: `neuron-cache prefetch` beside what a user would pick instead (issue 9, section
// 2). Generates a cache shaped like a real decoder export, pushes it with `neuron-cache push` to
// the project's Hub server (hub and CDN listeners on loopback), then times, interleaved in each
// round: A `neuron-cache prefetch` into an empty cache, B `curl --parallel` from the final URLs,
// C `cp -r` of the cache folder, D the official client's snapshotDownload into an empty HF cache.
// Every result is checked byte for byte (sha256 of every file) against the generated set; a
// method that did not deliver every file is reported FAILED and the exit code is 1.
//
//   prefetch-bench --node NODE --js-dir DIR [--scale S] [--rounds N] [--small-modules N]
//                  [--work DIR] [--curl CURL] [--tool NEURON_CACHE]
//
// Normally run through tests/bench/prefetch-bench.sh, which builds it and installs the official
// client (npm ci) into DIR. The set at --scale 1: one MODULE folder with a 1 GiB model.neff, eight
// with a 100 MiB one, and --small-modules (200) small folders (NEFFs of 4 KiB to 400 KiB); SCALE
// multiplies the nine large NEFFs only. Random bytes throughout, so nothing compresses or sparses.
// Wall time and peak RSS of each process come from measure-exec (tests/bench/measure_exec.cpp).
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench_support.h"
#include "hub_fixture.h"
#include "test_support.h"

namespace {

using namespace neuron_cache;
using nlohmann::json;

using namespace neuron_cache::bench_support;

constexpr const char* kRepo = "acme/prefetch-bench";

struct Options {
  double scale = 1.0;
  int rounds = 3;
  int small_modules = 200;
  std::string node;
  fs::path js_dir;
  std::optional<fs::path> work;
  std::string curl = "curl";
  std::string tool = NEURON_CACHE_TOOL;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "prefetch-bench: " << why
            << "\nusage: prefetch-bench --node NODE --js-dir DIR [--scale S] [--rounds N] "
               "[--small-modules N] [--work DIR] [--curl CURL] [--tool NEURON_CACHE]\n";
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  parse_options(argc, argv,
                {{"--scale", set_double(o.scale)},
                 {"--rounds", set_int(o.rounds)},
                 {"--small-modules", set_int(o.small_modules)},
                 {"--node", [&](const std::string& v) { o.node = v; }},
                 {"--js-dir", [&](const std::string& v) { o.js_dir = v; }},
                 {"--work", [&](const std::string& v) { o.work = v; }},
                 {"--curl", [&](const std::string& v) { o.curl = v; }},
                 {"--tool", [&](const std::string& v) { o.tool = v; }}},
                usage);
  if (!(o.scale > 0) || o.rounds < 1 || o.small_modules < 0) usage("bad --scale/--rounds");
  if (o.node.empty() || o.js_dir.empty()) usage("--node and --js-dir are required");
  return o;
}

// ---------------------------------------------------------------------------------------------
// The methods.

// DurableCopy is cp -r followed by syncfs: the disk's ceiling for a copy that survives a power
// cut, which is what prefetch delivers (the others leave their bytes in the page cache).
// VerifiedCurl is curl followed by `sha256sum -c` of every file: what a user who wants what
// prefetch guarantees (every byte checked) would run with the usual tools.
enum Method { Prefetch, Curl, VerifiedCurl, Copy, DurableCopy, Snapshot, kMethods };
const std::vector<std::string> kNames = {"neuron-cache prefetch", "curl --parallel (8)",
                                         "curl + sha256sum -c",   "cp -r",
                                         "cp -r + sync -f",       "snapshotDownload (JS)"};

class Bench {
 public:
  Bench(const Options& o, const fs::path& work, const Set& set, const testing::HubServer& server)
      : o_(o), work_(work), set_(set), server_(server) {}

  Sample measure(Method method, int round) {
    fs::path out = work_ / ("round-" + std::to_string(round)) / ("out-" + std::to_string(method));
    fs::path log = work_ / ("round-" + std::to_string(round)) / ("log-" + std::to_string(method));
    fs::remove_all(out);
    fs::create_directories(out.parent_path());
    std::vector<std::string> args;
    std::map<std::string, std::string> env = {{"HOME", (work_ / "home").string()}};
    fs::path result_root = out;
    switch (method) {
      case Prefetch:
        fs::create_directories(out);
        args = wrap_words(
            "PREFETCH_BENCH_WRAP");  // PREFETCH_BENCH_WRAP="strace -f -c -o FILE": profile by hand
        args.insert(args.end(),
                    {o_.tool, "prefetch", set_.manifest.string(), "--cache-dir", out.string()});
        env["HF_ENDPOINT"] = server_.url();
        env["HF_TOKEN"] = testing::kHubReadToken;
        env["HF_HOME"] = (work_ / ("hf-home-prefetch-" + std::to_string(round))).string();
        break;
      case Curl:
        args = curl_args(out);
        break;
      case VerifiedCurl:
        args = {"/bin/sh",
                "-c",
                "out=$1 sums=$2; shift 2; \"$@\" && cd \"$out\" && sha256sum --quiet --strict -c "
                "\"$sums\"",
                "verified-curl",
                out.string(),
                write_sha256sums(set_, work_ / "sha256sums").string()};
        for (std::string& word : curl_args(out)) args.push_back(std::move(word));
        break;
      case Copy:
        args = {"cp", "-r", set_.root.string(), out.string()};
        break;
      case DurableCopy:
        args = {"/bin/sh", "-c", "cp -r \"$0\" \"$1\" && sync -f \"$1\"", set_.root.string(),
                out.string()};
        break;
      case Snapshot:
        args = {o_.node, (o_.js_dir / "snapshot-download.mjs").string(), server_.url(), kRepo,
                out.string()};
        env["HF_TOKEN"] = testing::kHubReadToken;
        break;
      default:
        break;
    }
    // Nothing dirty left by the previous method: its writeback must not land on this one.
    ::sync();
    server_.clear_log();
    Sample sample;
    sample.run = run(args, env, log);
    json access = server_.access_log();
    sample.requests = static_cast<double>(testing::count_requests(
        access, [](const json& e) { return e.value("listener", "") == "hub"; }));
    sample.cdn_requests = static_cast<double>(testing::count_requests(
        access, [](const json& e) { return e.value("listener", "") == "cdn"; }));
    if (method == Snapshot) result_root = snapshot_folder(out);
    sample.check = verify(result_root, set_.files);
    if (!sample.ok()) {
      sample.note = failure_detail(sample.run, sample.check, log);
    } else if (method == Prefetch) {
      sample.note = first_line_with(log, "prefetched ");
    }
    fs::remove_all(out);  // outside the timing; the next method starts from a clean disk
    return sample;
  }

 private:
  std::vector<std::string> curl_args(const fs::path& out) {
    return {o_.curl,    "--parallel",   "--parallel-max", "8",        "--fail",
            "--silent", "--show-error", "--create-dirs",  "--config", curl_config(out).string()};
  }

  // The final URL of every file, asked outside the timing: the Hub's own URL its 307 points to
  // for a regular file (relative), the signed CDN URL its 302 points to for an LFS file (valid
  // 1 h; asked again every round).
  fs::path curl_config(const fs::path& out) {
    httplib::Client hub(server_.url());
    std::string config;
    for (const auto& f : set_.files) {
      std::string resolve = std::string("/") + kRepo + "/resolve/main/" + f.path;
      httplib::Result r = hub.Head(resolve);
      if (!r) throw std::runtime_error("HEAD " + resolve + " failed");
      std::string url;
      if (r->status == 302) {
        url = r->get_header_value("Location");
      } else if (r->status == 307) {
        url = server_.url() + r->get_header_value("Location");
      } else if (r->status == 200) {
        url = server_.url() + resolve;
      } else {
        throw std::runtime_error("HEAD " + resolve + ": HTTP " + std::to_string(r->status));
      }
      config += "url = \"" + url + "\"\noutput = \"" + (out / f.path).string() + "\"\n";
    }
    fs::path file = work_ / "curl.config";
    testing::write_file(file, config);
    return file;
  }

  static fs::path snapshot_folder(const fs::path& cache) {
    std::string folder = std::string("models--") + kRepo;
    folder.replace(folder.find('/'), 1, "--");
    std::error_code error;
    for (const auto& item : fs::directory_iterator(cache / folder / "snapshots", error)) {
      return item.path();
    }
    return cache / "no-snapshot-folder";
  }

  const Options& o_;
  fs::path work_;
  const Set& set_;
  const testing::HubServer& server_;
};

json bench_config() {
  json config = testing::HubServer::example_config();
  config["repos"].push_back({{"id", kRepo}, {"private", false}});
  return config;
}

int bench(const Options& o, const fs::path& work) {
  auto start = Clock::now();
  Shape shape{kRepo, {}, o.small_modules, "prefetch-bench"};
  shape.large.push_back(static_cast<uint64_t>(std::llround(o.scale * 1024 * kMiB)));
  for (int i = 0; i < 8; ++i)
    shape.large.push_back(static_cast<uint64_t>(std::llround(o.scale * 100 * kMiB)));
  Set set = generate(work, shape);
  std::printf(
      "prefetch-bench: SCALE=%g, %d rounds; set: %zu configurations, %zu MODULE folders, %zu "
      "files, %.1f MiB, largest file %.1f MiB (generated in %.1f s)\n",
      o.scale, o.rounds, set.configurations, set.modules, set.files.size(), set.bytes / kMiB,
      set.largest / kMiB, seconds_since(start));

  testing::HubServer server(bench_config());
  fs::path server_dir = server.data_dir().parent_path();
  stop_when_interrupted(json::parse(testing::read_file(server_dir / "ready.json")).at("pid"));
  remove_when_interrupted(server_dir);
  fs::path push_log = work / "push.log";
  Run pushed = run({o.tool, "push", set.manifest.string(), "--cache-dir", set.root.string()},
                   {{"HF_ENDPOINT", server.url()},
                    {"HF_TOKEN", testing::kHubWriteToken},
                    {"HF_HOME", (work / "hf-home-push").string()},
                    {"HOME", (work / "home").string()}},
                   push_log);
  std::printf("push: neuron-cache push, %.1f s, exit code %d: %s\n", pushed.seconds,
              pushed.exit_code, tail_of(push_log, 1).c_str());
  if (pushed.exit_code != 0) {
    std::printf("FAILED: the push failed, nothing to measure:\n%s\n",
                tail_of(push_log, 20).c_str());
    return 1;
  }
  std::printf(
      "each round runs the methods in this order, from an empty destination, after sync(2); the "
      "page\n"
      "cache is not dropped (the source of cp -r and the server's blobs are likely in memory)\n");

  Bench runner(o, work, set, server);
  std::vector<std::vector<Sample>> samples(kMethods);
  for (int round = 1; round <= o.rounds; ++round) {
    std::printf("round %d:", round);
    std::fflush(stdout);
    for (int m = 0; m < kMethods; ++m) {
      Sample s = runner.measure(static_cast<Method>(m), round);
      std::printf("  %s %.2f s%s", kNames[m].c_str(), s.run.seconds, s.ok() ? "" : " FAILED");
      std::fflush(stdout);
      samples[m].push_back(std::move(s));
    }
    std::printf("\n");
  }
  Run floor = run({"true"}, {}, work / "true.log");  // after the rounds: our largest state

  std::vector<Summary> sum;
  for (const auto& method_samples : samples)
    sum.push_back(summarize(method_samples, set.files.size()));
  std::printf("\n%-24s %9s %7s %8s %8s %10s %9s %9s %9s %9s\n", "method (median of rounds)",
              "seconds", "CPU s", "MiB/s", "x curl", "x snapshot", "Hub req", "CDN req", "peak RSS",
              "verified");
  std::printf("%-24s %9s %7s %8s %8s %10s %9s %9s %9s %9s\n", "", "", "", "", "", "", "per file",
              "per file", "MiB", "rounds");
  for (int m = 0; m < kMethods; ++m) {
    const Summary& u = sum[m];
    std::printf("%-24s %9.3f %7.2f %8.1f %8.2f %10.2f %9.2f %9.2f %9.1f %6zu/%zu%s\n",
                kNames[m].c_str(), u.seconds, u.cpu_seconds, set.bytes / kMiB / u.seconds,
                u.seconds / sum[Curl].seconds, u.seconds / sum[Snapshot].seconds, u.requests,
                u.cdn_requests, u.rss, u.verified, u.rounds, u.failed() ? "  FAILED" : "");
  }
  std::printf(
      "(MiB/s: the set's %.1f MiB over the median time; requests per file: the most in a round,\n"
      "over the set's %zu files; peak RSS: ru_maxrss of the process, the most in a round, whose\n"
      "floor is %.1f MiB (what `true` measures); CPU s: user + system time of the process and\n"
      "its children, not the server's; curl gets the final URLs, CDN ones for LFS files,\n"
      "resolved before its timing)\n",
      set.bytes / kMiB, set.files.size(), floor.max_rss_mib);

  std::printf("prefetch x (cp -r + sync -f), the durable disk ceiling: %.2f\n",
              sum[Prefetch].seconds / sum[DurableCopy].seconds);
  std::printf("prefetch x (curl + sha256sum -c), the usual tools verifying every byte: %.2f\n",
              sum[Prefetch].seconds / sum[VerifiedCurl].seconds);
  double x_curl = sum[Prefetch].seconds / sum[Curl].seconds;
  double x_snapshot = sum[Prefetch].seconds / sum[Snapshot].seconds;
  struct Target {
    const char* what;
    double value;
    double limit;
  } targets[] = {{"prefetch <= 1.2 x curl --parallel", x_curl, 1.2},
                 {"prefetch <= 0.25 x snapshotDownload", x_snapshot, 0.25},
                 {"Hub requests per file <= 1.0", sum[Prefetch].requests, 1.0},
                 {"peak RSS of prefetch <= 64 MiB", sum[Prefetch].rss, 64}};
  std::printf("\ntargets (issue 25; set for SCALE=1, with and without --small-modules):\n");
  for (const auto& t : targets) {
    const char* verdict = sum[Prefetch].failed() ? "not met (prefetch FAILED)"
                          : t.value <= t.limit   ? "met"
                                                 : "not met";
    std::printf("  %-38s %8.2f  %s\n", t.what, t.value, verdict);
  }

  const Sample& first = samples[Prefetch].front();
  if (first.ok() && !first.note.empty()) {
    std::printf("\nneuron-cache said (round 1): %s\n", first.note.c_str());
  }
  if (print_failures(kNames, samples)) {
    if (!o.work) std::printf("(the outputs are kept with --work DIR)\n");
    return 1;
  }
  std::printf("\nall methods delivered all %zu files byte for byte in every round\n",
              set.files.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options = parse(argc, argv);
  handle_interruptions("prefetch-bench");
  return run_bench("prefetch-bench", options.work,
                   [&](const fs::path& work) { return bench(options, work); });
}
