// A temporary file for content a store's commit sends (an index shard, a lease): written whole
// to a memory file (its path is /proc/self/fd/N, so a killed process leaves nothing), or without
// /proc in the system's temporary folder; gone when the object goes away.
#pragma once

#include <filesystem>
#include <string>

namespace neuron_cache::sys {

class TempFile {
 public:
  // Throws an operational Error when the file cannot be made or written whole (a full /tmp must
  // fail the caller, never send a short file).
  explicit TempFile(const std::string& content);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;  // the memory file, when it is one
};

}  // namespace neuron_cache::sys
