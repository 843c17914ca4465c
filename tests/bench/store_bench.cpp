// store-bench: neuron-cache against an S3 bucket and a shared folder, beside what a user would
// use instead (issue 25): boto3's upload_file / download_file (default TransferConfig) for S3,
// `cp -r` for a folder. Generates the set prefetch-bench uses (tests/bench/bench_support.h; here
// --large NEFFs of --large-mib each plus --small-modules small folders), pushes it once to
// s3rver on 127.0.0.1 and to a folder store, then times, interleaved in each round:
//   S3 download:     neuron-cache prefetch | boto3 download_file, a loop | boto3, 10 files at once
//   S3 upload:       neuron-cache push     | boto3 upload_file, a loop   | boto3, 10 files at once
//   folder download: neuron-cache prefetch | cp -r | cp -r + sync -f | cp -r, sha256sum -c, sync -f
//   folder upload:   neuron-cache push     | cp -r | cp -r + sync -f
// Every result is checked byte for byte (downloads in the destination, uploads in s3rver's files
// or the folder); a method that did not deliver every file is reported FAILED, exit code 1.
//
//   tests/s3/run-s3-tests.sh tests/s3 BUILD/tests/s3 node npm BUILD/tests/store-bench
//       [--large N] [--large-mib M] [--small-modules N] [--rounds N] [--work DIR]
//
// run-s3-tests.sh installs s3rver (npm ci) and names it in NEURON_CACHE_S3RVER. Loopback
// numbers against s3rver (Node, one process): they compare the clients' cost on one machine.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench_support.h"
#include "s3_server.h"
#include "test_support.h"

namespace {

using namespace neuron_cache;
using namespace neuron_cache::bench_support;
using nlohmann::json;

struct Options {
  int large = 6;
  double large_mib = 75;
  int small_modules = 200;
  int rounds = 3;
  std::optional<fs::path> work;
  std::string tool = NEURON_CACHE_TOOL;
  std::string python = NEURON_CACHE_PYTHON;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "store-bench: " << why
            << "\nusage: store-bench [--large N] [--large-mib M] [--small-modules N] "
               "[--rounds N] [--work DIR] [--tool NEURON_CACHE] [--python PYTHON]\n";
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  parse_options(argc, argv,
                {{"--large", set_int(o.large)},
                 {"--large-mib", set_double(o.large_mib)},
                 {"--small-modules", set_int(o.small_modules)},
                 {"--rounds", set_int(o.rounds)},
                 {"--work", [&](const std::string& v) { o.work = v; }},
                 {"--tool", [&](const std::string& v) { o.tool = v; }},
                 {"--python", [&](const std::string& v) { o.python = v; }}},
                usage);
  if (o.large < 0 || !(o.large_mib > 0) || o.small_modules < 0 || o.rounds < 1 ||
      o.large + o.small_modules == 0) {
    usage("bad --large/--large-mib/--small-modules/--rounds");
  }
  return o;
}

// ---------------------------------------------------------------------------------------------
// The methods, in the order a round runs them; each group's first is neuron-cache and its
// second the reference of its target.

enum Method {
  PrefetchS3,
  Boto3Download,
  Boto3ManagerDownload,
  PushS3,
  Boto3Upload,
  Boto3ManagerUpload,
  PrefetchFolder,
  CopyFromFolder,
  DurableCopyFromFolder,
  VerifiedCopyFromFolder,
  PushFolder,
  CopyToFolder,
  DurableCopyToFolder,
  kMethods
};
const std::vector<std::string> kNames = {"neuron-cache prefetch",  "boto3 download_file loop",
                                         "boto3 10 files at once", "neuron-cache push",
                                         "boto3 upload_file loop", "boto3 10 files at once",
                                         "neuron-cache prefetch",  "cp -r",
                                         "cp -r + sync -f",        "cp + sha256sum + sync",
                                         "neuron-cache push",      "cp -r",
                                         "cp -r + sync -f"};
struct Group {
  const char* title;
  Method first;
  Method last;
};
const Group kGroups[] = {{"S3, download", PrefetchS3, Boto3ManagerDownload},
                         {"S3, upload", PushS3, Boto3ManagerUpload},
                         {"shared folder, download", PrefetchFolder, VerifiedCopyFromFolder},
                         {"shared folder, upload", PushFolder, DurableCopyToFolder}};

constexpr const char* kStorePrefix = "store";  // what the downloads read, pushed once

// The requests the tool's --json report counts ("hub_requests": the store's, whichever it is).
double tool_requests(const fs::path& log) {
  std::string text = testing::read_file(log);
  size_t start = text.starts_with("{") ? 0 : text.find("\n{");
  size_t end = text.rfind("\n}");
  if (start == std::string::npos || end == std::string::npos || end < start) return -1;
  json report = json::parse(text.substr(start, end + 2 - start), nullptr, false);
  if (!report.is_object() || !report.contains("hub_requests")) return -1;
  return report["hub_requests"].get<double>();
}

// boto3_tree.py's last line: "requests N".
double boto3_requests(const fs::path& log) {
  std::string line = first_line_with(log, "requests ");
  return line.starts_with("requests ") ? std::stod(line.substr(9)) : -1;
}

class Bench {
 public:
  Bench(const Options& o, const fs::path& work, const Set& set, const testing::S3Server& server)
      : o_(o), work_(work), set_(set), server_(server) {
    for (const auto& [name, value] : server.env()) env_[name] = value;
    env_["HOME"] = (work / "home").string();  // no ~/.aws of the user's
    env_["AWS_EC2_METADATA_DISABLED"] = "true";
    // s3rver ignores conditional writes, so the tool reads every index file it wrote again
    // after this delay (2 s by default) to catch a racing writer; S3 enforces them and never
    // pays it, so neither does the benchmark.
    env_["NEURON_CACHE_S3_RECHECK_MS"] = "0";
    std::string listing;
    for (const auto& f : set.files) listing += f.path + "\n";
    listing_ = work / "files.txt";
    testing::write_file(listing_, listing);
  }

