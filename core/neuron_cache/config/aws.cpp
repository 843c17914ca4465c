#include "neuron_cache/config/aws.h"

#include <cctype>
#include <cstdlib>
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
  std::filesystem::path credentials_path;  // empty when HOME is unset and no variable names it
  std::filesystem::path config_path;
  std::filesystem::path home;
};

// The same files, read for another profile (a source_profile) or section ("sso-session X").
Files other_section(const Files& files, const std::string& name) {
  Files other = files;
  other.profile = name;
  other.profile_origin = "source_profile";
  other.credentials = {files.credentials.path, false, std::nullopt};
  other.config = {files.config.path, false, std::nullopt};
  if (!files.credentials_path.empty())
    other.credentials = read_profile(files.credentials_path, name, false);
  if (!files.config_path.empty()) other.config = read_profile(files.config_path, name, true);
  return other;
}

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
  files.credentials_path = credentials;
  files.config_path = config;
  files.home = home;
  if (!credentials.empty()) files.credentials = read_profile(credentials, files.profile, false);
  if (!config.empty()) files.config = read_profile(config, files.profile, true);
  if (credentials.empty()) files.credentials.path = "~/.aws/credentials (HOME is unset)";
  if (config.empty()) files.config.path = "~/.aws/config (HOME is unset)";
  return files;
}

std::optional<std::string> value_of(const Files& files, const std::string& key) {
  auto found = profile_value(files.credentials, files.config, files.profile, key);
  if (!found) return std::nullopt;
  return found->first;
}

std::string origin_of(const Files& files, const std::string& key) {
  auto found = profile_value(files.credentials, files.config, files.profile, key);
  return found ? found->second : "";
}

// Whether a variable says yes the way the AWS CLI's boolean variables do.
bool says_yes(const Environment& env, const std::string& name) {
  std::string value = env.get(name).value_or("");
  for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return value == "yes" || value == "true" || value == "1";
}

std::shared_ptr<AwsSource> source_of(AwsSourceKind kind, std::string origin) {
  auto source = std::make_shared<AwsSource>();
  source->kind = kind;
  source->origin = std::move(origin);
  return source;
}

// Keys of one of the files' profile section, as botocore reads them file by file.
std::shared_ptr<AwsSource> keys_in(const ProfileFile& file, const std::string& profile) {
  if (!file.profile) return nullptr;
  auto id = file.profile->find("aws_access_key_id");
  auto secret = file.profile->find("aws_secret_access_key");
  if (id == file.profile->end() || secret == file.profile->end()) return nullptr;
  auto source = source_of(AwsSourceKind::Keys, origin_in(file, profile));
  source->access_key_id = id->second;
  source->secret_access_key = secret->second;
  if (auto token = file.profile->find("aws_session_token"); token != file.profile->end())
    source->session_token = token->second;
  return source;
}

std::shared_ptr<AwsSource> web_identity(const Environment& env, const Files& files) {
  std::optional<std::string> file = env.get("AWS_WEB_IDENTITY_TOKEN_FILE");
  std::optional<std::string> role = env.get("AWS_ROLE_ARN");
  std::string origin = file ? "AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN" : "";
  if (!file) file = value_of(files, "web_identity_token_file");
  if (!role) role = value_of(files, "role_arn");
  if (!file || !role) return nullptr;
  if (origin.empty()) origin = origin_of(files, "web_identity_token_file");
  auto source = source_of(AwsSourceKind::WebIdentity, origin);
  source->web_identity_token_file = *file;
  source->role_arn = *role;
  source->role_session_name =
      env.get("AWS_ROLE_SESSION_NAME").value_or(value_of(files, "role_session_name").value_or(""));
  return source;
}

