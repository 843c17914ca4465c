// Model repos read from the Hugging Face Hub: the ModelSource every front end uses, whatever
// store holds the compile cache.
#pragma once

#include "neuron_cache/hub/client.h"
#include "neuron_cache/storage/models.h"

namespace neuron_cache::storage {

class HubModels : public ModelSource {
 public:
  explicit HubModels(hub::HubClient& client) : client_(client) {}
  // With an answer remembered, a Hub that does not answer within kRememberedAnswerWait (at
  // most half the Hub timeout) is not waited for: a warm run does not pay the whole timeout.
  static constexpr std::chrono::milliseconds kRememberedAnswerWait{2000};
  std::string commit_of(const std::string& model_id, const std::string& revision,
                        bool remembered) override {
    if (!remembered) return client_.repo_info(model_id, revision).sha;
    auto wait = std::min(kRememberedAnswerWait, client_.options().hub_timeout / 2);
    return client_.repo_info(model_id, revision, wait).sha;
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
