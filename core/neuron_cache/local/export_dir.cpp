#include "neuron_cache/local/export_dir.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <set>

#include "neuron_cache/error.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::local {
namespace {

namespace fs = std::filesystem;
namespace ai = artifact_index;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void link_module(const LocalCache& cache, const std::string& compiler_dir,
                 const ai::ModuleRecord& module, const fs::path& into) {
  for (const auto& file : module.files) {
    fs::path source = cache.root() / compiler_dir / module.name / file.name;
    std::error_code error;
    fs::path target = fs::canonical(source, error);
    if (error || !fs::is_regular_file(target, error)) {
      throw operational_error(source.string() +
                              " is missing from the local cache: run prefetch again");
    }
    fs::path link = into / compiler_dir / module.name / file.name;
    sys::make_directories(link.parent_path());
    fs::create_symlink(target, link, error);
    if (error) {
      throw operational_error("cannot link " + link.string() + " to " + target.string() + ": " +
                              error.message() + " (does the entry list this file twice?)");
    }
  }
}

// Puts `staged` at `final_path`, swapping atomically with an existing export.
void install(const fs::path& staged, const fs::path& final_path) {
  if (renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, final_path.c_str(), RENAME_NOREPLACE) == 0) {
    return;
  }
  if (errno != EEXIST ||
      renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, final_path.c_str(), RENAME_EXCHANGE) != 0) {
    throw operational_error("cannot install the export " + final_path.string() + ": " +
                            strerror(errno));
  }
  fs::remove_all(staged);  // now holds the previous export
}

}  // namespace

fs::path export_configuration(const LocalCache& cache, const ai::Entry& entry,
                              const fs::path& export_root, const std::string& name) {
  fs::path final_path = export_root / name;
  std::string text = ai::serialize_entry(entry);
  std::error_code error;
  if (fs::is_directory(final_path, error) && read_text(final_path / kExportEntryFile) == text) {
    return final_path;
  }
  sys::make_directories(export_root);
  fs::path staged = export_root / ("." + name + ".tmp-" + std::to_string(getpid()));
  fs::remove_all(staged);
  sys::make_directories(staged);
  try {
    std::set<std::string> linked;  // an entry read before names were checked may repeat one
    for (const auto& module : entry.modules) {
      if (linked.insert(module.name).second)
        link_module(cache, entry.compiler_dir(), module, staged);
    }
    sys::write_whole_file(staged / kExportEntryFile, text);
    install(staged, final_path);
  } catch (...) {
    fs::remove_all(staged, error);
    throw;
  }
  return final_path;
}

}  // namespace neuron_cache::local