std::shared_ptr<AwsSource> sso(const Files& files) {
  std::optional<std::string> session = value_of(files, "sso_session");
  std::optional<std::string> start_url = value_of(files, "sso_start_url");
  if (!session && !start_url) return nullptr;
  auto source =
      source_of(AwsSourceKind::Sso, origin_of(files, session ? "sso_session" : "sso_start_url"));
  source->sso_account_id = value_of(files, "sso_account_id").value_or("");
  source->sso_role_name = value_of(files, "sso_role_name").value_or("");
  source->sso_region = value_of(files, "sso_region").value_or("");
  source->sso_start_url = start_url.value_or("");
  if (session) {
    source->sso_session = *session;
    Files section = other_section(files, "sso-session " + *session);
    if (!section.config.profile) {
      throw input_error("profile '" + files.profile + "' names sso_session " + *session + ", but " +
                        files.config.path + " has no [sso-session " + *session +
                        "] section: run `aws configure sso` again");
    }
    source->sso_start_url = value_of(section, "sso_start_url").value_or("");
    source->sso_region = value_of(section, "sso_region").value_or(source->sso_region);
  }
  if (source->sso_account_id.empty() || source->sso_role_name.empty() ||
      source->sso_start_url.empty() || source->sso_region.empty()) {
    throw input_error("profile '" + files.profile + "' in " + files.config.path +
                      " is an SSO profile without all of sso_start_url, sso_region, "
                      "sso_account_id and sso_role_name: run `aws configure sso` again");
  }
  check_region(source->sso_region, source->origin);
  if (!files.home.empty()) source->sso_cache = files.home / ".aws" / "sso" / "cache";
  return source;
}

std::shared_ptr<AwsSource> container(const Environment& env) {
  std::string url;
  std::string origin;
  if (auto relative = env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")) {
    url = "http://169.254.170.2" + *relative;
    origin = "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI";
  } else if (auto full = env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI")) {
    url::refuse_userinfo(*full, "AWS_CONTAINER_CREDENTIALS_FULL_URI");
    url = *full;
    origin = "AWS_CONTAINER_CREDENTIALS_FULL_URI";
  } else {
    return nullptr;
  }
  auto source = source_of(AwsSourceKind::Container, origin);
  source->container_url = url;
  source->container_token_file = env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE").value_or("");
  source->container_token = env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN").value_or("");
  add_secret(source->container_token, kContainerTokenLabel);
  return source;
}

std::shared_ptr<AwsSource> instance_role(const Environment& env) {
  if (says_yes(env, "AWS_EC2_METADATA_DISABLED")) return nullptr;
  auto source = source_of(AwsSourceKind::InstanceRole, "the instance's role (IMDSv2)");
  if (auto endpoint = env.get("AWS_EC2_METADATA_SERVICE_ENDPOINT")) {
    source->imds_endpoint = checked_endpoint(*endpoint, "AWS_EC2_METADATA_SERVICE_ENDPOINT");
    source->origin += " at AWS_EC2_METADATA_SERVICE_ENDPOINT";
  } else {
    bool ipv6 = env.get("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE").value_or("") == "IPv6";
    source->imds_endpoint = ipv6 ? "http://[fd00:ec2::254]" : "http://169.254.169.254";
  }
  if (auto timeout = env.get("AWS_METADATA_SERVICE_TIMEOUT")) {
    char* end = nullptr;
    double seconds = std::strtod(timeout->c_str(), &end);
    if (end == timeout->c_str() || *end != '\0' || !(seconds > 0) || seconds > 60) {
      throw input_error("AWS_METADATA_SERVICE_TIMEOUT=" + *timeout +
                        " is not a number of seconds from 0 to 60: fix it");
    }
    source->imds_timeout_ms = static_cast<int64_t>(seconds * 1000);
  }
  return source;
}

constexpr int kMaxRoleChain = 4;

std::shared_ptr<AwsSource> profile_source(const Environment& env, const Files& files, int depth);

