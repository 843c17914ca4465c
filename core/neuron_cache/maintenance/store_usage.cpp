#include "neuron_cache/maintenance/store_usage.h"

#include <algorithm>
#include <array>
#include <ctime>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "neuron_cache/error.h"
#include "neuron_cache/format/artifact_index.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/format/timestamp.h"
#include "neuron_cache/remote/listed_files.h"
#include "neuron_cache/remote/remote_index.h"

namespace neuron_cache::maintenance {
namespace {

namespace ai = artifact_index;
using Folder = std::pair<std::string, std::string>;  // compiler version, MODULE_ name (raw)

// Problems kept word for word; more are counted in one last line.
constexpr size_t kMaxProblems = 100;
// A name as messages and reports show it: a hostile store's names reach no terminal raw.
constexpr size_t kShownName = 200;

struct Bucket {
  const char* name;
  const char* key;
  int64_t below_seconds;  // ages under this; 0 for the last two
};
constexpr int64_t kDay = 86'400;
constexpr std::array<Bucket, 6> kBuckets = {{{"< 1 day", "1d", kDay},
                                             {"< 7 days", "7d", 7 * kDay},
                                             {"< 30 days", "30d", 30 * kDay},
                                             {"< 90 days", "90d", 90 * kDay},
                                             {"older", "older", 0},
                                             {"unknown", "unknown", 0}}};
constexpr size_t kUnknownBucket = 5;

// The bucket of a created_at: a time in the future (another machine's clock) counts as new.
size_t bucket_of(const std::string& created_at, int64_t now) {
  std::optional<int64_t> when = parse_utc_timestamp(created_at);
  if (!when) return kUnknownBucket;
  int64_t age = now - *when;
  for (size_t i = 0; i < 4; ++i) {
    if (age < kBuckets[i].below_seconds) return i;
  }
  return 4;
}

struct VersionTree {
  VersionUsage usage;
  std::map<std::string, uint64_t> module_bytes;  // by MODULE_ name
  std::set<std::string> referenced;              // MODULE_ names an entry references
};

struct Owner {
  bool profile = false;
  uint64_t configurations = 0;
  std::set<Folder> folders;
};

class Measure {
 public:
  Measure(storage::Store& store, const UsageOptions& options)
      : store_(store), options_(options), before_(store.requests()) {
    if (options_.now == 0) options_.now = static_cast<int64_t>(std::time(nullptr));
    usage_.store = store.name();
    usage_.kind = std::string(storage::kind_name(store.kind()));
    for (const auto& bucket : kBuckets) usage_.ages.push_back({bucket.name, bucket.key, 0, {}});
  }

  StoreUsage run() {
    revision_ = store_.head();
    for (const auto& top : list_root()) measure_top(top);
    read_index();
    finish();
    return std::move(usage_);
  }

 private:
  std::vector<storage::RemoteEntry> list_root() {
    std::vector<storage::RemoteEntry> top = store_.list_or_failure("", false, revision_).value();
    count_listed(top.size());
    return top;
  }

  void measure_top(const storage::RemoteEntry& top) {
    if (!top.is_directory) {
      usage_.other.add(1, top.size);
      usage_.total.add(1, top.size);
      return;
    }
    auto listing = store_.list_or_failure(top.path, true, revision_);
    if (listing.failed()) {
      problem("could not list " + top.path + " (" + listing.failure().message +
              "): its files are left out");
      return;
    }
    const std::vector<storage::RemoteEntry>& files = listing.value();
    count_listed(files.size());
    std::optional<std::string> version = layout::compiler_version_of(top.path);
    for (const auto& file : files) {
      if (file.is_directory) continue;  // folders are counted by their files
      usage_.total.add(1, file.size);
      std::optional<std::string> rest = below(file.path, top.path);
      if (!rest) {
        usage_.other.add(1, file.size);  // a listing that strays out of its folder
      } else if (version) {
        add_compiler_file(*version, *rest, file.size);
      } else if (top.path == ai::kRemoteDir) {
        add_index_file(file);
      } else {
        usage_.other.add(1, file.size);
      }
    }
  }

