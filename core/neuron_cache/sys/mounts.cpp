#include "neuron_cache/sys/mounts.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

namespace neuron_cache::sys {
namespace {

// mountinfo lines are the kernel's; still, a bound: a few thousand mounts fit in far less.
constexpr size_t kMaxMountinfoBytes = 8 << 20;

// mountinfo escapes space, tab, newline and backslash in paths as \ooo (octal).
std::string unescape_octal(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    bool octal = text[i] == '\\' && i + 3 < text.size() &&
                 text.substr(i + 1, 3).find_first_not_of("01234567") == std::string::npos;
    if (octal) {
      out += static_cast<char>(std::stoi(text.substr(i + 1, 3), nullptr, 8));
      i += 3;
    } else {
      out += text[i];
    }
  }
  return out;
}

bool listed_in_mountinfo(const std::filesystem::path& path) {
  std::ifstream file("/proc/self/mountinfo");
  std::string line;
  size_t read = 0;
  while (std::getline(file, line) && (read += line.size() + 1) <= kMaxMountinfoBytes) {
    std::istringstream fields(line);
    std::string id, parent, device, root, mount_point;
    if (!(fields >> id >> parent >> device >> root >> mount_point)) continue;
    if (unescape_octal(mount_point) == path.string()) return true;
  }
  return false;
}

}  // namespace

bool is_mount_point(const std::filesystem::path& path) {
  std::error_code error;
  std::filesystem::path real = std::filesystem::canonical(path, error);
  if (error) return false;
  struct stat self {
  }, parent{};
  if (::stat(real.c_str(), &self) != 0 || ::stat((real / "..").c_str(), &parent) != 0) {
    return false;
  }
  if (self.st_dev != parent.st_dev || self.st_ino == parent.st_ino) return true;
  return listed_in_mountinfo(real);
}

}  // namespace neuron_cache::sys
