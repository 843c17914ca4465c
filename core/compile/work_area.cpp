#include "compile/work_area.h"

#include <climits>
#include <cstdlib>
#include <random>

#include "format/layout.h"

namespace neuron_cache::compile {

std::string random_hex(int digits) {
  static thread_local std::mt19937_64 generator{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  for (int i = 0; i < digits; ++i) text += kHex[generator() % 16];
  return text;
}

std::optional<std::filesystem::path> real_path(const std::filesystem::path& path) {
  char buffer[PATH_MAX];
  if (realpath(path.c_str(), buffer) == nullptr) return std::nullopt;
  return std::filesystem::path(buffer);
}

bool is_compiler_dir(const DirEntry& item) {
  return item.type == NodeType::Directory && layout::compiler_version_of(item.name).has_value();
}

}  // namespace neuron_cache::compile