  // The part of `path` below the folder `top`, or nothing when it is not below it.
  static std::optional<std::string> below(const std::string& path, const std::string& top) {
    if (path.size() <= top.size() + 1 || !path.starts_with(top) || path[top.size()] != '/')
      return std::nullopt;
    return path.substr(top.size() + 1);
  }

  VersionTree& version(const std::string& name) {
    VersionTree& tree = versions_[name];
    if (tree.usage.compiler_version.empty())
      tree.usage.compiler_version = printable(name, kShownName);
    return tree;
  }

  void add_compiler_file(const std::string& name, const std::string& rest, uint64_t size) {
    VersionTree& tree = version(name);
    tree.usage.files.add(1, size);
    std::string first = rest.substr(0, rest.find('/'));
    if (first.starts_with(layout::kModulePrefix) && first.size() < rest.size()) {
      uint64_t& bytes = tree.module_bytes[first];
      bytes = saturating_add(bytes, size, usage_.saturated);
    } else if (first == layout::kRegistryDir) {
      tree.usage.registry.add(1, size);
    } else {
      tree.usage.other.add(1, size);
    }
  }

  void add_index_file(const storage::RemoteEntry& file) {
    usage_.index.add(1, file.size);
    if (std::optional<std::string> name = ai::compiler_version_of_index(file.path))
      version(*name).usage.index.add(1, file.size);
    if (!file.path.ends_with(".json")) return;
    if (file.size > remote::kMaxIndexFileBytes) {
      problem("the index file " + file.path + " is " + std::to_string(file.size) +
              " bytes, more than an index file may be: not read");
      return;
    }
    index_files_.push_back(file);
  }

  void count_listed(uint64_t files) {
    listed_ = saturating_add(listed_, files, usage_.saturated);
    if (listed_ <= options_.max_files) return;
    throw operational_error(
        storage::describe(store_.kind(), store_.location()) + " lists more than " +
        std::to_string(options_.max_files) +
        " files: too many to measure from listings (a cache holds a few files per compiled "
        "graph); check that the store's root is the cache's");
  }

  void read_index() {
    std::vector<storage::Read<std::string>> texts =
        remote::read_listed_files(store_, revision_, index_files_);
    for (size_t i = 0; i < texts.size(); ++i) {
      if (texts[i].failed()) {
        problem("could not read the index file " + index_files_[i].path + " (" +
                texts[i].failure().message + "): its configurations are left out");
      } else {
        parse(index_files_[i].path, texts[i].value());
      }
    }
  }

  void parse(const std::string& path, const std::string& text) {
    ai::IndexFile file;
    try {
      file = ai::parse_index(text, usage_.store + "/" + printable(path, kShownName));
    } catch (const Error& error) {
      problem(std::string("skipped a whole index file: ") + error.what());
      return;
    }
    ++usage_.index_files_read;
    for (const auto& why : file.problems) problem("skipped an index entry: " + why);
    for (const auto& [key, entry] : file.entries) add_entry(entry);
  }

  void add_entry(const ai::Entry& entry) {
    const std::string& name = entry.inputs.compiler_version;
    // A key a format 1 file and a shard both hold is one configuration.
    if (!seen_.insert({name, entry.key}).second) return;
    VersionTree& tree = version(name);
    ++tree.usage.configurations;
    ++usage_.configurations;
    bool profile = entry.inputs.profile.has_value();
    Owner& owner = owners_[{profile, profile ? *entry.inputs.profile : entry.inputs.model_id}];
    owner.profile = profile;
    ++owner.configurations;
    size_t bucket = bucket_of(entry.created_at, options_.now);
    ++usage_.ages[bucket].configurations;
    for (const auto& module : entry.modules) {
      tree.referenced.insert(module.name);
      owner.folders.insert({name, module.name});
      bucket_folders_[bucket].insert({name, module.name});
    }
  }

