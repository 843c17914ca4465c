// capture-bench: what a compile costs on top of the compiler itself (the staging cache, seeding,
// usage watch, capture and adoption) against the number of complete entries in the local cache.
//   capture-bench [ENTRIES=1000[,10000...]] [COMPILES=5]
// Each "compile" is a trivial stand-in run in this process, shaped like libneuronxla's: it reuses
// one cached entry (opens its model.neff through the staging cache), compiles one new entry
// (model.neff and model.done last) and writes one registry file. Everything else timed is
// overhead; it must not grow with ENTRIES. Rows: the first compile ever on the cache (it builds
// the seeded view), the first compile of a later process (a new SeedViews), the next compiles of
// that process, and the first compile after a reboot (the view is rebuilt, its old content
// deleted in the background: the wait for that at the end of the process is printed apart);
// with what seeding touched per compile (SeedStats).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "neuron_cache/compile/capture.h"
#include "neuron_cache/compile/seed_view.h"
#include "test_support.h"

namespace {

using namespace neuron_cache;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kCompiler = testing::kCompilerDir;
constexpr int kModels = 50;  // registry: one alias folder per model, one primary per 2 entries

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// CPU time of the process (all threads), in ms: what the overhead costs apart from waiting for
// a shared machine's CPUs and disk.
double cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6;
}

std::string module_name(const std::string& tag, int i) {
  return "MODULE_" + tag + std::to_string(100000000 + i) + "+d7cde3b5";
}

// N complete entries and a registry shaped like optimum-neuron's (primary files by arch digest,
// one alias folder per model).
void lay_out_cache(const fs::path& root, int entries) {
  for (int i = 0; i < entries; ++i)
    testing::make_entry(root, module_name("cached", i), testing::Kind::Success);
  fs::path registry = root / kCompiler / "0_REGISTRY" / "0.4.5";
  for (int i = 0; i < entries / 2; ++i) {
    std::string model = std::to_string(i % kModels);
    fs::path primary = registry / ("digest" + model) / (std::to_string(i) + ".json");
    testing::write_file(primary, "{\"i\": " + std::to_string(i) + "}");
    fs::path alias_dir = registry / "llama" / "org" / ("model" + model);
    if (!fs::exists(alias_dir)) {
      fs::create_directories(alias_dir);
      fs::create_symlink(primary, alias_dir / (std::to_string(i) + ".json"));
    }
  }
}

// What libneuronxla does for one hit and one miss, through the staging cache `url`.
void trivial_compile(const fs::path& url, const std::string& reused, const std::string& made) {
  std::ifstream neff(url / kCompiler / reused / "model.neff");
  std::stringstream bytes;
  bytes << neff.rdbuf();
  if (bytes.str().empty()) std::fprintf(stderr, "the reused entry %s is missing\n", reused.c_str());
  fs::path dir = url / kCompiler / made;
  fs::create_directories(dir);
  testing::write_file(dir / "model.hlo_module.pb", "hlo");
  testing::write_file(dir / "compile_flags.json", "[]");
  testing::write_file(dir / "model.neff", "neff-" + made);
  testing::write_file(dir / "model.done", "");
  testing::write_file(url / kCompiler / "0_REGISTRY" / "0.4.5" / "digest0" / (made + ".json"),
                      "{}");
}

struct Phases {
  double acquire = 0, compile = 0, collect = 0, adopt = 0, release = 0, cpu = 0;
  compile::SeedStats seeding;
  int count = 0;
  double overhead() const { return acquire + collect + adopt + release; }
  void add(const Phases& t) {
    acquire += t.acquire, compile += t.compile, collect += t.collect, adopt += t.adopt;
    release += t.release, cpu += t.cpu, ++count;
    seeding.full_listings += t.seeding.full_listings,
        seeding.names_listed += t.seeding.names_listed;
    seeding.entries_checked += t.seeding.entries_checked;
    seeding.links_made += t.seeding.links_made;
  }
};

compile::SeedStats minus(compile::SeedStats a, const compile::SeedStats& b) {
  a.full_listings -= b.full_listings, a.names_listed -= b.names_listed;
  a.entries_checked -= b.entries_checked, a.links_made -= b.links_made;
  return a;
}

