// capture-bench: what a compile costs on top of the compiler itself (the staging cache, seeding,
// usage watch, capture and adoption) against the number of complete entries in the local cache.
//   capture-bench [ENTRIES=1000[,10000...]] [COMPILES=5]
// Each "compile" is a trivial stand-in run in this process, shaped like libneuronxla's: it reuses
// one cached entry (opens its model.neff through the staging cache), compiles one new entry
// (model.neff and model.done last) and writes one registry file. Everything else timed is
// overhead; it must not grow with ENTRIES.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "compile/capture.h"
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
  double open = 0, seed = 0, compile = 0, collect = 0, adopt = 0, close = 0;
  double overhead() const { return open + seed + collect + adopt + close; }
};

Phases one_compile(const fs::path& root, int entries, int n, bool& exact) {
  Phases t;
  auto start = Clock::now();
  std::string reused = module_name("cached", (n * 7919) % entries);
  std::string made = module_name("new", n);
  {
    compile::CaptureCache capture(root, "bench");
    t.open = ms_since(start);
    start = Clock::now();
    capture.seed();
    t.seed = ms_since(start);
    start = Clock::now();
    trivial_compile(capture.dir(), reused, made);
    t.compile = ms_since(start);
    start = Clock::now();
    compile::CaptureResult result = capture.collect();
    t.collect = ms_since(start);
    start = Clock::now();
    capture.adopt(result);
    t.adopt = ms_since(start);
    exact = exact && result.used.size() == 1 && result.used[0].name == reused &&
            result.produced.size() == 1 && result.produced[0].name == made;
    start = Clock::now();
  }
  t.close = ms_since(start);
  return t;
}

void bench(int entries, int compiles) {
  testing::TempDir tmp;
  fs::path root = tmp / "cache";
  auto start = Clock::now();
  lay_out_cache(root, entries);
  double layout = ms_since(start);
  Phases first, next;
  bool exact = true;
  for (int n = 0; n < compiles; ++n) {
    Phases t = one_compile(root, entries, n, exact);
    Phases& sum = n == 0 ? first : next;
    sum.open += t.open, sum.seed += t.seed, sum.compile += t.compile, sum.collect += t.collect;
    sum.adopt += t.adopt, sum.close += t.close;
  }
  int rest = std::max(1, compiles - 1);
  std::printf("%7d entries (laid out in %.0f ms)  capture %s\n", entries, layout,
              exact ? "exact" : "WRONG");
  auto row = [](const char* label, const Phases& p, int count) {
    std::printf(
        "  %-14s overhead %8.2f ms = open %7.2f + seed %8.2f + collect %7.2f + adopt %6.2f"
        " + close %7.2f   (compile itself %.2f)\n",
        label, p.overhead() / count, p.open / count, p.seed / count, p.collect / count,
        p.adopt / count, p.close / count, p.compile / count);
  };
  row("first compile", first, 1);
  if (compiles > 1) row("next compiles", next, rest);
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
