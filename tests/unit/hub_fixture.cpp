#include "hub_fixture.h"

#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace neuron_cache::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Waits for `pid` to exit until `deadline`; true when it did.
bool wait_exit(pid_t pid, Clock::time_point deadline) {
  while (Clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

}  // namespace

json HubServer::example_config() {
  return json::parse(
      read_file(fs::path(NEURON_CACHE_TESTS_DIR) / "hub_server" / "example-config.json"));
}

HubServer::HubServer(const json& config, const std::vector<std::string>& extra_args)
    : data_dir_(dir_ / "data") {
  write_file(dir_ / "config.json", config.dump(2));
  fs::path ready = dir_ / "ready.json";
  fs::path log = dir_ / "server.log";
  std::vector<std::string> args = {
      NEURON_CACHE_HUB_SERVER,         "--data",       data_dir_.string(), "--config",
      (dir_ / "config.json").string(), "--ready-file", ready.string()};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  try {
    pid_ = spawn_logged(args, log);
  } catch (const std::runtime_error& error) {
    throw std::runtime_error(std::string(error.what()) + " (is the hub-server target built?)");
  }
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!fs::exists(ready)) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("hub-server exited before it was ready:\n" + output());
    }
    if (Clock::now() > deadline) {
      throw std::runtime_error("hub-server was not ready within 10 s:\n" + output());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  json info = json::parse(read_file(ready));
  port_ = info.at("port").get<int>();
  cdn_port_ = info.at("cdn_port").get<int>();
}

HubServer::~HubServer() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  if (!wait_exit(pid_, Clock::now() + std::chrono::seconds(5))) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::string HubServer::url() const {
  return "http://127.0.0.1:" + std::to_string(port_);
}

std::string HubServer::cdn_url() const {
  return "http://127.0.0.1:" + std::to_string(cdn_port_);
}

std::string HubServer::output() const {
  try {
    return read_file(dir_ / "server.log");
  } catch (const std::exception&) {
    return "";
  }
}

json HubServer::admin(const std::string& method, const std::string& what,
                      const std::string& body) const {
  httplib::Client client(url());
  // Some tests set fault bodies of tens of MiB, which the server parses and describes back:
  // httplib's default 5 s read timeout failed such a call on a busy CI machine.
  client.set_read_timeout(60, 0);
  client.set_write_timeout(60, 0);
  std::string path = "/_admin/" + what;
  httplib::Result result = method == "GET"      ? client.Get(path)
                           : method == "DELETE" ? client.Delete(path)
                                                : client.Post(path, body, "application/json");
  if (!result) {
    throw std::runtime_error("hub-server admin " + method + " " + path +
                             " failed: " + httplib::to_string(result.error()));
  }
  if (result->status != 200) {
    throw std::runtime_error("hub-server admin " + method + " " + path + ": HTTP " +
                             std::to_string(result->status) + " " + result->body);
  }
  return json::parse(result->body);
}

json HubServer::access_log() const {
  return admin("GET", "log");
}

void HubServer::clear_log() const {
  admin("DELETE", "log");
}

void HubServer::set_faults(const json& rules) const {
  admin("POST", "faults", rules.dump());
}

void HubServer::clear_faults() const {
  admin("DELETE", "faults");
}

json HubServer::faults() const {
  return admin("GET", "faults");
}

nlohmann::json cache_hub_config(
    const std::string& cache_repo,
    const std::vector<std::pair<std::string, std::map<std::string, std::string>>>& models) {
  nlohmann::json repos = nlohmann::json::array();
  repos.push_back({{"id", cache_repo},
                   {"private", false},
                   {"files", {{"README.md", "# acme neuron cache\n"}}}});
  for (const auto& [id, files] : models)
    repos.push_back({{"id", id}, {"private", false}, {"files", files}});
  auto token = [](const char* value, const char* role, const char* name) {
    return nlohmann::json{{"token", value}, {"user", "alice"}, {"role", role}, {"name", name}};
  };
  return {{"users", nlohmann::json::array({{{"name", "alice"}, {"orgs", {"acme"}}}})},
          {"tokens", nlohmann::json::array({token(kHubWriteToken, "write", "alice-ci"),
                                            token(kHubReadToken, "read", "alice-read")})},
          {"repos", repos}};
}

std::string stand_in_compile_command() {
  return std::string("\"") + STAND_IN_EXPORT +
         " --model {model_id} --task {task} --batch_size {batch_size} --sequence_length "
         "{sequence_length} --num_cores {num_cores} --auto_cast_type {precision} --instance_type "
         "{instance_type} {output}\"";
}

}  // namespace neuron_cache::testing
