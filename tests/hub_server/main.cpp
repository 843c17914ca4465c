// hub-server: the loopback Hugging Face Hub the neuron-cache tests run against. Usage and admin
// API: tests/README.md.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "blob_store.h"
#include "config.h"
#include "server.h"

namespace {

namespace fs = std::filesystem;
using neuron_cache::hub_server::Options;
using neuron_cache::hub_server::Server;

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

void write_ready_file(const fs::path& file, const Server& server) {
  if (file.empty()) return;
  nlohmann::json ready = {{"port", server.port()},
                          {"cdn_port", server.cdn_port()},
                          {"pid", getpid()},
                          {"url", "http://127.0.0.1:" + std::to_string(server.port())},
                          {"cdn_url", "http://127.0.0.1:" + std::to_string(server.cdn_port())}};
  // Tests poll for this file: it must appear complete or not at all.
  neuron_cache::hub_server::write_file_atomically(fs::absolute(file), ready.dump());
}

int serve(const Options& options, const fs::path& config_file, const fs::path& ready_file) {
  // SIGTERM/SIGINT are taken by sigwait below, in this thread, never asynchronously.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Server server(options, neuron_cache::hub_server::load_config(config_file));
  server.bind();
  write_ready_file(ready_file, server);
  std::cout << "hub-server: hub http://127.0.0.1:" << server.port()
            << ", cdn http://127.0.0.1:" << server.cdn_port() << ", data " << options.data_dir
            << std::endl;

  std::thread runner([&] {
    server.run();
    kill(getpid(), SIGTERM);  // wakes sigwait if the listeners ended on their own
  });
  runner.detach();
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  server.stop();
  // Requests in flight may finish (up to 2 s); idle keep-alive connections are simply cut. The
  // state on disk is always consistent (atomic renames under the state lock), so once no save
  // is running the process can end without waiting for httplib's workers.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (server.active_requests() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  auto lock = server.lock_state();
  std::cout << "hub-server: stopped" << std::endl;
  std::_Exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  fs::path config_file;
  fs::path ready_file;
  CLI::App app{
      "hub-server: a loopback Hugging Face Hub (API, resolve, LFS batch, NDJSON commits) with a "
      "second 'CDN' listener for signed LFS URLs, an access log and fault injection "
      "(/_admin/log, /_admin/faults). See tests/README.md."};
  app.add_option("--data", options.data_dir, "folder for blobs and repo state (created)")
      ->required();
  app.add_option("--config", config_file,
                 "users, tokens and repos (tests/hub_server/example-config.json)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--host", options.host, "listen address; only 127.0.0.1 is allowed")
      ->capture_default_str();
  app.add_option("--port", options.port, "hub port, 0 for a free one")->capture_default_str();
  app.add_option("--cdn-port", options.cdn_port, "CDN port, 0 for a free one")
      ->capture_default_str();
  app.add_option(
      "--ready-file", ready_file,
      "written atomically once listening: {\"port\",\"cdn_port\",\"pid\",\"url\",\"cdn_url\"}");
  app.add_option("--page-size", options.page_size, "tree/commits page size")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--lfs-threshold", options.lfs_threshold,
                 "preupload answers lfs for files larger than this (bytes)")
      ->capture_default_str();
  app.add_option("--multipart-chunk-size", options.multipart_chunk_size,
                 "chunk_size of multipart LFS uploads (bytes)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--multipart-threshold", options.multipart_threshold,
                 "LFS objects of at least this size upload in parts (bytes)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--api-quota", options.quotas.api,
                 "requests per window per token (per IP without one) in the api bucket; 0: none")
      ->capture_default_str();
  app.add_option("--resolvers-quota", options.quotas.resolvers,
                 "the same for file URLs (/resolve/, /raw/); 0: none")
      ->capture_default_str();
  app.add_option("--quota-window", options.quotas.window_seconds,
                 "seconds of the fixed window of the two quotas above (the Hub's: 300)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--commit-quota", options.quotas.commits,
                 "commits per repo per commit window, then 429 with Retry-After; 0: none")
      ->capture_default_str();
  app.add_option("--commit-window", options.quotas.commit_window_seconds,
                 "seconds of the commit quota's fixed window (the Hub's: an hour)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--storage-on-hub", options.storage_on_hub,
               "LFS upload URLs on the hub listener (same origin as the API), not the cdn");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);
    return code == 0 ? 0 : kExitUsage;
  }
  try {
    return serve(options, config_file, ready_file);
  } catch (const std::exception& error) {
    std::cerr << "hub-server: error: " << error.what() << "\n";
    return kExitFailure;
  }
}
