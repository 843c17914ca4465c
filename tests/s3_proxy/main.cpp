// s3-proxy: a fault-injecting proxy in front of an S3-compatible server, for the S3 tests.
// Usage and control API: tests/s3_proxy/README.md.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "proxy.h"

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

int serve(const neuron_cache::s3_proxy::Options& options, const std::string& faults_file) {
  // SIGTERM/SIGINT are taken by sigwait below, in this thread, never asynchronously.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  neuron_cache::s3_proxy::Proxy proxy(options);
  if (!faults_file.empty()) {
    std::ifstream in(faults_file);
    if (!in) throw std::runtime_error("cannot read " + faults_file);
    proxy.faults().set(nlohmann::json::parse(in));
  }
  int port = proxy.bind();
  // The first line is what tests read: the port is the number after the last ':'.
  std::cout << "s3-proxy: http://127.0.0.1:" << port << " -> " << options.upstream << std::endl;
  std::thread runner([&] {
    proxy.run();
    kill(getpid(), SIGTERM);  // wakes sigwait if the listener ended on its own
  });
  runner.detach();
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  proxy.stop();
  std::cout << "s3-proxy: stopped" << std::endl;
  std::_Exit(0);  // requests that hang (the hang fault) are simply cut
}

}  // namespace

int main(int argc, char** argv) {
  neuron_cache::s3_proxy::Options options;
  std::string faults_file;
  CLI::App app{
      "s3-proxy: forwards requests unchanged to an S3-compatible server, with fault injection "
      "(/__proxy/faults), enforced conditional writes and request statistics (/__proxy/stats). "
      "See tests/s3_proxy/README.md."};
  app.add_option("--upstream", options.upstream, "http://host:port of the S3-compatible server")
      ->required();
  app.add_option("--host", options.host, "listen address; only 127.0.0.1 is allowed")
      ->capture_default_str();
  app.add_option("--port", options.port, "listen port, 0 for a free one")->capture_default_str();
  app.add_option("--faults", faults_file, "fault rules to start with (JSON)")
      ->check(CLI::ExistingFile);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);
    return code == 0 ? 0 : kExitUsage;
  }
  try {
    return serve(options, faults_file);
  } catch (const std::exception& error) {
    std::cerr << "s3-proxy: error: " << error.what() << "\n";
    return kExitFailure;
  }
}
