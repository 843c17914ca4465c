// Errors that reach the user: what failed, why, and what to do.
#pragma once

#include <stdexcept>
#include <string>

namespace neuron_cache {

enum class ErrorKind {
  Input,        // bad arguments, malformed files: exit code 2
  Operational,  // I/O, locks, network, permissions: exit code 1
  // The local disk refused a write (permission, read-only, no space, a size limit): exit code 1,
  // and never a cache problem that a store's fallback (compile instead, a miss) could help.
  LocalDisk,
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// What was read changed before the write that depended on it (Hub: the branch moved, HTTP
// 409/412; S3: a conditional write failed, 412; folder: an index file changed under the lock).
// The caller reads again, merges and writes again.
class CommitConflict : public Error {
 public:
  explicit CommitConflict(const std::string& message) : Error(ErrorKind::Operational, message) {}
};

inline Error input_error(const std::string& message) {
  return {ErrorKind::Input, message};
}
inline Error operational_error(const std::string& message) {
  return {ErrorKind::Operational, message};
}

// Callers that turn a store's failure into a fallback call this first: a local disk failure
// must stop the command, not be retried as a miss or a compile that would fail the same way.
inline void rethrow_local_disk(const Error& error) {
  if (error.kind() == ErrorKind::LocalDisk) throw error;
}

}  // namespace neuron_cache