  fs::path folder_store() const { return work_ / "folder-store"; }

  // The stores the downloads read: the set pushed once to each (also the first check of push).
  bool fill_stores() {
    fs::remove_all(folder_store());  // a --work folder used before: push everything again
    bool ok = prepare_folder(folder_store()) &&
              push_once(server_.url(kStorePrefix), work_ / "push-s3.log") &&
              push_once("file://" + folder_store().string(), work_ / "push-folder.log");
    return ok;
  }

  Sample measure(Method method, int round) {
    fs::path dir = work_ / ("round-" + std::to_string(round));
    fs::path out = dir / ("out-" + std::to_string(method));
    fs::path log = dir / ("log-" + std::to_string(method));
    std::string prefix = "up-" + std::to_string(round) + "-" + std::to_string(method);
    fs::remove_all(out);
    fs::create_directories(dir);
    if (method == PrefetchS3 || method == PrefetchFolder) fs::create_directories(out);
    if (method == PushFolder && !prepare_folder(out)) throw std::runtime_error("create failed");
    std::vector<std::string> args = command(method, out, prefix);
    // Nothing dirty left by the previous method: its writeback must not land on this one.
    ::sync();
    Sample sample;
    sample.run = run(args, env_, log);
    bool tool = method == PrefetchS3 || method == PushS3;
    bool boto3 = (method >= Boto3Download && method <= Boto3ManagerDownload) ||
                 method == Boto3Upload || method == Boto3ManagerUpload;
    if (tool) sample.requests = tool_requests(log);
    if (boto3) sample.requests = boto3_requests(log);
    fs::path written = uploaded_to(method, out, prefix);
    sample.check = verify(written, set_.files, s3_upload(method) ? "._S3rver_object" : "");
    if (!sample.ok()) sample.note = failure_detail(sample.run, sample.check, log);
    fs::remove_all(written);  // outside the timing; the next method starts from a clean disk
    fs::remove_all(out);
    return sample;
  }

 private:
  static bool s3_upload(Method m) { return m >= PushS3 && m <= Boto3ManagerUpload; }

