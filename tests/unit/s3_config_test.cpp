// AWS access resolution (config/aws.h): the standard order of variables and profile files, table
// driven over a temporary HOME.
#include <gtest/gtest.h>

#include "neuron_cache/config/aws.h"
#include "neuron_cache/config/redact.h"
#include "neuron_cache/config/settings.h"
#include "neuron_cache/error.h"
#include "neuron_cache/storage/s3_store.h"
#include "test_support.h"

namespace neuron_cache {
namespace {

using testing::TempDir;
using testing::write_file;

struct Case {
  const char* name;
  std::map<std::string, std::string> env;
  const char* credentials;  // ~/.aws/credentials, or nullptr for none
  const char* config;       // ~/.aws/config, or nullptr
  // Expected: key id, session token, region, endpoint, path-style, origin fragment.
  const char* key;
  const char* token;
  const char* region;
  const char* endpoint;
  bool custom;
  const char* origin;
};

const char* kCreds =
    "[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = filesecret\n"
    "[work]\naws_access_key_id=WORKKEY\naws_secret_access_key=worksecret\n"
    "aws_session_token=worktoken\n";
const char* kConfig =
    "[default]\nregion = eu-west-3\n"
    "[profile work]\nregion=ap-south-1\nendpoint_url = http://minio.local:9000/\n"
    "[profile cfgonly]\naws_access_key_id=CFGKEY\naws_secret_access_key=cfgsecret\n"
    "s3 =\n  endpoint_url = https://s3.example.com\n";

const Case kCases[] = {
    {"env keys win over files",
     {{"AWS_ACCESS_KEY_ID", "ENVKEY"}, {"AWS_SECRET_ACCESS_KEY", "envsecret"}},
     kCreds,
     kConfig,
     "ENVKEY",
     "",
     "eu-west-3",
     "https://s3.eu-west-3.amazonaws.com",
     false,
     "AWS_ACCESS_KEY_ID"},
    {"env session token",
     {{"AWS_ACCESS_KEY_ID", "ENVKEY"},
      {"AWS_SECRET_ACCESS_KEY", "envsecret"},
      {"AWS_SESSION_TOKEN", "envtoken"}},
     nullptr,
     nullptr,
     "ENVKEY",
     "envtoken",
     "us-east-1",
     "https://s3.us-east-1.amazonaws.com",
     false,
     "AWS_SESSION_TOKEN"},
    {"default profile from the credentials file, region from config",
     {},
     kCreds,
     kConfig,
     "FILEKEY",
     "",
     "eu-west-3",
     "https://s3.eu-west-3.amazonaws.com",
     false,
     "credentials [default]"},
    {"AWS_PROFILE picks a profile; its endpoint_url makes it path-style",
     {{"AWS_PROFILE", "work"}},
     kCreds,
     kConfig,
     "WORKKEY",
     "worktoken",
     "ap-south-1",
     "http://minio.local:9000",
     true,
     "credentials [work]"},
    {"keys in the config file only; s3 sub-section endpoint",
     {{"AWS_PROFILE", "cfgonly"}},
     kCreds,
     kConfig,
     "CFGKEY",
     "",
     "us-east-1",
     "https://s3.example.com",
     true,
     "config [cfgonly]"},
    {"AWS_REGION beats AWS_DEFAULT_REGION and the profile",
     {{"AWS_REGION", "us-west-2"}, {"AWS_DEFAULT_REGION", "eu-north-1"}},
     kCreds,
     kConfig,
     "FILEKEY",
     "",
     "us-west-2",
     "https://s3.us-west-2.amazonaws.com",
     false,
     "credentials"},
    {"AWS_DEFAULT_REGION beats the profile",
     {{"AWS_DEFAULT_REGION", "eu-north-1"}},
     kCreds,
     kConfig,
     "FILEKEY",
     "",
     "eu-north-1",
     "https://s3.eu-north-1.amazonaws.com",
     false,
     "credentials"},
    {"AWS_ENDPOINT_URL_S3 beats AWS_ENDPOINT_URL and the profile",
     {{"AWS_PROFILE", "work"},
      {"AWS_ENDPOINT_URL_S3", "http://127.0.0.1:4568"},
      {"AWS_ENDPOINT_URL", "http://other:1"}},
     kCreds,
     kConfig,
     "WORKKEY",
     "worktoken",
     "ap-south-1",
     "http://127.0.0.1:4568",
     true,
     "credentials [work]"},
    {"AWS_ENDPOINT_URL beats the profile",
     {{"AWS_PROFILE", "work"}, {"AWS_ENDPOINT_URL", "https://r2.example.com/"}},
     kCreds,
     kConfig,
     "WORKKEY",
     "worktoken",
     "ap-south-1",
     "https://r2.example.com",
     true,
     "credentials [work]"},
};

TEST(AwsAccess, ResolvesInTheStandardOrder) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    TempDir home;
    if (c.credentials != nullptr) write_file(home / ".aws/credentials", c.credentials);
    if (c.config != nullptr) write_file(home / ".aws/config", c.config);
    config::Environment env(c.env);
    env.set("HOME", home.path().string());
    config::AwsAccess access = config::resolve_aws_access(env);
    EXPECT_EQ(access.access_key_id, c.key);
    EXPECT_EQ(access.session_token, c.token);
    EXPECT_EQ(access.region, c.region);
    EXPECT_EQ(access.endpoint, c.endpoint);
    EXPECT_EQ(access.custom_endpoint, c.custom);
    EXPECT_NE(access.describe().find(c.origin), std::string::npos) << access.describe();
    EXPECT_FALSE(access.secret_access_key.empty());
    // The description names origins, never the secrets.
    EXPECT_EQ(access.describe().find(access.secret_access_key), std::string::npos);
    if (!access.session_token.empty()) {
      EXPECT_EQ(access.describe().find(access.session_token), std::string::npos);
    }
  }
}

