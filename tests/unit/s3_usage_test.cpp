// maintenance::store_usage (`neuron-cache du`) on an S3 bucket (the in-process S3 stand-in): the
// same exact numbers as on every other store, in a cost that follows versions and shards.
#include <gtest/gtest.h>

#include "neuron_cache/maintenance/store_usage.h"
#include "neuron_cache/storage/s3_store.h"
#include "s3_stand_in.h"
#include "usage_layout.h"

namespace neuron_cache::maintenance {
namespace {

TEST(S3Usage, BucketGivesExactNumbers) {
  testing::S3StandIn s3;
  testing::UsageLayout layout = testing::usage_layout();
  for (const auto& [path, content] : layout.files) s3.put("c/" + path, content);
  s3.put("other-prefix/neuronxcc-9.9/MODULE_1+e30acd3a/model.neff", "not this store's");
  storage::S3Store store("s3://bucket/c", s3.access(), s3.options());
  StoreUsage usage = store_usage(store, {testing::usage_now(), kMaxUsageFiles});
  EXPECT_EQ(usage.kind, "s3");
  testing::expect_layout_usage(usage, layout);
  // The root's top level, 4 top folders, 5 index files: no request per MODULE_ file.
  EXPECT_LE(usage.requests, 1u + 4u + 5u + 2u) << "requests: " << usage.requests;
}

}  // namespace
}  // namespace neuron_cache::maintenance
