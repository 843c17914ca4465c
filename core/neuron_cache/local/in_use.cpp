#include "neuron_cache/local/in_use.h"

#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <sstream>

#include "neuron_cache/error.h"
#include "neuron_cache/format/layout.h"
#include "neuron_cache/sys/random.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::local {
namespace {

constexpr size_t kMaxRunFiles = 1024;
constexpr size_t kMaxRunFileBytes = 4 << 20;
constexpr double kLockGraceSeconds = 60;

bool is_run_file(const std::string& name) {
  return name.starts_with("run-") && name.ends_with(".in-use") && name.size() < 64;
}

// "neuronxcc-<v>/MODULE_<hash>" lines; anything else is skipped.
void read_lines(const std::string& text, std::set<EntryName>& out) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string compiler = line.substr(0, slash), module = line.substr(slash + 1);
    if (!layout::compiler_version_of(compiler) || !module.starts_with(layout::kModulePrefix) ||
        module.find('/') != std::string::npos)
      continue;
    out.emplace(compiler, module);
  }
}

}  // namespace

InUse::~InUse() {
  if (!lock_) return;
  try {
    if (auto dir = sys::SafeDir::open(root_).open_path(layout::kInUseDir)) dir->remove_file(name_);
  } catch (const std::exception&) {
    // Unlocked once this process ends: the next cleanup removes it.
  }
}

void InUse::add(const std::vector<EntryName>& entries) {
  size_t before = entries_.size();
  entries_.insert(entries.begin(), entries.end());
  if (entries_.size() == before) return;
  try {
    write();
  } catch (const std::exception&) {
    // A cache folder that cannot be written (a read-only shared cache): nothing to protect.
  }
}

void InUse::write() {
  sys::SafeDir dir = sys::SafeDir::open(root_).make_path(layout::kInUseDir);
  if (!lock_) {
    name_ = "run-" + sys::random_hex(16) + ".in-use";
    // A fresh name: taken at once or not at all.
    lock_ = sys::FileLock::acquire(dir, name_, sys::LockKind::Flock, sys::FileLock::Clock::now());
    if (!lock_) throw operational_error("the in-use file " + name_ + " is locked elsewhere");
  }
  std::string text;
  for (const auto& [compiler, module] : entries_) text += compiler + "/" + module + "\n";
  // Rewritten through the locked descriptor: the lock stays with the file.
  if (ftruncate(lock_->fd(), 0) != 0 ||
      pwrite(lock_->fd(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
    throw operational_error("cannot write the in-use file " + name_);
}

std::set<EntryName> entries_in_use(const std::filesystem::path& cache_root) {
  std::set<EntryName> out;
  std::optional<sys::SafeDir> dir;
  try {
    dir = sys::SafeDir::open(cache_root).open_path(layout::kInUseDir);
  } catch (const Error&) {
    return out;
  }
  if (!dir) return out;
  size_t seen = 0;
  double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (const auto& item : dir->list()) {
    if (item.type != sys::NodeType::File || !is_run_file(item.name)) continue;
    if (++seen > kMaxRunFiles) break;
    try {
      sys::UniqueFd fd = dir->open_read(item.name);
      if (!sys::locked_elsewhere(fd.get())) {
        // Its run ended; a file made this minute may be one a run is about to lock.
        if (now - item.mtime > kLockGraceSeconds) dir->remove_file(item.name);
        continue;
      }
      read_lines(dir->read_small_file(item.name, kMaxRunFileBytes), out);
    } catch (const std::exception&) {
      // Unreadable or too large: protects nothing.
    }
  }
  return out;
}

}  // namespace neuron_cache::local
