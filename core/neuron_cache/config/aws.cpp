#include "neuron_cache/config/aws.h"

#include <cctype>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "neuron_cache/config/redact.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/url.h"

namespace neuron_cache::config {
namespace {

// The AWS CLI's files are a few KB; anything far larger is not one of them.
constexpr std::uintmax_t kMaxProfileFileBytes = 1u << 20;
// Region names are short ASCII words ("eu-central-1"): they become part of a host name and of
// libcurl's "aws:amz:<region>:s3", so nothing else may get through.
constexpr size_t kMaxRegionLength = 64;
constexpr size_t kMaxEndpointLength = 2048;

std::string trim(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  size_t end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

// One profile's keys, as read from one file.
using Profile = std::map<std::string, std::string>;

struct ProfileFile {
  std::string path;
  bool exists = false;
  std::optional<Profile> profile;  // the wanted profile, when the file has it
};

// The section a line "[...]" opens, in the file's own naming: the config file says
// "[profile NAME]" (but "[default]"), the credentials file "[NAME]".
std::string section_name(const std::string& header, bool config_file) {
  std::string name = trim(header.substr(1, header.size() - 2));
  if (config_file && name.rfind("profile ", 0) == 0) return trim(name.substr(8));
  return name;
}

// Reads the keys of `wanted` from an INI file of the AWS CLI. Indented lines belong to the key
// above them (a sub-section such as "s3 =\n  endpoint_url = ..."): kept as "s3.endpoint_url".
ProfileFile read_profile(const std::filesystem::path& path, const std::string& wanted,
                         bool config_file) {
  ProfileFile file{path.string(), false, std::nullopt};
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return file;
  file.exists = true;
  if (std::filesystem::file_size(path, ec) > kMaxProfileFileBytes || ec) {
    throw input_error("cannot use " + path.string() + ": it is not a readable AWS profile file " +
                      "of at most 1 MiB; fix it or point AWS_SHARED_CREDENTIALS_FILE / " +
                      "AWS_CONFIG_FILE elsewhere");
  }
  std::ifstream in(path);
  if (!in) throw input_error("cannot read " + path.string() + ": check its permissions");
  std::string line, current, parent;
  while (std::getline(in, line)) {
    bool indented = !line.empty() && (line[0] == ' ' || line[0] == '\t');
    std::string text = trim(line);
    if (text.empty() || text[0] == '#' || text[0] == ';') continue;
    if (text.front() == '[' && text.back() == ']') {
      current = section_name(text, config_file);
      if (current == wanted && !file.profile) file.profile.emplace();
      parent.clear();
      continue;
    }
    size_t equals = text.find('=');
    if (current != wanted || equals == std::string::npos) continue;
    std::string key = trim(text.substr(0, equals));
    std::string value = trim(text.substr(equals + 1));
    if (indented && !parent.empty()) {
      (*file.profile)[parent + "." + key] = value;
      continue;
    }
    parent = value.empty() ? key : "";
    if (!value.empty()) (*file.profile)[key] = value;
  }
  return file;
}

std::string origin_in(const ProfileFile& file, const std::string& profile) {
  return file.path + " [" + profile + "]";
}

// A value of the profile: the credentials file first, then the config file.
std::optional<std::pair<std::string, std::string>> profile_value(const ProfileFile& credentials,
                                                                 const ProfileFile& config,
                                                                 const std::string& profile,
                                                                 const std::string& key) {
  for (const ProfileFile* file : {&credentials, &config}) {
    if (!file->profile) continue;
    auto found = file->profile->find(key);
    if (found != file->profile->end() && !found->second.empty()) {
      return std::make_pair(found->second, origin_in(*file, profile));
    }
  }
  return std::nullopt;
}

std::string describe_file(const ProfileFile& file, const std::string& profile) {
  if (!file.exists) return file.path + " (no such file)";
  if (!file.profile) return file.path + " (no [" + profile + "] section)";
  return file.path + " (no keys in [" + profile + "])";
}

void check_region(const std::string& region, const std::string& origin) {
  bool ok = !region.empty() && region.size() <= kMaxRegionLength;
  for (char c : region) {
    ok = ok && (std::islower(static_cast<unsigned char>(c)) ||
                std::isdigit(static_cast<unsigned char>(c)) || c == '-');
  }
  if (!ok) {
    throw input_error("the AWS region from " + origin +
                      " is not a region name (lowercase letters, digits and '-', like "
                      "us-east-1): fix it");
  }
}

std::string checked_endpoint(std::string endpoint, const std::string& origin) {
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  url::refuse_userinfo(endpoint, "the S3 endpoint from " + origin);
  bool scheme = endpoint.rfind("http://", 0) == 0 || endpoint.rfind("https://", 0) == 0;
  size_t host = endpoint.find("://") + 3;
  bool ok = scheme && endpoint.size() > host && endpoint.size() <= kMaxEndpointLength &&
            endpoint.find_first_of("/?# \t\r\n", host) == std::string::npos;
  if (!ok) {
    throw input_error("the S3 endpoint from " + origin +
                      " is not a URL of the form http(s)://host[:port] (no path): fix it");
  }
  return endpoint;
}

struct Files {
  std::string profile;
  std::string profile_origin;
  ProfileFile credentials;
  ProfileFile config;
};

Files read_files(const Environment& env, const std::filesystem::path& home_given) {
  Files files;
  files.profile = env.get("AWS_PROFILE").value_or("default");
  files.profile_origin = env.get("AWS_PROFILE") ? "AWS_PROFILE" : "default";
  std::filesystem::path home = home_given;
  if (home.empty()) home = env.get("HOME").value_or("");
  auto file_of = [&](const char* variable, const char* name) -> std::filesystem::path {
    if (auto path = env.get(variable)) return *path;
    if (home.empty()) return {};
    return home / ".aws" / name;
  };
  std::filesystem::path credentials = file_of("AWS_SHARED_CREDENTIALS_FILE", "credentials");
  std::filesystem::path config = file_of("AWS_CONFIG_FILE", "config");
  if (!credentials.empty()) files.credentials = read_profile(credentials, files.profile, false);
  if (!config.empty()) files.config = read_profile(config, files.profile, true);
  if (credentials.empty()) files.credentials.path = "~/.aws/credentials (HOME is unset)";
  if (config.empty()) files.config.path = "~/.aws/config (HOME is unset)";
  return files;
}

void resolve_credentials(AwsAccess& access, const Environment& env, const Files& files) {
  auto key = env.get("AWS_ACCESS_KEY_ID");
  auto secret = env.get("AWS_SECRET_ACCESS_KEY");
  if (key && secret) {
    access.access_key_id = *key;
    access.secret_access_key = *secret;
    access.session_token = env.get("AWS_SESSION_TOKEN").value_or("");
    access.credentials_origin = "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY";
    if (!access.session_token.empty()) access.credentials_origin += ", AWS_SESSION_TOKEN";
    return;
  }
  if (key || secret) {
    throw input_error(std::string(key ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY") +
                      " is set but " + (key ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID") +
                      " is not: set both, or neither to use the profile files");
  }
  auto id = profile_value(files.credentials, files.config, files.profile, "aws_access_key_id");
  auto sec = profile_value(files.credentials, files.config, files.profile, "aws_secret_access_key");
  if (!id || !sec) {
    throw input_error(
        "no AWS credentials for S3: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are unset, and "
        "profile '" +
        files.profile + "' (" + files.profile_origin + ") has no aws_access_key_id and " +
        "aws_secret_access_key in " + describe_file(files.credentials, files.profile) + " nor " +
        describe_file(files.config, files.profile) +
        "; set the variables, or the keys in a profile (AWS_PROFILE picks it). Instance roles "
        "and SSO are not read: export their credentials first (`aws configure "
        "export-credentials --format env`)");
  }
  access.access_key_id = id->first;
  access.secret_access_key = sec->first;
  access.credentials_origin = id->second;
  if (auto token =
          profile_value(files.credentials, files.config, files.profile, "aws_session_token")) {
    access.session_token = token->first;
  }
}

void resolve_region(AwsAccess& access, const Environment& env, const Files& files) {
  for (const char* variable : {"AWS_REGION", "AWS_DEFAULT_REGION"}) {
    if (auto region = env.get(variable)) {
      access.region = *region;
      access.region_origin = variable;
      break;
    }
  }
  if (access.region.empty()) {
    if (auto region = profile_value(files.credentials, files.config, files.profile, "region")) {
      access.region = region->first;
      access.region_origin = region->second;
    }
  }
  if (access.region.empty()) {
    access.region = "us-east-1";
    access.region_origin = "default";
  }
  check_region(access.region, access.region_origin);
}

void resolve_endpoint(AwsAccess& access, const Environment& env, const Files& files) {
  for (const char* variable : {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}) {
    if (auto endpoint = env.get(variable)) {
      access.endpoint = checked_endpoint(*endpoint, variable);
      access.endpoint_origin = variable;
      access.custom_endpoint = true;
      return;
    }
  }
  for (const char* key : {"s3.endpoint_url", "endpoint_url"}) {
    if (auto endpoint = profile_value(files.credentials, files.config, files.profile, key)) {
      access.endpoint = checked_endpoint(endpoint->first, endpoint->second);
      access.endpoint_origin = endpoint->second;
      access.custom_endpoint = true;
      return;
    }
  }
  access.endpoint = "https://s3." + access.region + ".amazonaws.com";
  access.endpoint_origin = "default (from the region)";
}

}  // namespace

std::string AwsAccess::describe() const {
  std::ostringstream out;
  out << "credentials: " << credentials_origin
      << (session_token.empty() ? "" : " (temporary, with a session token)") << "\n"
      << "region: " << region << " (" << region_origin << ")\n"
      << "endpoint: " << endpoint << " (" << endpoint_origin << ")"
      << (custom_endpoint ? ", path-style requests" : "") << "\n";
  return out.str();
}

AwsAccess resolve_aws_access(const Environment& env, const std::filesystem::path& home) {
  Files files = read_files(env, home);
  AwsAccess access;
  resolve_credentials(access, env, files);
  // Masked by every writer from now on, even when read from a profile file. The key id is not a
  // secret to AWS, but AWS_ACCESS_KEY_ID is masked by its name: the same value, the same rule.
  add_secret(access.access_key_id);
  add_secret(access.secret_access_key);
  add_secret(access.session_token);
  resolve_region(access, env, files);
  resolve_endpoint(access, env, files);
  return access;
}

bool aws_path_style(const AwsAccess& access, const std::string& bucket) {
  return access.custom_endpoint || bucket.find('.') != std::string::npos;
}

}  // namespace neuron_cache::config
