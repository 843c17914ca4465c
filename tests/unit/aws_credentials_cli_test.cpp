// Issue 23: S3 credentials from every source botocore reads, as the tool meets them on a runner.
// No test may reach a real AWS address: every process gets testing::kCleanEnv
// (AWS_EC2_METADATA_DISABLED=true) and the sources under test point at loopback stand-ins.

#include <chrono>

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

}  // namespace
}  // namespace neuron_cache
