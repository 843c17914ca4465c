// pipeline-bench: the main job at scale against the local Hub server: push N configurations in
// one commit, plan them from another machine (requests must not grow with N), prefetch them into
// an empty cache, and prefetch again (nothing may move).
//   pipeline-bench [CONFIGS=200] [MODULES_PER_CONFIG=3] [KIB_PER_NEFF=256]
#include <chrono>
#include <cstdio>
#include <random>

#include "format/artifact_index.h"
#include "format/cache_key.h"
#include "hub/client.h"
#include "hub_fixture.h"
#include "plan/plan.h"
#include "remote/prefetch.h"
#include "remote/push.h"
#include "remote/remote_index.h"
#include "store/local_index.h"
#include "test_support.h"

namespace {

using namespace neuron_cache;
namespace ai = artifact_index;
using Clock = std::chrono::steady_clock;

constexpr const char* kCompiler = "2.21.33363.0+82129205";

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

plan::Target target(int i) {
  plan::Target t;
  t.inputs = {"acme/model-" + std::to_string(i % 7),
              "llama",
              "text-generation",
              "bf16",
              1 + i % 8,
              128L << (i % 6),
              kCompiler,
              8,
              "trn1",
              {},
              std::string(40, 'a'),
              "0.4.5"};
  t.inputs.batch_size = 1 + i;  // every configuration distinct
  t.key = cache_key::key_of(t.inputs);
  t.configuration.name = "config-" + std::to_string(i);
  t.configuration.model_id = t.inputs.model_id;
  return t;
}

// Lays out one compiled configuration in the cache and records it in the local index.
void compile_fake(const LocalIndex& index, const plan::Target& t, int modules, size_t neff_bytes,
                  std::mt19937_64& random) {
  ai::Entry entry{t.key, t.inputs, t.configuration.name, {}, {}, 1800.0, "bench", ai::utc_now()};
  std::string compiler_dir = entry.compiler_dir();
  for (int m = 0; m < modules; ++m) {
    std::string name = "MODULE_" + t.key.substr(0, 16) + std::to_string(m) + "+d7517139";
    std::filesystem::path dir = index.cache().root() / compiler_dir / name;
    std::string neff(neff_bytes, '\0');
    for (auto& c : neff) c = static_cast<char>(random());
    testing::write_file(dir / "model.hlo_module.pb", neff.substr(0, 1024));
    testing::write_file(dir / "compile_flags.json", "[]");
    testing::write_file(dir / "model.neff", neff);
    testing::write_file(dir / "model.done", "");
    entry.modules.push_back(index.record_module(compiler_dir, name));
  }
  index.write(entry);
}

hub::HubClient make_client(const testing::HubServer& server) {
  hub::ClientOptions options;
  options.endpoint = server.url();
  options.token = testing::kHubWriteToken;
  return hub::HubClient(options);
}

void report(const char* label, double seconds, uint64_t requests, const std::string& detail) {
  std::printf("%-40s %7.3f s  %5llu requests  %s\n", label, seconds,
              static_cast<unsigned long long>(requests), detail.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  int configs = argc > 1 ? std::atoi(argv[1]) : 200;
  int modules = argc > 2 ? std::atoi(argv[2]) : 3;
  size_t kib = argc > 3 ? static_cast<size_t>(std::atoi(argv[3])) : 256;
  testing::HubServer server;
  testing::TempDir first, second;
  std::mt19937_64 random(7);
  std::vector<plan::Target> targets;
  for (int i = 0; i < configs; ++i) targets.push_back(target(i));

  LocalCache first_cache(first.path());
  LocalIndex first_index(first_cache);
  std::vector<ai::Entry> entries;
  for (const auto& t : targets) {
    compile_fake(first_index, t, modules, kib << 10, random);
    entries.push_back(*first_index.find(kCompiler, t.key));
  }
  uint64_t total = static_cast<uint64_t>(configs) * modules * (kib << 10);
  std::printf("%d configurations x %d modules x %zu KiB NEFF = %.1f MiB\n", configs, modules, kib,
              static_cast<double>(total) / (1 << 20));

  hub::HubClient client = make_client(server);
  std::string repo = client.create_repo("bench-cache", "", true);
  auto start = Clock::now();
  remote::PushResult pushed = remote::push(client, repo, first_index, entries);
  report("push (one commit)", seconds_since(start), client.http().stats().requests,
         std::to_string(pushed.pushed.size()) + " configurations, " +
             std::to_string(pushed.commit.bytes_uploaded >> 20) + " MiB sent");

  LocalCache second_cache(second.path());
  LocalIndex second_index(second_cache);
  for (int n : {1, configs / 10, configs}) {
    if (n < 1) continue;
    hub::HubClient fresh = make_client(server);
    std::vector<plan::Target> some(targets.begin(), targets.begin() + n);
    start = Clock::now();
    remote::RemoteIndex remote = remote::RemoteIndex::open(fresh, repo);
    plan::Plan plan = plan::make_plan(some, second_index, &remote, "");
    std::string label = "plan, " + std::to_string(n) + " configurations";
    report(label.c_str(), seconds_since(start), fresh.http().stats().requests,
           std::to_string(plan.count(plan::Status::Hub)) + " on the Hub");
  }

  for (const char* label : {"prefetch into an empty cache", "prefetch again"}) {
    hub::HubClient fresh = make_client(server);
    start = Clock::now();
    remote::RemoteIndex remote = remote::RemoteIndex::open(fresh, repo);
    plan::Plan plan = plan::make_plan(targets, second_index, &remote, "");
    std::vector<ai::Entry> hits;
    for (const auto& row : plan.rows) {
      if (row.status == plan::Status::Hub) hits.push_back(*row.entry);
    }
    remote::PrefetchResult fetched =
        remote::prefetch(fresh, repo, remote.revision(), second_index, hits);
    double seconds = seconds_since(start);
    char detail[160];
    std::snprintf(
        detail, sizeof detail, "%zu modules, %.1f MiB, %.1f MiB/s, %zu failed",
        fetched.modules_installed, static_cast<double>(fetched.bytes_downloaded) / (1 << 20),
        static_cast<double>(fetched.bytes_downloaded) / (1 << 20) / seconds, fetched.failed.size());
    report(label, seconds, fresh.http().stats().requests, detail);
  }
  return 0;
}