TEST(AwsAccess, FilesNamedByVariables) {
  TempDir dir;
  write_file(dir / "c", "[p]\naws_access_key_id=K\naws_secret_access_key=S\n");
  write_file(dir / "g", "[profile p]\nregion=sa-east-1\n");
  config::Environment env({{"AWS_SHARED_CREDENTIALS_FILE", (dir / "c").string()},
                           {"AWS_CONFIG_FILE", (dir / "g").string()},
                           {"AWS_PROFILE", "p"}});
  config::AwsAccess access = config::resolve_aws_access(env, dir / "nohome");
  EXPECT_EQ(access.access_key_id, "K");
  EXPECT_EQ(access.region, "sa-east-1");
}

// Credentials read from a profile file are secrets every writer masks, as those of variables.
TEST(AwsAccess, TheSecretsReadAreMaskedEverywhere) {
  TempDir dir;
  write_file(dir / "c",
             "[p]\naws_access_key_id=AKIAPROFILEKEYID0042\n"
             "aws_secret_access_key=profile/secret/0123456789\n"
             "aws_session_token=profile-session-token-42\n");
  config::Environment env(
      {{"AWS_SHARED_CREDENTIALS_FILE", (dir / "c").string()}, {"AWS_PROFILE", "p"}});
  config::resolve_aws_access(env, dir / "nohome");
  EXPECT_EQ(config::redact("s=profile/secret/0123456789 t=PROFILE-SESSION-TOKEN-42"),
            "s=aws_secret_****6789 t=aws_session_****n-42");
  // The key id too: from the variable AWS_ACCESS_KEY_ID its name has it masked, so from a file.
  EXPECT_EQ(config::redact("id=AKIAPROFILEKEYID0042"), "id=aws_key_id_****0042");
}

