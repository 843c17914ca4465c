// Issue 23: each credential source against the loopback stand-ins (tests/aws, proven faithful by
// botocore in ctest aws_stand_ins): the same credentials botocore resolves, hostile answers
// bounded and never printed with a secret, refresh before expiry.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "aws_stand_in.h"
#include "neuron_cache/aws/credentials.h"
#include "neuron_cache/config/aws.h"
#include "neuron_cache/config/redact.h"
#include "neuron_cache/error.h"
#include "neuron_cache/storage/s3_store.h"

namespace neuron_cache {
namespace {

using nlohmann::json;
using testing::AwsStandIn;
using testing::TempDir;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

const json& expected_for(const json& config, const std::string& source) {
  if (source == "web_identity") return config["sts"]["web_identity"]["credentials"];
  if (source == "assume_role") return config["sts"]["assume_role"]["credentials"];
  return config[source]["credentials"];
}

config::AwsAccess access_for(const AwsStandIn& stand_in, const std::string& source,
                             const fs::path& home) {
  return config::resolve_aws_access(config::Environment(stand_in.env_for(source, home)));
}

// Every secret the stand-in's config holds: none may appear in a message.
std::vector<std::string> secrets_of(const json& value) {
  std::vector<std::string> out;
  if (value.is_object()) {
    for (const auto& [key, item] : value.items()) {
      if (item.is_string() &&
          (key == "SecretAccessKey" || key == "SessionToken" || key == "access_token" ||
           key == "authorization_token" || key == "token")) {
        out.push_back(item.get<std::string>());
      }
      for (auto& nested : secrets_of(item)) out.push_back(nested);
    }
  }
  return out;
}

TEST(AwsSources, EachSourceGivesWhatBotocoreResolves) {
  AwsStandIn stand_in;
  TempDir dir;
  using Kind = config::AwsSourceKind;
  const std::map<std::string, Kind> kinds{{"imds", Kind::InstanceRole},
                                          {"container", Kind::Container},
                                          {"web_identity", Kind::WebIdentity},
                                          {"assume_role", Kind::AssumeRole},
                                          {"sso", Kind::Sso},
                                          {"process", Kind::Process}};
  for (const auto& [source, kind] : kinds) {
    config::AwsAccess access = access_for(stand_in, source, dir / source);
    ASSERT_NE(access.source, nullptr) << source;
    EXPECT_EQ(access.source->kind, kind) << source;
    aws::Credentials got;
    try {
      got = aws::fetch(*access.source, access, {});
    } catch (const Error& error) {
      ADD_FAILURE() << source << ": " << error.what();
      continue;
    }
    const json& want = expected_for(stand_in.config(), source);
    EXPECT_EQ(got.access_key_id, want["AccessKeyId"]) << source;
    EXPECT_EQ(got.secret_access_key, want["SecretAccessKey"]) << source;
    EXPECT_EQ(got.session_token, want["SessionToken"]) << source;
    ASSERT_TRUE(got.expiration.has_value()) << source;
    EXPECT_GT(*got.expiration, std::chrono::system_clock::now()) << source;
    // Fetched at run time, they are known to every writer from now on, masked by their kind.
    EXPECT_EQ(config::redact("s=" + got.secret_access_key),
              "s=" + config::mask(got.secret_access_key, config::kAwsSecretLabel))
        << source;
    EXPECT_EQ(config::redact("t=" + got.session_token),
              "t=" + config::mask(got.session_token, config::kAwsSessionLabel))
        << source;
  }
  // And every token a source used on the way (the web identity token, the SSO access token,
  // the container's authorization token): none is written as it is.
  for (const std::string& secret : secrets_of(stand_in.config())) {
    if (secret.size() < 8) continue;  // too short to be treated as a secret (redact.h)
    EXPECT_EQ(config::redact(secret).find(secret), std::string::npos) << secret;
  }
  // The region of an instance whose credentials are its role's.
  config::AwsAccess instance = access_for(stand_in, "imds", dir / "region");
  ASSERT_NE(instance.region_from, nullptr);
  EXPECT_EQ(aws::instance_region(*instance.region_from, {}), stand_in.config()["region"]);
  // STS's AssumeRole checked the SigV4 signature made with the source profile's keys.
  bool signed_call = false;
  for (const auto& request : stand_in.log()) {
    if (request.value("action", "") == "AssumeRole") {
      signed_call = request["status"] == 200;
      std::vector<std::string> headers = request["headers"];
      EXPECT_NE(std::find(headers.begin(), headers.end(), "Authorization"), headers.end());
    }
  }
  EXPECT_TRUE(signed_call) << stand_in.log().dump();
}

// Huge, slow, malformed, expired, redirected and failing answers: each an Error within the
// bounds, none followed to another port, none quoting a secret.
TEST(AwsSources, HostileAnswersFailBoundedWithoutSecrets) {
  AwsStandIn stand_in;
  TempDir dir;
  aws::FetchOptions options;
  options.timeout = std::chrono::milliseconds(2000);
  options.imds_timeout = std::chrono::milliseconds(1000);
  std::vector<std::string> secrets = secrets_of(stand_in.config());
  const std::map<std::string, std::string> sources{
      {"imds", "imds"}, {"container", "container"}, {"sts", "web_identity"}, {"sso", "sso"}};
  for (const auto& [endpoint, source] : sources) {
    for (const std::string mode :
         {"huge", "slow", "malformed", "expired", "redirect", "status500"}) {
      if (mode == "slow" && endpoint != "imds" && endpoint != "sts") continue;  // same code path
      stand_in.fault(endpoint, mode);
      config::AwsAccess access = access_for(stand_in, source, dir / (endpoint + mode));
      auto start = Clock::now();
      std::string message;
      try {
        aws::fetch(*access.source, access, options);
      } catch (const Error& error) {
        message = error.what();
      }
      auto took = Clock::now() - start;
      std::string what = endpoint + " " + mode + ": " + message;
      EXPECT_FALSE(message.empty()) << endpoint << " " << mode << " was accepted";
      EXPECT_LT(took, std::chrono::seconds(20)) << what;
      for (const auto& secret : secrets) EXPECT_EQ(message.find(secret), std::string::npos) << what;
      stand_in.fault(endpoint, "none");
    }
  }
  for (const auto& request : stand_in.log()) {
    EXPECT_NE(request["listener"], "redirect-target") << "a redirect was followed: " << request;
  }
}

// Credentials that expire are fetched again before they do; a refresh that fails keeps the old
// ones while they still serve.
TEST(AwsSources, CredentialsAreFetchedAgainBeforeTheyExpire) {
  json config = AwsStandIn::example_config();
  config["container"]["expires_in_seconds"] = 4;
  AwsStandIn stand_in(config);
  TempDir dir;
  aws::CredentialProvider provider(access_for(stand_in, "container", dir.path()));
  aws::Credentials first = provider.current();
  json rotated = stand_in.rotate();
  EXPECT_EQ(provider.current().access_key_id, first.access_key_id) << "fresh: not asked again";
  std::this_thread::sleep_for(std::chrono::milliseconds(2300));  // past half their lifetime
  aws::Credentials second = provider.current();
  EXPECT_EQ(second.access_key_id, rotated["credentials"]["container"]["AccessKeyId"]);
  EXPECT_NE(second.access_key_id, first.access_key_id);
  stand_in.fault("container", "status500");
  std::this_thread::sleep_for(std::chrono::milliseconds(2300));
  EXPECT_EQ(provider.current().access_key_id, second.access_key_id)
      << "a failed refresh keeps credentials that still serve";
  EXPECT_TRUE(provider.describe().find("expires ") != std::string::npos) << provider.describe();
}

// A request made long before it is sent (a part of a large upload) is signed again when sent: with
// the credentials of then, and one session token header, not two.
TEST(AwsSources, ARequestMadeEarlyIsSignedWithTheCredentialsOfWhenItIsSent) {
  json config = AwsStandIn::example_config();
  config["container"]["expires_in_seconds"] = 2;
  AwsStandIn stand_in(config);
  TempDir dir;
  std::map<std::string, std::string> env = stand_in.env_for("container", dir.path());
  env["AWS_ENDPOINT_URL_S3"] = "http://127.0.0.1:1";
  storage::S3Store store("s3://bucket/p", config::resolve_aws_access(config::Environment(env)));
  net::HttpRequest request =
      store.signed_request("PUT", store.address().object_url("a"), "UNSIGNED-PAYLOAD");
  std::string first_key = request.aws_sigv4->key_id;
  json rotated = stand_in.rotate();
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // past half their lifetime
  store.sign_again(request);
  EXPECT_NE(request.aws_sigv4->key_id, first_key);
  EXPECT_EQ(request.aws_sigv4->key_id, rotated["credentials"]["container"]["AccessKeyId"]);
  size_t tokens = 0;
  for (const auto& header : request.headers) {
    if (header.starts_with("x-amz-security-token:")) {
      ++tokens;
      EXPECT_EQ(header, "x-amz-security-token: " +
                            rotated["credentials"]["container"]["SessionToken"].get<std::string>());
    }
  }
  EXPECT_EQ(tokens, 1u);
}

// An SSO session that `aws sso login` never started, or one that expired, says to log in.
TEST(AwsSources, AnExpiredSsoSessionSaysToLogIn) {
  AwsStandIn stand_in;
  TempDir dir;
  config::AwsAccess access = access_for(stand_in, "sso", dir.path());
  stand_in.fault("sso", "expired");
  try {
    aws::fetch(*access.source, access, {});
    FAIL() << "an expired session was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("aws sso login"), std::string::npos) << error.what();
  }
  fs::remove_all(dir / ".aws/sso/cache");
  try {
    aws::fetch(*access.source, access, {});
    FAIL() << "no cached token was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::Input);
    EXPECT_NE(std::string(error.what()).find("aws sso login"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace neuron_cache
