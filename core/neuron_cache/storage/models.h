// Model revisions: where the plan reads a model's commit and config.json, beside the stores
// that hold the compile cache (the models live on the Hub whatever store holds the cache).
#pragma once

#include <optional>
#include <string>

namespace neuron_cache::storage {

// Where model repos are read (the Hub's model repos, whatever store holds the cache): a
// revision's commit and a small file at a commit. storage::HubModels (storage/hub_models.h) is
// the one implementation; tests give fakes.
class ModelSource {
 public:
  virtual ~ModelSource() = default;
  // The commit `revision` (a branch or tag) of `model_id` points to. `remembered`: an earlier
  // answer is at hand, so the source waits only briefly for this one (ModelSource users fall
  // back to it), and asks once.
  virtual std::string commit_of(const std::string& model_id, const std::string& revision,
                                bool remembered) = 0;
  // A small file at a commit, or nothing when the model has no such file.
  virtual std::optional<std::string> read_file(const std::string& model_id, const std::string& path,
                                               const std::string& revision) = 0;
  virtual bool offline() const = 0;
  // Why the Hub was found unreachable in this run, or "".
  virtual std::string unreachable() const = 0;
};

}  // namespace neuron_cache::storage