TEST(AwsAccess, MissingCredentialsSayWhereItLooked) {
  TempDir home;
  write_file(home / ".aws/config", "[default]\nregion=us-east-2\n");
  config::Environment env({{"HOME", home.path().string()},
                           {"AWS_PROFILE", "nope"},
                           {"AWS_EC2_METADATA_DISABLED", "true"}});
  try {
    config::resolve_aws_access(env);
    FAIL() << "no credentials must throw";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("AWS_ACCESS_KEY_ID"), std::string::npos) << what;
    EXPECT_NE(what.find((home / ".aws/credentials").string() + " (no such file)"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("no [nope] section"), std::string::npos) << what;
    EXPECT_NE(what.find("AWS_PROFILE"), std::string::npos) << what;
    EXPECT_NE(what.find("AWS_NO_SIGN_REQUEST=YES"), std::string::npos) << what;
  }
}

// The source of the credentials is decided from variables and files alone, in botocore's order
// (botocore.credentials.create_credential_resolver): each case sets the source it names and
// everything that comes after it in the chain, and that source must win.
TEST(AwsAccess, TheSourceFollowsBotocoresChain) {
  using Kind = config::AwsSourceKind;
  TempDir home;
  write_file(home / ".aws/credentials",
             "[default]\naws_access_key_id=FILEKEY\naws_secret_access_key=filesecret\n"
             "[base]\naws_access_key_id=BASEKEY\naws_secret_access_key=basesecret\n");
  write_file(home / ".aws/config",
             "[default]\ncredential_process = /bin/helper --json\n"
             "aws_access_key_id=CFGKEY\naws_secret_access_key=cfgsecret\n"
             "[profile role]\nrole_arn=arn:aws:iam::123456789012:role/r\nsource_profile=base\n"
             "external_id=ext\nduration_seconds=1800\n"
             "[profile chained]\nrole_arn=arn:aws:iam::123456789012:role/c\nsource_profile=role\n"
             "[profile loop]\nrole_arn=arn:aws:iam::1:role/l\nsource_profile=loop2\n"
             "[profile loop2]\nrole_arn=arn:aws:iam::1:role/l2\nsource_profile=loop\n"
             "[profile envrole]\nrole_arn=arn:aws:iam::1:role/e\ncredential_source=Environment\n"
             "[profile odd]\nrole_arn=arn:aws:iam::1:role/o\ncredential_source=Elsewhere\n"
             "[profile sso]\nsso_session=corp\nsso_account_id=111122223333\n"
             "sso_role_name=Dev\n"
             "[sso-session corp]\nsso_start_url=https://corp.awsapps.com/start\n"
             "sso_region=eu-west-1\n"
             "[profile process]\ncredential_process = \"/opt/my helper\" --profile 'a b'\n"
             "[profile cfgkeys]\naws_access_key_id=CFGONLY\naws_secret_access_key=s\n");
  auto resolve = [&](std::map<std::string, std::string> vars) {
    vars["HOME"] = home.path().string();
    return config::resolve_aws_access(config::Environment(vars));
  };
  // The default profile's credentials file keys beat its credential_process and config keys.
  config::AwsAccess keys = resolve({});
  EXPECT_EQ(keys.source, nullptr);
  EXPECT_EQ(keys.access_key_id, "FILEKEY");
  // Variables beat every profile.
  EXPECT_EQ(
      resolve({{"AWS_ACCESS_KEY_ID", "E"}, {"AWS_SECRET_ACCESS_KEY", "S"}, {"AWS_PROFILE", "role"}})
          .access_key_id,
      "E");
  config::AwsAccess role = resolve({{"AWS_PROFILE", "role"},
                                    {"AWS_WEB_IDENTITY_TOKEN_FILE", "/t"},
                                    {"AWS_ROLE_ARN", "arn:aws:iam::1:role/w"}});
  ASSERT_NE(role.source, nullptr);
  EXPECT_EQ(role.source->kind, Kind::AssumeRole);
  EXPECT_EQ(role.source->role_arn, "arn:aws:iam::123456789012:role/r");
  EXPECT_EQ(role.source->external_id, "ext");
  EXPECT_EQ(role.source->duration_seconds, 1800);
  ASSERT_NE(role.source->role_source, nullptr);
  EXPECT_EQ(role.source->role_source->kind, Kind::Keys);
  EXPECT_EQ(role.source->role_source->access_key_id, "BASEKEY");
  EXPECT_EQ(role.sts_endpoint, "https://sts.us-east-1.amazonaws.com");
  config::AwsAccess chained = resolve({{"AWS_PROFILE", "chained"}});
  ASSERT_NE(chained.source, nullptr);
  ASSERT_NE(chained.source->role_source, nullptr);
  EXPECT_EQ(chained.source->role_source->kind, Kind::AssumeRole);
  EXPECT_THROW(resolve({{"AWS_PROFILE", "loop"}}), Error);
  EXPECT_THROW(resolve({{"AWS_PROFILE", "odd"}}), Error);
  // credential_source=Environment without the variables (with them, they win before the role).
  EXPECT_THROW(resolve({{"AWS_PROFILE", "envrole"}}), Error);
  config::AwsAccess identity = resolve({{"AWS_PROFILE", "nope"},
                                        {"AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token"},
                                        {"AWS_ROLE_ARN", "arn:aws:iam::1:role/w"},
                                        {"AWS_ROLE_SESSION_NAME", "ci"},
                                        {"AWS_ENDPOINT_URL_STS", "http://127.0.0.1:9"},
                                        {"AWS_REGION", "eu-west-3"}});
  ASSERT_NE(identity.source, nullptr);
  EXPECT_EQ(identity.source->kind, Kind::WebIdentity);
  EXPECT_EQ(identity.source->web_identity_token_file, "/var/run/token");
  EXPECT_EQ(identity.source->role_session_name, "ci");
  EXPECT_EQ(identity.sts_endpoint, "http://127.0.0.1:9");
  config::AwsAccess sso = resolve({{"AWS_PROFILE", "sso"}});
  ASSERT_NE(sso.source, nullptr);
  EXPECT_EQ(sso.source->kind, Kind::Sso);
  EXPECT_EQ(sso.source->sso_start_url, "https://corp.awsapps.com/start");
  EXPECT_EQ(sso.source->sso_region, "eu-west-1");
  EXPECT_EQ(sso.sso_endpoint, "https://portal.sso.eu-west-1.amazonaws.com");
  EXPECT_EQ(sso.source->sso_cache, home.path() / ".aws/sso/cache");
  config::AwsAccess process = resolve({{"AWS_PROFILE", "process"}});
  ASSERT_NE(process.source, nullptr);
  EXPECT_EQ(process.source->kind, Kind::Process);
  EXPECT_EQ(process.source->process_command, "\"/opt/my helper\" --profile 'a b'");
  EXPECT_EQ(resolve({{"AWS_PROFILE", "cfgkeys"}}).access_key_id, "CFGONLY");
  config::AwsAccess container =
      resolve({{"AWS_PROFILE", "nope"}, {"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/creds/x"}});
  ASSERT_NE(container.source, nullptr);
  EXPECT_EQ(container.source->kind, Kind::Container);
  EXPECT_EQ(container.source->container_url, "http://169.254.170.2/v2/creds/x");
  config::AwsAccess instance = resolve({{"AWS_PROFILE", "nope"}});
  ASSERT_NE(instance.source, nullptr);
  EXPECT_EQ(instance.source->kind, Kind::InstanceRole);
  EXPECT_EQ(instance.source->imds_endpoint, "http://169.254.169.254");
  ASSERT_NE(instance.region_from, nullptr);
  EXPECT_EQ(instance.region_from->imds_endpoint, "http://169.254.169.254");
  EXPECT_EQ(resolve({{"AWS_PROFILE", "nope"},
                     {"AWS_EC2_METADATA_DISABLED", "true"},
                     {"AWS_ACCESS_KEY_ID", "K"},
                     {"AWS_SECRET_ACCESS_KEY", "S"}})
                .region_from,
            nullptr);
  EXPECT_EQ(resolve({{"AWS_PROFILE", "nope"}, {"AWS_REGION", "eu-west-1"}}).region_from, nullptr);
  EXPECT_EQ(resolve({{"AWS_PROFILE", "nope"},
                     {"AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:7/"}})
                .source->imds_endpoint,
            "http://127.0.0.1:7");
  EXPECT_EQ(resolve({{"AWS_PROFILE", "nope"}, {"AWS_METADATA_SERVICE_TIMEOUT", "2"}})
                .source->imds_timeout_ms,
            2000);
  EXPECT_THROW(resolve({{"AWS_PROFILE", "nope"}, {"AWS_METADATA_SERVICE_TIMEOUT", "soon"}}), Error);
  config::AwsAccess anonymous = resolve({{"AWS_NO_SIGN_REQUEST", "YES"}});
  EXPECT_TRUE(anonymous.anonymous());
}