// A profile's role_arn with source_profile or credential_source: AssumeRole signed by that.
std::shared_ptr<AwsSource> assume_role(const Environment& env, const Files& files, int depth) {
  std::optional<std::string> role = value_of(files, "role_arn");
  std::optional<std::string> source_profile = value_of(files, "source_profile");
  std::optional<std::string> credential_source = value_of(files, "credential_source");
  if (!role || (!source_profile && !credential_source)) return nullptr;
  auto source = source_of(AwsSourceKind::AssumeRole, origin_of(files, "role_arn"));
  source->role_arn = *role;
  source->role_session_name = value_of(files, "role_session_name").value_or("");
  source->external_id = value_of(files, "external_id").value_or("");
  if (auto seconds = value_of(files, "duration_seconds")) {
    bool digits =
        seconds->size() <= 5 && seconds->find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoll(*seconds) < 900 || std::stoll(*seconds) > 43200) {
      throw input_error("duration_seconds in " + source->origin +
                        " is not a number of seconds from 900 to 43200: fix it");
    }
    source->duration_seconds = std::stoll(*seconds);
  }
  if (source_profile) {
    if (depth >= kMaxRoleChain) {
      throw input_error("profile '" + files.profile + "' chains more than " +
                        std::to_string(kMaxRoleChain) +
                        " roles through source_profile (a loop?): fix " + source->origin);
    }
    Files other = other_section(files, *source_profile);
    if (!other.credentials.profile && !other.config.profile) {
      throw input_error("source_profile " + *source_profile + " of " + source->origin +
                        " is in neither " + files.credentials.path + " nor " + files.config.path);
    }
    // The source profile's own keys, even when it names a role itself (as botocore does).
    std::shared_ptr<AwsSource> signer = keys_in(other.credentials, *source_profile);
    if (!signer && *source_profile != files.profile) signer = profile_source(env, other, depth + 1);
    if (!signer) signer = keys_in(other.config, *source_profile);
    if (!signer) {
      throw input_error("source_profile " + *source_profile + " of " + source->origin +
                        " has no credentials (keys, a role, SSO or credential_process)");
    }
    source->role_source = signer;
    return source;
  }
  std::shared_ptr<AwsSource> signer;
  if (*credential_source == "Environment") {
    auto key = env.get("AWS_ACCESS_KEY_ID");
    auto secret = env.get("AWS_SECRET_ACCESS_KEY");
    if (key && secret) {
      signer = source_of(AwsSourceKind::Keys, "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY");
      signer->access_key_id = *key;
      signer->secret_access_key = *secret;
      signer->session_token = env.get("AWS_SESSION_TOKEN").value_or("");
    }
  } else if (*credential_source == "Ec2InstanceMetadata") {
    signer = instance_role(env);
  } else if (*credential_source == "EcsContainer") {
    signer = container(env);
  } else {
    throw input_error("credential_source " + *credential_source + " in " + source->origin +
                      " is not one of Environment, Ec2InstanceMetadata, EcsContainer");
  }
  if (!signer) {
    throw input_error("credential_source " + *credential_source + " of " + source->origin +
                      " gives no credentials here (its variables are unset or "
                      "AWS_EC2_METADATA_DISABLED is set)");
  }
  source->role_source = signer;
  return source;
}

// What a profile configures, in botocore's order after the environment's keys: a role, web
// identity, SSO, the credentials file's keys, credential_process, the config file's keys.
std::shared_ptr<AwsSource> profile_source(const Environment& env, const Files& files, int depth) {
  if (auto role = assume_role(env, files, depth)) return role;
  if (auto identity = web_identity(env, files)) return identity;
  if (auto portal = sso(files)) return portal;
  if (auto keys = keys_in(files.credentials, files.profile)) return keys;
  if (auto command = value_of(files, "credential_process")) {
    auto source = source_of(AwsSourceKind::Process, origin_of(files, "credential_process"));
    source->process_command = *command;
    return source;
  }
  return keys_in(files.config, files.profile);
}