  std::vector<std::string> command(Method method, const fs::path& out, const std::string& prefix) {
    std::string s3_store = server_.url(kStorePrefix);
    std::string boto3 = std::string(NEURON_CACHE_TESTS_DIR) + "/bench/boto3_tree.py";
    std::string from = folder_store().string();
    std::string durable = "cp -r \"$0\" \"$1\" && sync -f \"$1\"";
    switch (method) {
      case PrefetchS3:
        return prefetch(s3_store, out);
      case Boto3Download:
      case Boto3ManagerDownload:
        return {o_.python,        boto3,
                "download",       method == Boto3Download ? "loop" : "manager",
                server_.bucket(), kStorePrefix,
                out.string(),     listing_.string()};
      case PushS3:
        return push(server_.url(prefix));
      case Boto3Upload:
      case Boto3ManagerUpload:
        return {o_.python,
                boto3,
                "upload",
                method == Boto3Upload ? "loop" : "manager",
                set_.root.string(),
                server_.bucket(),
                prefix,
                listing_.string()};
      case PrefetchFolder:
        return prefetch("file://" + from, out);
      case CopyFromFolder:
        return {"cp", "-r", from, out.string()};
      case DurableCopyFromFolder:
        return {"/bin/sh", "-c", durable, from, out.string()};
      case VerifiedCopyFromFolder:
        // What prefetch from a folder does with the usual tools: copy, check every byte, flush.
        return {"/bin/sh",
                "-c",
                "cp -r \"$0\" \"$1\" && cd \"$1\" && sha256sum --quiet --strict -c \"$2\" && "
                "sync -f .",
                from,
                out.string(),
                write_sha256sums(set_, work_ / "sha256sums").string()};
      case PushFolder:
        return push("file://" + out.string());
      case CopyToFolder:
        return {"cp", "-r", set_.root.string(), out.string()};
      case DurableCopyToFolder:
        return {"/bin/sh", "-c", durable, set_.root.string(), out.string()};
      default:
        throw std::logic_error("no such method");
    }
  }

  // The tool's command in the rounds; STORE_BENCH_WRAP="perf record -g -o FILE" (or a script
  // naming a file per run) goes before it: profile by hand.
  std::vector<std::string> tool(const std::string& command, const std::string& store,
                                const fs::path& cache_dir) const {
    std::vector<std::string> args = wrap_words("STORE_BENCH_WRAP");
    args.insert(args.end(), {o_.tool, command, set_.manifest.string(), "--repo", store,
                             "--cache-dir", cache_dir.string(), "--json"});
    return args;
  }
  std::vector<std::string> prefetch(const std::string& store, const fs::path& out) const {
    return tool("prefetch", store, out);
  }
  std::vector<std::string> push(const std::string& store) const {
    return tool("push", store, set_.root);
  }

  // Where an upload's files are, to check and remove: s3rver keeps an object as the file
  // <data>/<bucket>/<key>._S3rver_object.
  fs::path uploaded_to(Method method, const fs::path& out, const std::string& prefix) const {
    if (s3_upload(method)) return server_.data_dir() / server_.bucket() / prefix;
    return out;
  }

  // A new folder store is written only once `neuron-cache create` marked it (docs/stores.md).
  bool prepare_folder(const fs::path& folder) {
    fs::create_directories(folder);
    fs::path log = folder.parent_path() / (folder.filename().string() + ".create.log");
    Run created = run({o_.tool, "create", "-n", "file://" + folder.string()}, env_, log);
    if (created.exit_code != 0) std::printf("create failed:\n%s\n", tail_of(log, 20).c_str());
    return created.exit_code == 0;
  }

  bool push_once(const std::string& store, const fs::path& log) {
    Run pushed = run({o_.tool, "push", set_.manifest.string(), "--repo", store, "--cache-dir",
                      set_.root.string()},
                     env_, log);
    std::printf("push to %s: %.1f s, exit code %d\n", store.c_str(), pushed.seconds,
                pushed.exit_code);
    if (pushed.exit_code != 0) {
      std::printf("FAILED: the push failed, nothing to measure:\n%s\n", tail_of(log, 20).c_str());
    }
    return pushed.exit_code == 0;
  }

