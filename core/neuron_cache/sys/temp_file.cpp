#include "neuron_cache/sys/temp_file.h"

#include <stdlib.h>
#include <unistd.h>

#include "neuron_cache/error.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::sys {

namespace fs = std::filesystem;

TempFile::TempFile(const std::string& content) {
  std::string pattern = (fs::temp_directory_path() / "neuron-cache-XXXXXX").string();
  int fd = mkstemp(pattern.data());
  if (fd < 0)
    throw operational_error("cannot create a temporary file in " +
                            fs::temp_directory_path().string());
  close(fd);
  path_ = pattern;
  try {
    write_whole_file(path_, content);
  } catch (...) {
    unlink(path_.c_str());
    throw;
  }
}

TempFile::~TempFile() {
  std::error_code ignored;
  fs::remove(path_, ignored);
}

}  // namespace neuron_cache::sys
