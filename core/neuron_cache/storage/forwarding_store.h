// The base of every store wrapper (policies, a handle a test keeps): each method passes to the
// inner store, so that a wrapper overrides only what it changes. Holds a reference: the inner
// store outlives it.
#pragma once

#include <string>
#include <vector>

#include "neuron_cache/storage/store.h"

namespace neuron_cache::storage {

class ForwardingStore : public Store {
 public:
  explicit ForwardingStore(Store& inner) : inner_(inner) {}

  Kind kind() const override;
  std::string location() const override;
  std::string name() const override;
  std::string head() override;
  std::vector<RemoteEntry> list(const std::string& path, bool recursive,
                                const std::string& revision) override;
  std::vector<RemoteEntry> stat(const std::vector<std::string>& paths,
                                const std::string& revision) override;
  std::vector<RemoteEntry> stat_times(const std::vector<std::string>& paths,
                                      const std::string& revision) override;
  SmallFile read_versioned(const std::string& path, const std::string& revision,
                           uint64_t max_bytes) override;
  std::optional<StoreTimes> write_times(const std::string& path,
                                        const std::string& revision) override;
  std::vector<DownloadResult> download(const std::string& revision,
                                       std::vector<DownloadRequest>& requests) override;
  bool absorbs(const std::string& operation, const Error& error) override;
  bool content_matches(const RemoteEntry& entry, std::string_view content) const override;
  CommitResult commit(const std::vector<CommitOperation>& operations, const std::string& message,
                      const std::optional<std::string>& parent) override;
  std::vector<Leftover> leftovers(const LeftoverAges& ages) override;
  LeftoverRemoval remove_leftovers(const std::vector<Leftover>& found,
                                   const LeftoverAges& ages) override;
  std::string squash_history(const std::string& message) override;
  bool has_revision(const std::string& revision) override;
  std::string why_not_writable() override;
  bool checks_conditional_writes() override;
  Url download_url(const std::string& revision, const std::string& path) const override;
  uint64_t requests() const override;
  std::string unreachable() const override;
  void look_again() override;
  bool offline() const override;

 protected:
  Store& inner() const { return inner_; }

 private:
  Store& inner_;
};

}  // namespace neuron_cache::storage
