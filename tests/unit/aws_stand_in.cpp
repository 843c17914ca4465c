#include "aws_stand_in.h"

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "neuron_cache/format/digest.h"
#include "neuron_cache/net/http.h"

namespace neuron_cache::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string tests_dir() {
  return NEURON_CACHE_TESTS_DIR;
}

}  // namespace

nlohmann::json AwsStandIn::example_config() {
  return nlohmann::json::parse(read_file(tests_dir() + "/aws/example-config.json"));
}

AwsStandIn::AwsStandIn(const nlohmann::json& config) : config_(config) {
  fs::path config_file = dir_ / "config.json";
  fs::path port_file = dir_ / "port";
  fs::path log = dir_ / "stand-in.log";
  write_file(config_file, config_.dump(2));
  std::vector<std::string> args = {NEURON_CACHE_PYTHON, tests_dir() + "/aws/aws_stand_in.py",
                                   "--config",          config_file.string(),
                                   "--port-file",       port_file.string()};
  pid_ = spawn_logged(args, log);
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!fs::exists(port_file)) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("the AWS stand-in exited:\n" + read_file(log));
    }
    if (Clock::now() > deadline) throw std::runtime_error("the AWS stand-in is not ready in 20 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  port_ = std::stoi(read_file(port_file));
}

AwsStandIn::~AwsStandIn() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  waitpid(pid_, nullptr, 0);
}

std::string AwsStandIn::url() const {
  return "http://127.0.0.1:" + std::to_string(port_);
}

nlohmann::json AwsStandIn::admin(const std::string& method, const std::string& path,
                                 const std::string& body) const {
  net::HttpEngine http({url(), ""});
  net::HttpRequest request{method, url() + path, {"Content-Type: application/json"}, body};
  request.send_token = false;
  net::HttpResponse response = http.perform(request);
  if (response.status != 200)
    throw std::runtime_error("stand-in " + path + ": HTTP " + std::to_string(response.status));
  return response.body.empty() ? nlohmann::json() : nlohmann::json::parse(response.body);
}

void AwsStandIn::fault(const std::string& endpoint, const std::string& mode, int times) {
  nlohmann::json body = {{"endpoint", endpoint}, {"mode", mode}};
  if (times > 0) body["times"] = times;
  if (mode == "slow") body["interval_seconds"] = 1;
  admin("POST", "/_admin/fault", body.dump());
}

nlohmann::json AwsStandIn::rotate() {
  return admin("POST", "/_admin/rotate", "{}");
}

nlohmann::json AwsStandIn::log() const {
  return admin("GET", "/_admin/log");
}

std::map<std::string, std::string> AwsStandIn::env_for(const std::string& source,
                                                       const fs::path& home) const {
  std::map<std::string, std::string> env{{"HOME", home.string()},
                                         {"AWS_EC2_METADATA_DISABLED", "true"},
                                         {"AWS_ENDPOINT_URL_STS", url()},
                                         {"AWS_ENDPOINT_URL_SSO", url()}};
  fs::create_directories(home / ".aws");
  if (source == "imds") {
    env["AWS_EC2_METADATA_DISABLED"] = "false";
    env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = url();
  } else if (source == "container") {
    env["AWS_CONTAINER_CREDENTIALS_FULL_URI"] =
        url() + config_["container"]["full_uri_path"].get<std::string>();
    write_file(home / "pod-token", config_["container"]["authorization_token"].get<std::string>());
    env["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"] = (home / "pod-token").string();
  } else if (source == "web_identity") {
    const auto& identity = config_["sts"]["web_identity"];
    write_file(home / "web-identity-token", identity["token"].get<std::string>());
    env["AWS_WEB_IDENTITY_TOKEN_FILE"] = (home / "web-identity-token").string();
    env["AWS_ROLE_ARN"] = identity["role_arn"];
    if (identity.contains("role_session_name"))
      env["AWS_ROLE_SESSION_NAME"] = identity["role_session_name"];
  } else if (source == "assume_role") {
    const auto& role = config_["sts"]["assume_role"];
    const auto& keys = role["source_credentials"];
    write_file(home / ".aws/credentials",
               "[ci-user]\naws_access_key_id = " + keys["AccessKeyId"].get<std::string>() +
                   "\naws_secret_access_key = " + keys["SecretAccessKey"].get<std::string>() +
                   "\n");
    write_file(home / ".aws/config",
               "[profile writer]\nrole_arn = " + role["role_arn"].get<std::string>() +
                   "\nsource_profile = ci-user\nregion = " + config_["region"].get<std::string>() +
                   "\n");
    env["AWS_PROFILE"] = "writer";
  } else if (source == "sso") {
    const auto& sso = config_["sso"];
    std::string session = sso["session_name"];
    write_file(home / ".aws/config",
               "[profile dev]\nsso_session = " + session +
                   "\nsso_account_id = " + sso["account_id"].get<std::string>() +
                   "\nsso_role_name = " + sso["role_name"].get<std::string>() + "\n[sso-session " +
                   session + "]\nsso_start_url = " + sso["start_url"].get<std::string>() +
                   "\nsso_region = " + sso["region"].get<std::string>() + "\n");
    nlohmann::json token = {{"accessToken", sso["access_token"]},
                            {"expiresAt", "2099-01-01T00:00:00Z"},
                            {"startUrl", sso["start_url"]},
                            {"region", sso["region"]}};
    write_file(home / ".aws/sso/cache" / (hash_hex(HashAlgorithm::Sha1, session) + ".json"),
               token.dump());
    env["AWS_PROFILE"] = "dev";
  } else if (source == "process") {
    write_file(home / "config.json", config_.dump());
    write_file(home / ".aws/config",
               "[profile helper]\ncredential_process = " + std::string(NEURON_CACHE_PYTHON) + " " +
                   tests_dir() + "/aws/credential_process.py " + (home / "config.json").string() +
                   "\n");
    env["AWS_PROFILE"] = "helper";
  } else {
    throw std::runtime_error("unknown AWS source " + source);
  }
  return env;
}

}  // namespace neuron_cache::testing
