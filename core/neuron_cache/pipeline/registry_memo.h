// What optimum-neuron's registry in a cache repo says about some models, remembered in the cache
// root by head commit. The registry at a commit never changes, so a plan against the same head
// asks nothing again: the listings and entry downloads of remote::scan_registry are made once
// per head, not once per run.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "neuron_cache/plan/plan.h"
#include "neuron_cache/remote/lookup.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::pipeline {

struct RegistryAnswer {
  bool has_registry = false;               // the compiler folder has a 0_REGISTRY at all
  std::vector<std::string> compiler_dirs;  // the neuronxcc-* folders the version prefix names
  std::vector<plan::RegistryCandidate> candidates;
  bool complete = true;  // false when a read failed: then it is not remembered
};

class RegistryMemo {
 public:
  // `file` holds {"repo", "revision", "scans": {"<version>|<model>|<model>...": answer}}; another
  // repo or revision there is not used.
  RegistryMemo(sys::RootedFile file, std::string repo, std::string revision)
      : file_(std::move(file)), repo_(std::move(repo)), revision_(std::move(revision)) {}

  std::optional<RegistryAnswer> recall(const std::string& compiler_version,
                                       const remote::ScanModels& models) const;
  // Best effort: remembering only saves asking again.
  void remember(const std::string& compiler_version, const remote::ScanModels& models,
                const RegistryAnswer& answer) const;

 private:
  sys::RootedFile file_;
  std::string repo_;
  std::string revision_;
};

}  // namespace neuron_cache::pipeline
