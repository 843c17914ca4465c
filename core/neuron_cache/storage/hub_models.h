// Model repos read from the Hugging Face Hub: the ModelSource every front end uses, whatever
// store holds the compile cache.
#pragma once

#include "neuron_cache/hub/client.h"
#include "neuron_cache/storage/models.h"

namespace neuron_cache::storage {

class HubModels : public ModelSource {
 public:
  explicit HubModels(hub::HubClient& client) : client_(client) {}
  std::string commit_of(const std::string& model_id, const std::string& revision) override {
    return client_.repo_info(model_id, revision).sha;
  }
  std::optional<std::string> read_file(const std::string& model_id, const std::string& path,
                                       const std::string& revision) override {
    return client_.read_file(model_id, path, revision);
  }
  bool offline() const override { return client_.options().offline; }
  std::string unreachable() const override { return client_.unreachable(); }

 private:
  hub::HubClient& client_;
};

}  // namespace neuron_cache::storage
