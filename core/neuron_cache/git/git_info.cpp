#include "neuron_cache/git/git_info.h"

#include <git2.h>

#include <memory>

#include "neuron_cache/error.h"
#include "neuron_cache/format/digest.h"

namespace neuron_cache {
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

namespace {

std::string oid_hex(const git_oid& oid) {
  char hex[GIT_OID_HEXSZ + 1];
  git_oid_tostr(hex, sizeof hex, &oid);
  return hex;
}

}  // namespace

std::string git_blob_id(std::string_view content) {
  // libcrypto, not libgit2: initialising libgit2 loads every CA certificate (about 10 ms), too
  // much for checking a kept copy of the Hub's index on every run.
  Hasher sha1(HashAlgorithm::Sha1);
  sha1.update("blob " + std::to_string(content.size()) + std::string(1, '\0'));
  sha1.update(content);
  return sha1.hex_digest();
}

std::string git_blob_id_of_file(const std::filesystem::path& file) {
  ensure_libgit2();
  git_oid oid;
  // libgit2 streams the file; it is never read whole into memory.
  if (git_odb_hashfile(&oid, file.c_str(), GIT_OBJECT_BLOB) != 0) {
    throw operational_error("cannot hash " + file.string() + ": " + last_git_error());
  }
  return oid_hex(oid);
}

}  // namespace neuron_cache