  const Options& o_;
  fs::path work_;
  const Set& set_;
  const testing::S3Server& server_;
  std::map<std::string, std::string> env_;
  fs::path listing_;
};

// ---------------------------------------------------------------------------------------------
// The report.

void print_table(const Set& set, const std::vector<Summary>& sum) {
  std::printf("\n%-26s %9s %7s %8s %8s %9s %9s %9s\n", "method (median of rounds)", "seconds",
              "CPU s", "MiB/s", "x ref", "requests", "peak RSS", "verified");
  std::printf("%-26s %9s %7s %8s %8s %9s %9s %9s\n", "", "", "", "", "", "per file", "MiB",
              "rounds");
  for (const Group& g : kGroups) {
    std::printf("%s (ref: %s)\n", g.title, kNames[g.first + 1].c_str());
    for (int m = g.first; m <= g.last; ++m) {
      const Summary& u = sum[m];
      std::string requests = u.requests < 0 ? "-" : std::to_string(u.requests).substr(0, 4);
      std::printf("  %-24s %9.3f %7.2f %8.1f %8.2f %9s %9.1f %6zu/%zu%s\n", kNames[m].c_str(),
                  u.seconds, u.cpu_seconds, set.bytes / kMiB / u.seconds,
                  u.seconds / sum[g.first + 1].seconds, requests.c_str(), u.rss, u.verified,
                  u.rounds, u.failed() ? "  FAILED" : "");
    }
  }
  std::printf(
      "(MiB/s: the set's %.1f MiB over the median time; x ref: over the group's second line;\n"
      "requests per file: the most in a round over the set's %zu files, as the tool's --json\n"
      "report and a botocore hook count them; peak RSS: ru_maxrss, the most in a round; CPU s:\n"
      "user + system time of the process and its children, not the server's)\n",
      set.bytes / kMiB, set.files.size());
}

void print_targets(const std::vector<Summary>& sum) {
  struct Target {
    const char* what;
    Method ours;
    Method theirs;
  } targets[] = {{"prefetch from S3 <= 1.0 x boto3 download_file", PrefetchS3, Boto3Download},
                 {"push to S3 <= 1.0 x boto3 upload_file", PushS3, Boto3Upload},
                 {"prefetch from a folder <= 1.0 x cp -r", PrefetchFolder, CopyFromFolder}};
  std::printf("\ntargets (issue 25):\n");
  for (const auto& t : targets) {
    double ratio = sum[t.ours].seconds / sum[t.theirs].seconds;
    const char* verdict = sum[t.ours].failed() ? "not met (neuron-cache FAILED)"
                          : ratio <= 1.0       ? "met"
                                               : "not met";
    std::printf("  %-48s %6.2f  %s\n", t.what, ratio, verdict);
  }
  std::printf("  (beside the durable copy, cp -r + sync -f: prefetch %.2f, push %.2f)\n",
              sum[PrefetchFolder].seconds / sum[DurableCopyFromFolder].seconds,
              sum[PushFolder].seconds / sum[DurableCopyToFolder].seconds);
  std::printf("  (beside cp, sha256sum -c and sync -f, what prefetch from a folder does: %.2f)\n",
              sum[PrefetchFolder].seconds / sum[VerifiedCopyFromFolder].seconds);
}

Set generate_set(const Options& o, const fs::path& work, const std::string& cache_repo) {
  Shape shape{cache_repo, {}, o.small_modules, "store-bench"};
  for (int i = 0; i < o.large; ++i) {
    shape.large.push_back(static_cast<uint64_t>(std::llround(o.large_mib * kMiB)));
  }
  auto start = Clock::now();
  Set set = generate(work, shape);
  std::printf(
      "store-bench: %d rounds; set: %zu configurations, %zu MODULE folders, %zu files, %.1f MiB, "
      "largest file %.1f MiB (generated in %.1f s)\n",
      o.rounds, set.configurations, set.modules, set.files.size(), set.bytes / kMiB,
      set.largest / kMiB, seconds_since(start));
  return set;
}

int bench(const Options& o, const fs::path& work) {
  testing::S3Server server;
  stop_when_interrupted(server.pid());
  remove_when_interrupted(server.data_dir().parent_path());
  Set set = generate_set(o, work, server.url(kStorePrefix));
  Bench runner(o, work, set, server);
  if (!runner.fill_stores()) return 1;
  std::printf(
      "each round runs the methods below in this order, after sync(2), into an empty destination\n"
      "(a new prefix or folder for uploads); the page cache is not dropped\n");

  std::vector<std::vector<Sample>> samples(kMethods);
  for (int round = 1; round <= o.rounds; ++round) {
    std::printf("round %d:", round);
    for (int m = 0; m < kMethods; ++m) {
      Sample s = runner.measure(static_cast<Method>(m), round);
      std::printf(" %.2f%s", s.run.seconds, s.ok() ? "" : " FAILED");
      std::fflush(stdout);
      samples[m].push_back(std::move(s));
    }
    std::printf(" s\n");
  }
  std::vector<Summary> sum;
  for (const auto& method_samples : samples) {
    sum.push_back(summarize(method_samples, set.files.size()));
  }
  print_table(set, sum);
  print_targets(sum);
  if (print_failures(kNames, samples)) return 1;
  std::printf("\nall methods delivered all %zu files byte for byte in every round\n",
              set.files.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options = parse(argc, argv);
  handle_interruptions("store-bench");
  if (testing::s3rver_script().empty()) {
    std::fprintf(stderr,
                 "store-bench: NEURON_CACHE_S3RVER is unset; run it through "
                 "tests/s3/run-s3-tests.sh (see the top of tests/bench/store_bench.cpp)\n");
    return 2;
  }
  return run_bench("store-bench", options.work,
                   [&](const fs::path& work) { return bench(options, work); });
}
