// The base of CLI tests that run the tool as several machines (each with its own local cache)
// against one cache store of each kind: the test Hub server's cache repo, an in-process S3
// bucket, or a shared folder. GetParam() is "hub", "s3" or "folder".
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>

#include "hub_fixture.h"
#include "s3_stand_in.h"
#include "test_support.h"
#include "tool_runner.h"

namespace neuron_cache::testing {

inline constexpr const char* kStoreKindModel = "meta-llama/Llama-3.2-1B";

class StoreKindTest : public ::testing::TestWithParam<std::string> {
 protected:
  StoreKindTest()
      : hub(cache_hub_config(
            kTestCacheRepo, {{kStoreKindModel, {{"config.json", R"({"model_type": "llama"})"}}}})) {
  }

  void SetUp() override {
    if (GetParam() == "folder") {
      store = "file://" + (work / "share").string();
      std::filesystem::create_directories(work / "share");
      ASSERT_EQ(machine(0).run("create -n " + store).code, 0);
    } else if (GetParam() == "s3") {
      s3.emplace();
      store = "s3://bucket/fleet";
      store_env =
          "AWS_ACCESS_KEY_ID=KEY AWS_SECRET_ACCESS_KEY=SECRET AWS_REGION=us-east-1 "
          "AWS_ENDPOINT_URL=" +
          s3->access().endpoint;
    } else {
      store = kTestCacheRepo;
    }
  }

  // Machine `i`: its own folder, HF home and local cache (work/machine<i>/cache).
  ToolRunner machine(int i) {
    std::filesystem::path dir = work / ("machine" + std::to_string(i));
    std::filesystem::create_directories(dir / "home");
    ToolRunner runner(dir, dir / "home", hub.url(), dir / "cache");
    runner.call_log = work / "calls.jsonl";
    return runner;
  }

  HubServer hub;
  TempDir work;
  std::optional<S3StandIn> s3;
  std::string store;      // what --repo names
  std::string store_env;  // the environment the store needs (S3's endpoint and keys)
};

}  // namespace neuron_cache::testing
