// transfer-bench: upload and download throughput of the Hub client against the local Hub server,
// with request counts, for one transfer at a time versus parallel transfers and ranged parts.
//   transfer-bench [FILES=16] [MIB_PER_FILE=8]
// Loopback numbers measure the client's own overhead (hashing, copying, scheduling), not a
// network: compare runs on the same machine.
#include <chrono>
#include <cstdio>
#include <random>

#include "hub_fixture.h"
#include "neuron_cache/hub/client.h"
#include "test_support.h"

namespace {

using namespace neuron_cache;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<hub::CommitOperation> make_files(const testing::TempDir& dir, int files, size_t size) {
  std::mt19937_64 generator(42);
  std::vector<hub::CommitOperation> operations;
  for (int i = 0; i < files; ++i) {
    std::string bytes(size, '\0');
    for (auto& c : bytes) c = static_cast<char>(generator());
    std::string name = "neuronxcc-2.21/MODULE_" + std::to_string(i) + "+d7cde3b5/model.neff";
    testing::write_file(dir / name, bytes);
    operations.push_back({hub::CommitOperation::Kind::Add, name, dir / name});
  }
  return operations;
}

void download_all(const testing::HubServer& server, const std::string& repo, size_t parallel,
                  uint64_t part_size, const char* label, uint64_t total) {
  hub::ClientOptions options;
  options.endpoint = server.url();
  options.token = testing::kHubWriteToken;
  options.parallel = parallel;
  options.part_size = part_size;
  hub::HubClient client(options);
  std::vector<hub::TreeEntry> entries;
  for (const auto& e : client.list_tree(repo)) {
    if (!e.is_directory && e.path.ends_with(".neff")) entries.push_back(e);
  }
  std::vector<std::FILE*> files;
  std::vector<hub::DownloadRequest> requests;
  for (const auto& e : entries) {
    files.push_back(std::tmpfile());
    requests.push_back({e.path, fileno(files.back()), e});
  }
  uint64_t before = client.http().stats().requests;
  auto start = Clock::now();
  auto results = client.download(repo, "main", requests);
  double elapsed = seconds_since(start);
  size_t ok = 0;
  for (const auto& r : results) ok += r.ok ? 1 : 0;
  for (auto* f : files) std::fclose(f);
  std::printf("%-34s %8.1f MiB/s  %6.3f s  %4llu requests  %zu/%zu verified\n", label,
              static_cast<double>(total) / (1 << 20) / elapsed, elapsed,
              static_cast<unsigned long long>(client.http().stats().requests - before), ok,
              results.size());
}

}  // namespace

int main(int argc, char** argv) {
  int files = argc > 1 ? std::atoi(argv[1]) : 16;
  size_t mib = argc > 2 ? static_cast<size_t>(std::atoi(argv[2])) : 8;
  uint64_t total = static_cast<uint64_t>(files) * mib << 20;
  testing::HubServer server;
  testing::TempDir dir;
  auto operations = make_files(dir, files, mib << 20);
  hub::ClientOptions options;
  options.endpoint = server.url();
  options.token = testing::kHubWriteToken;
  hub::HubClient client(options);
  std::string repo = client.create_repo("bench", "", true);
  auto start = Clock::now();
  hub::CommitResult commit = client.commit(repo, operations, "bench", std::nullopt);
  double upload = seconds_since(start);
  std::printf("files: %d x %zu MiB = %llu MiB\n", files, mib,
              static_cast<unsigned long long>(total >> 20));
  std::printf("%-34s %8.1f MiB/s  %6.3f s  %4llu requests  %zu LFS objects\n",
              "upload (one commit, 8 parallel)", static_cast<double>(total) / (1 << 20) / upload,
              upload, static_cast<unsigned long long>(client.http().stats().requests),
              commit.lfs_uploaded);
  download_all(server, repo, 1, 1ull << 40, "download, 1 at a time", total);
  download_all(server, repo, 8, 1ull << 40, "download, 8 parallel", total);
  download_all(server, repo, 8, 2 << 20, "download, 8 parallel, 2 MiB parts", total);
  start = Clock::now();
  hub::CommitResult again = client.commit(repo, operations, "bench again", std::nullopt);
  std::printf("%-34s %8s       %6.3f s  %zu unchanged, committed: %s\n",
              "re-upload of the same files", "", seconds_since(start), again.unchanged,
              again.committed ? "yes" : "no");
  return 0;
}
