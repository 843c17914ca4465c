#include "s3_server.h"

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <stdexcept>
#include <thread>

namespace neuron_cache::testing {
namespace {

using Clock = std::chrono::steady_clock;

bool wait_exit(pid_t pid, Clock::time_point deadline) {
  while (Clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

}  // namespace

std::string s3rver_script() {
  const char* script = std::getenv("NEURON_CACHE_S3RVER");
  return script == nullptr ? "" : script;
}

S3Server::S3Server(const std::string& bucket) : data_dir_(dir_ / "data"), bucket_(bucket) {
  std::string script = s3rver_script();
  if (script.empty()) throw std::runtime_error("NEURON_CACHE_S3RVER is unset");
  fs::create_directories(data_dir_);
  fs::path log = dir_ / "s3rver.log";
  const char* node = std::getenv("NEURON_CACHE_NODE");
  // s3rver 3.7.1 makes ListObjectsV2 continuation tokens with DES, which the OpenSSL 3 of
  // Node >= 17 only offers through its legacy provider: without it every second page is a 500.
  std::vector<std::string> args = {node != nullptr ? node : "node",
                                   "--openssl-legacy-provider",
                                   script,
                                   "--directory",
                                   data_dir_.string(),
                                   "--address",
                                   "127.0.0.1",
                                   "--port",
                                   "0",
                                   "--silent",
                                   "--configure-bucket",
                                   bucket_};
  try {
    pid_ = spawn_logged(args, log);
  } catch (const std::runtime_error& error) {
    throw std::runtime_error(std::string(error.what()) + " (s3rver)");
  }
  // s3rver prints "S3rver listening on 127.0.0.1:PORT" once the bucket exists and it listens.
  std::regex listening("listening on [0-9.]+:([0-9]+)");
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (true) {
    std::smatch match;
    std::string text = output();
    if (std::regex_search(text, match, listening)) {
      port_ = std::stoi(match[1]);
      return;
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("s3rver exited before it was ready:\n" + output());
    }
    if (Clock::now() > deadline) throw std::runtime_error("s3rver not ready in 20 s:\n" + text);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

S3Server::~S3Server() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  if (!wait_exit(pid_, Clock::now() + std::chrono::seconds(5))) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::string S3Server::endpoint() const {
  return "http://127.0.0.1:" + std::to_string(port_);
}

std::string S3Server::url(const std::string& prefix) const {
  return "s3://" + bucket_ + (prefix.empty() ? "" : "/" + prefix);
}

config::AwsAccess loopback_access(int port) {
  config::AwsAccess access;
  access.access_key_id = "KEY";
  access.secret_access_key = "SECRET";
  access.region = "us-east-1";
  access.endpoint = "http://127.0.0.1:" + std::to_string(port);
  access.custom_endpoint = true;
  return access;
}

config::AwsAccess S3Server::access() const {
  config::AwsAccess access;
  access.access_key_id = kS3Key;
  access.secret_access_key = kS3Secret;
  access.region = "us-east-1";
  access.endpoint = endpoint();
  access.custom_endpoint = true;
  access.credentials_origin = "the test's s3rver";
  return access;
}

std::vector<std::pair<std::string, std::string>> S3Server::env() const {
  return {{"AWS_ACCESS_KEY_ID", kS3Key},
          {"AWS_SECRET_ACCESS_KEY", kS3Secret},
          {"AWS_REGION", "us-east-1"},
          {"AWS_ENDPOINT_URL", endpoint()}};
}

std::string S3Server::output() const {
  try {
    return read_file(dir_ / "s3rver.log");
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace neuron_cache::testing
