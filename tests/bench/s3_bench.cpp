// s3-bench: one large file through S3Store (multipart upload, ranged parallel download) beside
// boto3's upload_file / download_file (default TransferConfig) against the same s3rver, in the
// same run, each result checked byte for byte; prints the throughput and the ratio.
//   tests/s3/run-s3-tests.sh tests/s3 BUILD/tests/s3 node npm BUILD/tests/s3-bench [MIB=1024]
// Loopback numbers, against s3rver (Node, one process): they compare the clients' overhead on
// one machine, not S3's throughput.
#include <fcntl.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "neuron_cache/format/digest.h"
#include "neuron_cache/storage/s3_store.h"
#include "s3_server.h"
#include "test_support.h"

namespace {

using namespace neuron_cache;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string random_file(const testing::fs::path& path, uint64_t size) {
  std::mt19937_64 generator(1);
  Hasher hasher(HashAlgorithm::Sha256);
  std::string block(1 << 20, '\0');
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  for (uint64_t done = 0; done < size; done += block.size()) {
    for (size_t i = 0; i < block.size(); i += 8) {
      uint64_t v = generator();
      std::memcpy(&block[i], &v, 8);
    }
    if (::write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size())) std::exit(1);
    hasher.update(block);
  }
  ::close(fd);
  return hasher.hex_digest();
}

double boto3(const testing::S3Server& server, const std::string& mode, const std::string& key,
             const testing::fs::path& file) {
  for (const auto& [name, value] : server.env()) setenv(name.c_str(), value.c_str(), 1);
  std::string output;
  std::string command = std::string(NEURON_CACHE_PYTHON) + " " + NEURON_CACHE_TESTS_DIR +
                        "/s3/boto3_crosscheck.py " + mode + " " + server.bucket() + " " + key +
                        " " + file.string();
  if (testing::run_command(command, &output) != 0) {
    std::fprintf(stderr, "boto3 failed: %s\n", output.c_str());
    std::exit(1);
  }
  return std::stod(output.substr(output.find_last_of('\n', output.size() - 2) + 1));
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
  uint64_t size = mib << 20;
  testing::S3Server server;
  testing::TempDir dir;
  std::string sha = random_file(dir / "src", size);
  storage::S3Store store(server.url("bench"), server.access());

  auto start = Clock::now();
  store.commit({{storage::CommitOperation::Kind::Add, "ours", dir / "src"}}, "", std::nullopt);
  double our_up = seconds_since(start);
  auto entry = store.stat({"ours"}, "").at(0);
  int fd = ::open((dir / "back").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  std::vector<storage::DownloadRequest> requests{{"ours", fd, entry}};
  start = Clock::now();
  auto results = store.download("", requests);
  double our_down = seconds_since(start);
  ::close(fd);
  bool ok = results[0].ok && sha256_of_file(dir / "back") == sha;

  double boto_up = boto3(server, "time-upload", "bench/theirs", dir / "src");
  double boto_down = boto3(server, "time-download", "bench/theirs", dir / "back2");
  ok = ok && sha256_of_file(dir / "back2") == sha;

  double mb = static_cast<double>(size) / 1e6;
  std::printf("s3-bench: %llu MiB against s3rver on loopback (%s)\n",
              static_cast<unsigned long long>(mib), ok ? "byte for byte" : "WRONG");
  std::printf("  upload    S3Store %6.2f s %7.1f MB/s   boto3 %6.2f s %7.1f MB/s   ratio %.2f\n",
              our_up, mb / our_up, boto_up, mb / boto_up, boto_up / our_up);
  std::printf("  download  S3Store %6.2f s %7.1f MB/s   boto3 %6.2f s %7.1f MB/s   ratio %.2f\n",
              our_down, mb / our_down, boto_down, mb / boto_down, boto_down / our_down);
  std::printf("  (ratio: boto3's time / S3Store's; requests by S3Store: %llu)\n",
              static_cast<unsigned long long>(store.requests()));
  return ok ? 0 : 1;
}
