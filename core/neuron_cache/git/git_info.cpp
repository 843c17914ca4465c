#include "neuron_cache/git/git_info.h"

#include <git2.h>

#include <memory>

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"

namespace neuron_cache::git {
namespace {

// libgit2 needs a global init; doing it once per process is enough.
void ensure_libgit2() {
  static const int initialised = git_libgit2_init();
  (void)initialised;
}

std::string last_git_error() {
  const git_error* error = git_error_last();
  return error != nullptr && error->message != nullptr ? error->message : "unknown libgit2 error";
}

}  // namespace

std::optional<std::string> head_commit(const std::filesystem::path& model_dir) {
  ensure_libgit2();
  git_repository* raw = nullptr;
  int status = git_repository_open_ext(&raw, model_dir.c_str(), 0, nullptr);
  if (status == GIT_ENOTFOUND) return std::nullopt;
  if (status != 0) {
    throw operational_error("cannot open the git repository at " + model_dir.string() + ": " +
                            last_git_error());
  }
  std::unique_ptr<git_repository, decltype(&git_repository_free)> repo(raw, git_repository_free);
  git_oid oid;
  if (git_reference_name_to_id(&oid, repo.get(), "HEAD") != 0) {
    throw operational_error("the git repository at " + model_dir.string() +
                            " has no HEAD commit: " + last_git_error() +
                            "; commit the model files or give a revision explicitly");
  }
  char hex[GIT_OID_HEXSZ + 1];
  git_oid_tostr(hex, sizeof hex, &oid);
  return hex;
}

}  // namespace neuron_cache::git