std::string no_credentials(const Files& files) {
  return "no AWS credentials for S3: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are unset, "
         "profile '" +
         files.profile + "' (" + files.profile_origin + ") configures none in " +
         describe_file(files.credentials, files.profile) + " nor " +
         describe_file(files.config, files.profile) +
         " (keys, role_arn, web identity, SSO, credential_process), no container endpoint is "
         "set (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI / _FULL_URI) and the instance metadata "
         "service is off (AWS_EC2_METADATA_DISABLED); set the variables or a profile "
         "(AWS_PROFILE picks it), or AWS_NO_SIGN_REQUEST=YES to read a public bucket unsigned";
}

void resolve_credentials(AwsAccess& access, const Environment& env, const Files& files) {
  if (says_yes(env, "AWS_NO_SIGN_REQUEST")) {
    access.source = source_of(AwsSourceKind::Anonymous, "AWS_NO_SIGN_REQUEST");
    access.credentials_origin = "none: AWS_NO_SIGN_REQUEST (unsigned reads, no writes)";
    return;
  }
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
  std::shared_ptr<AwsSource> source = profile_source(env, files, 0);
  if (!source) source = container(env);
  if (!source) source = instance_role(env);
  if (!source) throw input_error(no_credentials(files));
  if (source->kind == AwsSourceKind::Keys) {
    access.access_key_id = source->access_key_id;
    access.secret_access_key = source->secret_access_key;
    access.session_token = source->session_token;
    access.credentials_origin = source->origin;
    return;
  }
  access.credentials_origin = std::string(source_name(source->kind)) + " (" + source->origin + ")";
  access.source = std::move(source);
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

// The endpoint of another AWS service (STS, the SSO portal): its own variable, the global one,
// else AWS's host in `region`.
std::string service_endpoint(const Environment& env, const std::string& variable,
                             const std::string& host) {
  for (const std::string& name : {variable, std::string("AWS_ENDPOINT_URL")}) {
    if (auto endpoint = env.get(name)) return checked_endpoint(*endpoint, name);
  }
  return "https://" + host;
}

void add_source_secrets(const AwsSource* source) {
  for (; source != nullptr; source = source->role_source.get()) {
    add_secret(source->access_key_id, kAwsKeyIdLabel);
    add_secret(source->secret_access_key, kAwsSecretLabel);
    add_secret(source->session_token, kAwsSessionLabel);
  }
}

}  // namespace

std::string_view source_name(AwsSourceKind kind) {
  switch (kind) {
    case AwsSourceKind::Keys:
      return "keys";
    case AwsSourceKind::AssumeRole:
      return "assume-role";
    case AwsSourceKind::WebIdentity:
      return "web-identity";
    case AwsSourceKind::Sso:
      return "sso";
    case AwsSourceKind::Process:
      return "credential-process";
    case AwsSourceKind::Container:
      return "container";
    case AwsSourceKind::InstanceRole:
      return "instance-role";
    case AwsSourceKind::Anonymous:
      return "anonymous";
  }
  return "unknown";
}

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
  add_secret(access.access_key_id, kAwsKeyIdLabel);
  add_secret(access.secret_access_key, kAwsSecretLabel);
  add_secret(access.session_token, kAwsSessionLabel);
  add_source_secrets(access.source.get());
  resolve_region(access, env, files);
  if (access.region_origin == "default") access.region_from = instance_role(env);
  resolve_endpoint(access, env, files);
  access.sts_endpoint =
      service_endpoint(env, "AWS_ENDPOINT_URL_STS", "sts." + access.region + ".amazonaws.com");
  if (access.source && access.source->kind == AwsSourceKind::Sso) {
    access.sso_endpoint = service_endpoint(
        env, "AWS_ENDPOINT_URL_SSO", "portal.sso." + access.source->sso_region + ".amazonaws.com");
  }
  return access;
}

bool aws_path_style(const AwsAccess& access, const std::string& bucket) {
  return access.custom_endpoint || bucket.find('.') != std::string::npos;
}

}  // namespace neuron_cache::config
