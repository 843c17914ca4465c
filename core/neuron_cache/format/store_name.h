// Names of cache stores, the one rule every reader of a cache repo setting applies (--repo, the
// manifest's cache_repo, CUSTOM_CACHE_REPO, the saved repo):
//   org/name, hf://org/name    a Hugging Face Hub repo
//   s3://bucket[/prefix]       an S3 or S3-compatible bucket
//   file:///absolute/path      a shared folder
// Names are hostile input: a bucket is what S3 allows (it becomes part of a host name), a prefix
// is plain path segments, a folder is absolute without control characters.
#pragma once

#include <filesystem>
#include <string>

namespace neuron_cache::store_name {

enum class StoreKind { Hub, S3, Folder };

struct StoreName {
  StoreKind kind = StoreKind::Hub;
  std::string hub_repo;          // Hub: org/name
  std::string bucket;            // S3
  std::string prefix;            // S3: "" or "a/b" (no leading or trailing '/')
  std::filesystem::path folder;  // Folder: absolute, normalised
};

// Throws an input Error naming the accepted forms when `name` is none of them; `what` says where
// the name came from ("--repo", "cache_repo", ...).
StoreName parse_store_name(const std::string& name, const std::string& what = "the cache repo");
bool is_store_name(const std::string& name);

}  // namespace neuron_cache::store_name