  // The listed bytes of a referenced folder, or nothing when the store does not hold it.
  std::optional<uint64_t> bytes_of(const Folder& folder) const {
    auto tree = versions_.find(folder.first);
    if (tree == versions_.end()) return std::nullopt;
    auto module = tree->second.module_bytes.find(folder.second);
    if (module == tree->second.module_bytes.end()) return std::nullopt;
    return module->second;
  }

  void finish() {
    for (auto& [name, tree] : versions_) finish_version(tree);
    for (auto& [id, owner] : owners_) {
      ModelUsage model{
          printable(id.second, kShownName), owner.profile, owner.configurations, {}, 0};
      for (const auto& folder : owner.folders) {
        std::optional<uint64_t> bytes = bytes_of(folder);
        bytes ? model.referenced.add(1, *bytes) : void(++model.missing_modules);
      }
      usage_.models.push_back(std::move(model));
    }
    std::sort(usage_.models.begin(), usage_.models.end(), [](const auto& a, const auto& b) {
      if (a.referenced.bytes != b.referenced.bytes) return a.referenced.bytes > b.referenced.bytes;
      return a.name < b.name;
    });
    for (size_t i = 0; i < kBuckets.size(); ++i) {
      for (const auto& folder : bucket_folders_[i]) {
        if (std::optional<uint64_t> bytes = bytes_of(folder))
          usage_.ages[i].referenced.add(1, *bytes);
      }
    }
    if (dropped_problems_ > 0)
      usage_.problems.push_back("and " + std::to_string(dropped_problems_) + " more problems");
    for (const Tally* tally : all_tallies())
      usage_.saturated = usage_.saturated || tally->saturated;
    usage_.requests = store_.requests() - before_;
  }

  void finish_version(VersionTree& tree) {
    VersionUsage& v = tree.usage;
    for (const auto& [module, bytes] : tree.module_bytes) {
      v.modules.add(1, bytes);
      usage_.modules.add(1, bytes);
      if (tree.referenced.contains(module)) continue;
      v.unindexed.add(1, bytes);
      usage_.unindexed.add(1, bytes);
    }
    usage_.versions.push_back(v);
  }

  std::vector<const Tally*> all_tallies() const {
    std::vector<const Tally*> out = {&usage_.total, &usage_.modules, &usage_.unindexed,
                                     &usage_.index, &usage_.other};
    for (const auto& v : usage_.versions) {
      for (const Tally* t : {&v.files, &v.modules, &v.registry, &v.other, &v.unindexed, &v.index})
        out.push_back(t);
    }
    for (const auto& m : usage_.models) out.push_back(&m.referenced);
    for (const auto& a : usage_.ages) out.push_back(&a.referenced);
    return out;
  }

  void problem(const std::string& text) {
    if (usage_.problems.size() < kMaxProblems) {
      usage_.problems.push_back(printable(text, kPrintableMessage));
    } else {
      ++dropped_problems_;
    }
  }

  storage::Store& store_;
  UsageOptions options_;
  uint64_t before_;
  std::string revision_;
  StoreUsage usage_;
  uint64_t listed_ = 0;
  std::map<std::string, VersionTree> versions_;  // by raw version name
  std::vector<storage::RemoteEntry> index_files_;
  std::set<std::pair<std::string, std::string>> seen_;    // version, key
  std::map<std::pair<bool, std::string>, Owner> owners_;  // by (profile?, model id or name)
  std::array<std::set<Folder>, kBuckets.size()> bucket_folders_;
  uint64_t dropped_problems_ = 0;
};

}  // namespace

uint64_t saturating_add(uint64_t a, uint64_t b, bool& saturated) {
  uint64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) {
    saturated = true;
    return std::numeric_limits<uint64_t>::max();
  }
  return sum;
}

void Tally::add(uint64_t n, uint64_t size) {
  count = saturating_add(count, n, saturated);
  bytes = saturating_add(bytes, size, saturated);
}

StoreUsage store_usage(storage::Store& store, const UsageOptions& options) {
  return Measure(store, options).run();
}

}  // namespace neuron_cache::maintenance