Phases one_compile(compile::SeedViews& views, int entries, int n, bool& exact) {
  Phases t;
  compile::SeedStats before = views.stats();
  std::string reused = module_name("cached", (n * 7919) % entries);
  std::string made = module_name("new", n);
  double cpu_start = cpu_ms();
  auto start = Clock::now();
  {
    compile::CaptureCache capture(views, "bench");
    t.acquire = ms_since(start);
    double cpu_compile = cpu_ms();
    start = Clock::now();
    trivial_compile(capture.dir(), reused, made);
    t.compile = ms_since(start);
    cpu_start += cpu_ms() - cpu_compile;
    start = Clock::now();
    compile::CaptureResult result = capture.collect();
    t.collect = ms_since(start);
    start = Clock::now();
    capture.adopt(result);
    t.adopt = ms_since(start);
    exact = exact && result.used.size() == 1 && result.used[0].name == reused &&
            result.produced.size() == 1 && result.produced[0].name == made &&
            result.registry_files.size() == 1;
    start = Clock::now();
  }
  t.release = ms_since(start);
  t.cpu = cpu_ms() - cpu_start;
  t.seeding = minus(views.stats(), before);
  return t;
}

void print_row(const char* label, const Phases& p) {
  double n = std::max(1, p.count);
  std::printf(
      "  %-19s overhead %7.2f ms (CPU %6.2f) = acquire %7.2f + collect %5.2f + adopt %5.2f"
      " + release %5.2f | per compile: %.0f listings, %5.0f names, %5.0f entries checked,"
      " %5.0f links (the compile itself %.2f ms)\n",
      label, p.overhead() / n, p.cpu / n, p.acquire / n, p.collect / n, p.adopt / n, p.release / n,
      p.seeding.full_listings / n, p.seeding.names_listed / n, p.seeding.entries_checked / n,
      p.seeding.links_made / n, p.compile / n);
}

// What a reboot does to the views: their state files name another boot.
void forget_boot(const fs::path& root) {
  for (const auto& view : fs::directory_iterator(root / ".cache/huggingface/neuron-cache-work")) {
    fs::path state = view.path() / ".state";
    if (!fs::exists(state)) continue;
    std::ifstream in(state);
    std::stringstream text;
    text << in.rdbuf();
    std::string content = text.str();
    size_t boot = content.find("\nboot ");
    if (boot != std::string::npos) content.replace(boot + 6, 1, "X");
    testing::write_file(state, content);
  }
}

void bench(int entries, int compiles) {
  testing::TempDir tmp;
  fs::path root = tmp / "cache";
  auto start = Clock::now();
  lay_out_cache(root, entries);
  double layout = ms_since(start);
  Phases built, first, next;
  bool exact = true;
  {
    compile::SeedViews views(root);  // the first process: builds the view
    built.add(one_compile(views, entries, 0, exact));
  }
  {
    // A later process; making its SeedViews (watching the cache) counts in its first acquire.
    double cpu_start = cpu_ms();
    start = Clock::now();
    compile::SeedViews views(root);
    double setup = ms_since(start), setup_cpu = cpu_ms() - cpu_start;
    for (int n = 1; n <= compiles; ++n) {
      (n == 1 ? first : next).add(one_compile(views, entries, n, exact));
    }
    first.acquire += setup, first.cpu += setup_cpu;
  }
  Phases rebooted;
  double deleting = 0;
  {
    forget_boot(root);
    compile::SeedViews views(root);
    rebooted.add(one_compile(views, entries, compiles + 1, exact));
    start = Clock::now();
  }
  deleting = ms_since(start);
  std::printf("%7d entries (laid out in %.0f ms)  capture %s\n", entries, layout,
              exact ? "exact" : "WRONG");
  print_row("first compile ever", built);
  print_row("first of a process", first);
  if (compiles > 1) print_row("next compiles", next);
  print_row("after a reboot", rebooted);
  std::printf("  (the old view deleted in the background: %.0f ms waited at the process end)\n",
              deleting);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  std::stringstream list(argc > 1 ? argv[1] : "1000");
  for (std::string item; std::getline(list, item, ',');) sizes.push_back(std::atoi(item.c_str()));
  int compiles = argc > 2 ? std::atoi(argv[2]) : 5;
  for (int entries : sizes) {
    if (entries < 1 || compiles < 1) {
      std::fprintf(stderr, "usage: capture-bench [ENTRIES[,ENTRIES...]] [COMPILES]\n");
      return 2;
    }
    bench(entries, compiles);
  }
  return 0;
}
