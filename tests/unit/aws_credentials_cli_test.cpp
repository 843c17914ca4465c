// Issue 23: S3 credentials from every source botocore reads, as the tool meets them on a runner.
// No test may reach a real AWS address: every process gets testing::kCleanEnv
// (AWS_EC2_METADATA_DISABLED=true) and the sources under test point at loopback stand-ins.

#include <chrono>

#include "aws_stand_in.h"
#include "pipeline_cli_fixture.h"

namespace neuron_cache {
namespace {

class AwsCredentialsCliTest : public PipelineCliTest {
 protected:
  fs::path s3_manifest(const std::string& url) {
    ManifestSpec spec;
    spec.cache_repo = url;
    spec.confs = {{"llama-bs1", 1, 128}};
    return write_manifest(spec);
  }
};

// The test environment itself: a tool run with an S3 store and no credentials never asks the EC2
// metadata address (the instance-role source is off in every test process), and says what to do
// at once.
TEST_F(AwsCredentialsCliTest, TheTestEnvironmentNeverAsksTheMetadataAddress) {
  fs::path manifest = s3_manifest("s3://bucket/prefix");
  auto start = std::chrono::steady_clock::now();
  ToolResult plan = tool("plan --verbose " + quoted(manifest));
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(plan.code, 2) << plan.all();
  EXPECT_TRUE(contains(plan.err, "no AWS credentials for S3")) << plan.err;
  EXPECT_TRUE(contains(plan.err, "the instance metadata service is off")) << plan.err;
  EXPECT_FALSE(contains(plan.all(), "169.254.")) << plan.all();
  EXPECT_LT(took, std::chrono::seconds(1)) << "a machine without credentials is told at once";
}

// A machine where the metadata service is on but nobody answers (off EC2; here a loopback port
// nothing listens on): one clear message, exit 2, at once.
TEST_F(AwsCredentialsCliTest, NoMetadataServiceIsToldAtOnce) {
  fs::path manifest = s3_manifest("s3://bucket/prefix");
  auto start = std::chrono::steady_clock::now();
  ToolResult plan = tool("plan " + quoted(manifest),
                         "AWS_EC2_METADATA_DISABLED=false "
                         "AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:9");
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(plan.code, 2) << plan.all();
  EXPECT_TRUE(contains(plan.err, "no AWS credentials for S3")) << plan.err;
  EXPECT_TRUE(contains(plan.err, "not an EC2 instance?")) << plan.err;
  EXPECT_TRUE(contains(plan.err, "AWS_NO_SIGN_REQUEST=YES")) << plan.err;
  EXPECT_LT(took, std::chrono::seconds(1)) << plan.err;
}

// No region configured: the instance's region, as botocore asks it; off EC2 (nothing answers) the
// default region stands and keys from elsewhere still serve.
TEST_F(AwsCredentialsCliTest, TheRegionComesFromTheInstanceWhenNoneIsConfigured) {
  testing::AwsStandIn aws;
  const std::string keys = "AWS_ACCESS_KEY_ID=AKIAKEYSFROMELSEWHERE AWS_SECRET_ACCESS_KEY=s ";
  ToolResult on_ec2 =
      tool("config show --repo s3://bucket/prefix",
           keys + "AWS_EC2_METADATA_DISABLED=false AWS_EC2_METADATA_SERVICE_ENDPOINT=" + aws.url());
  ASSERT_EQ(on_ec2.code, 0) << on_ec2.all();
  EXPECT_TRUE(contains(on_ec2.out, "s3 region: " + aws.config()["region"].get<std::string>() +
                                       " (the instance's metadata)"))
      << on_ec2.out;
  ToolResult off_ec2 = tool("config show --repo s3://bucket/prefix",
                            keys +
                                "AWS_EC2_METADATA_DISABLED=false "
                                "AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:9");
  ASSERT_EQ(off_ec2.code, 0) << off_ec2.all();
  EXPECT_TRUE(contains(off_ec2.out, "s3 region: us-east-1 (default)")) << off_ec2.out;
  EXPECT_TRUE(contains(off_ec2.out, "s3 credentials: AWS_ACCESS_KEY_ID")) << off_ec2.out;
}

// `config show --repo s3://...` says where the credentials came from, when they expire, the region
// and the endpoint, and never a value.
TEST_F(AwsCredentialsCliTest, ConfigShowNamesTheSourceAndItsExpiry) {
  testing::AwsStandIn aws;
  std::map<std::string, std::string> env = aws.env_for("web_identity", work / "aws-home");
  std::string extra;
  for (const auto& [name, value] : env) extra += name + "=" + value + " ";
  ToolResult shown = tool("config show --repo s3://bucket/prefix", extra);
  ASSERT_EQ(shown.code, 0) << shown.all();
  EXPECT_TRUE(contains(shown.out,
                       "s3 credentials: web-identity (AWS_WEB_IDENTITY_TOKEN_FILE, "
                       "AWS_ROLE_ARN), expires 20"))
      << shown.out;
  EXPECT_TRUE(contains(shown.out, "temporary (with a session token)")) << shown.out;
  EXPECT_TRUE(contains(shown.out, "s3 region: us-east-1 (default)")) << shown.out;
  EXPECT_TRUE(contains(shown.out, "s3 endpoint: https://s3.us-east-1.amazonaws.com")) << shown.out;
  const auto& identity = aws.config()["sts"]["web_identity"];
  for (const std::string& secret : {identity["token"].get<std::string>(),
                                    identity["credentials"]["SecretAccessKey"].get<std::string>(),
                                    identity["credentials"]["SessionToken"].get<std::string>(),
                                    identity["credentials"]["AccessKeyId"].get<std::string>()}) {
    EXPECT_FALSE(contains(shown.all(), secret)) << secret;
  }
}

}  // namespace
}  // namespace neuron_cache