TEST(AwsAccess, RefusesHalfCredentialsAndBadValues) {
  TempDir home;
  EXPECT_THROW(
      config::resolve_aws_access(
          config::Environment(std::map<std::string, std::string>{{"AWS_ACCESS_KEY_ID", "K"}}),
          home.path()),
      Error);
  config::Environment base({{"AWS_ACCESS_KEY_ID", "K"}, {"AWS_SECRET_ACCESS_KEY", "S"}});
  for (const char* region : {"us east", "a:b", "US-EAST-1", "x/../y"}) {
    config::Environment env = base;
    env.set("AWS_REGION", region);
    EXPECT_THROW(config::resolve_aws_access(env, home.path()), Error) << region;
  }
  for (const char* endpoint : {"ftp://x", "http://user:pass@host", "http://h/path", "host:9000"}) {
    config::Environment env = base;
    env.set("AWS_ENDPOINT_URL", endpoint);
    try {
      config::resolve_aws_access(env, home.path());
      ADD_FAILURE() << endpoint << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find("pass"), std::string::npos) << e.what();
    }
  }
}

TEST(AwsAccess, PathStyleForCustomEndpointsAndDottedBuckets) {
  config::AwsAccess aws;
  EXPECT_FALSE(config::aws_path_style(aws, "my-bucket"));
  EXPECT_TRUE(config::aws_path_style(aws, "my.bucket"));
  aws.custom_endpoint = true;
  EXPECT_TRUE(config::aws_path_style(aws, "my-bucket"));
}

}  // namespace
// HF_HUB_OFFLINE speaks of the Hugging Face Hub: an S3 store stays online (and so does a shared
// folder, folder_store_test); only the tool's own NEURON_CACHE_OFFLINE takes it offline. No
// request is made: static keys, a loopback endpoint nothing listens on.
TEST(S3StoreSettings, OnlyTheNeutralOfflineSettingTakesTheBucketOffline) {
  auto open_with = [](const char* name) {
    config::Environment env({{"HOME", "/nonexistent"},
                             {"AWS_ACCESS_KEY_ID", "AKIAOFFLINETEST0042"},
                             {"AWS_SECRET_ACCESS_KEY", "offline/secret/0123456789"},
                             {"AWS_REGION", "us-east-1"},
                             {"AWS_EC2_METADATA_DISABLED", "true"},
                             {"AWS_ENDPOINT_URL", "http://127.0.0.1:9"},
                             {name, "1"}});
    return storage::S3Store::open("s3://bucket/cache", config::Settings::resolve(env, {}));
  };
  EXPECT_FALSE(open_with("HF_HUB_OFFLINE")->offline());
  EXPECT_TRUE(open_with("NEURON_CACHE_OFFLINE")->offline());
}

}  // namespace neuron_cache
