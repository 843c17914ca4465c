#include "neuron_cache/local/hf_file_cache.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "neuron_cache/error.h"

namespace neuron_cache::local {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kRepoFolderPrefix = "models--";  // optimum-neuron's repos are models
constexpr std::string_view kSnapshots = "snapshots";
constexpr std::string_view kBlobs = "blobs";
// A path in a cache repo is short (neuronxcc-<v>/MODULE_<key>/<sub-folder>/<file>); a longer
// chain is not the proxy's.
constexpr size_t kMaxParts = 16;

// What the symlink `name` in the folder `fd` holds, or nothing.
std::optional<fs::path> link_text(int fd, const std::string& name) {
  char buffer[PATH_MAX];
  ssize_t n = readlinkat(fd, name.c_str(), buffer, sizeof buffer - 1);
  if (n <= 0) return std::nullopt;
  return fs::path(std::string(buffer, static_cast<size_t>(n)));
}

// `target` (the text of a link in `base`) below one of `roots`, as plain names: lexically, the
// kernel never asked. Nothing when it leaves them.
std::optional<std::vector<std::string>> parts_below(const fs::path& base, const fs::path& target,
                                                    const std::vector<fs::path>& roots) {
  fs::path full = (target.is_absolute() ? target : base / target).lexically_normal();
  for (const auto& root : roots) {
    fs::path rel = full.lexically_relative(root);
    if (rel.empty() || *rel.begin() == "..") continue;
    std::vector<std::string> parts;
    for (const auto& part : rel) {
      std::string text = part.string();
      if (text.empty() || text == "." || text == ".." || parts.size() == kMaxParts) {
        return std::nullopt;
      }
      parts.push_back(std::move(text));
    }
    return parts;
  }
  return std::nullopt;
}

std::string joined(const std::vector<std::string>& parts, size_t from, size_t to) {
  std::string out;
  for (size_t i = from; i < to; ++i) out += (out.empty() ? "" : "/") + parts[i];
  return out;
}

bool is_blob_path(const std::vector<std::string>& parts) {
  return parts.size() == 3 && parts[0].starts_with(kRepoFolderPrefix) && parts[1] == kBlobs;
}

bool is_snapshot_path(const std::vector<std::string>& parts) {
  return parts.size() >= 4 && parts[0].starts_with(kRepoFolderPrefix) && parts[1] == kSnapshots;
}

// The second hop: the snapshot file `parts` names must be a link to a blob of the same repo
// folder; the blob's parts, or nothing.
std::optional<std::vector<std::string>> blob_of_snapshot(const sys::SafeDir& hub,
                                                         const std::vector<std::string>& parts,
                                                         const std::vector<fs::path>& roots) {
  auto folder = hub.open_path(joined(parts, 0, parts.size() - 1));
  auto node = folder ? folder->entry(parts.back()) : std::nullopt;
  if (!node || node->type != sys::NodeType::Symlink) return std::nullopt;
  auto text = link_text(folder->fd(), parts.back());
  if (!text) return std::nullopt;
  fs::path base = roots.front();
  for (size_t i = 0; i + 1 < parts.size(); ++i) base /= parts[i];
  auto blob = parts_below(base, *text, roots);
  if (!blob || !is_blob_path(*blob) || (*blob)[0] != parts[0]) return std::nullopt;
  return blob;
}

std::optional<HfBlob> open_blob(const sys::SafeDir& hub, const std::vector<std::string>& parts) {
  auto blobs = hub.open_path(parts[0] + "/" + parts[1]);
  auto node = blobs ? blobs->entry(parts[2]) : std::nullopt;
  if (!node || node->type != sys::NodeType::File) return std::nullopt;
  HfBlob blob;
  blob.fd = blobs->open_read(parts[2]);  // O_NOFOLLOW, regular files only
  struct stat st {};
  if (fstat(blob.fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  blob.id = parts[2];
  blob.size = static_cast<uint64_t>(st.st_size);
  return blob;
}

}  // namespace

std::optional<HfBlob> open_hf_blob(const fs::path& hub_cache, const sys::SafeDir& dir,
                                   const std::string& name) {
  try {
    if (hub_cache.empty()) return std::nullopt;
    // Links hold the path the command was given, or the real one: either names the cache.
    std::vector<fs::path> roots{fs::absolute(hub_cache).lexically_normal()};
    if (!roots.front().has_filename()) roots.front() = roots.front().parent_path();  // "hub/"
    if (auto real = sys::real_path(hub_cache)) roots.push_back(*real);
    auto node = dir.entry(name);
    auto text =
        node && node->type == sys::NodeType::Symlink ? link_text(dir.fd(), name) : std::nullopt;
    auto parts = text ? parts_below(dir.path(), *text, roots) : std::nullopt;
    if (parts && is_snapshot_path(*parts)) {
      parts = blob_of_snapshot(sys::SafeDir::open(roots.front()), *parts, roots);
    }
    if (!parts || !is_blob_path(*parts)) return std::nullopt;
    return open_blob(sys::SafeDir::open(roots.front()), *parts);
  } catch (const Error&) {
    return std::nullopt;  // a candidate only: the file is downloaded instead
  } catch (const std::filesystem::filesystem_error&) {
    return std::nullopt;
  }
}

}  // namespace neuron_cache::local
