#include "neuron_cache/local/bundle.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "neuron_cache/error.h"
#include "neuron_cache/format/bytes.h"
#include "neuron_cache/format/lockfile.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/sys/fd.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::bundle {
namespace {

constexpr size_t kBlock = 512;
constexpr size_t kChunk = 1 << 20;
using Block = std::array<char, kBlock>;

std::string errno_text() {
  return std::strerror(errno);
}

void write_all(int fd, const char* data, size_t size, const std::string& what) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw operational_error("cannot write " + what + ": " + errno_text());
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// Reads exactly `size` bytes; false at end of file before any byte.
bool read_all(int fd, char* data, size_t size, const std::string& what) {
  size_t got = 0;
  while (got < size) {
    ssize_t n = ::read(fd, data + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw operational_error("cannot read " + what + ": " + errno_text());
    if (n == 0) {
      if (got == 0) return false;
      throw input_error(what + " is truncated: the bundle is damaged; write it again");
    }
    got += static_cast<size_t>(n);
  }
  return true;
}

void put_octal(char* field, size_t width, uint64_t value) {
  std::snprintf(field, width, "%0*llo", static_cast<int>(width - 1),
                static_cast<unsigned long long>(value));
}

unsigned checksum(const Block& block) {
  unsigned sum = 0;
  for (size_t i = 0; i < kBlock; ++i)
    sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(block[i]);
  return sum;
}

// A ustar header of a regular file: the path split into prefix and name at a '/'.
Block header(const std::string& path, uint64_t size) {
  Block block{};
  std::string prefix, name = path;
  if (path.size() > 100) {
    // The last '/' that leaves at most 155 bytes before it; the name after must fit in 100.
    size_t cut = path.rfind('/', 155);
    if (cut == std::string::npos || cut == 0 || path.size() - cut - 1 > 100)
      throw input_error(path + " is too long for a bundle (ustar holds 255 bytes)");
    prefix = path.substr(0, cut);
    name = path.substr(cut + 1);
  }
  std::memcpy(block.data(), name.data(), name.size());
  put_octal(block.data() + 100, 8, 0644);
  put_octal(block.data() + 108, 8, 0);
  put_octal(block.data() + 116, 8, 0);
  put_octal(block.data() + 124, 12, size);
  put_octal(block.data() + 136, 12, 0);
  block[156] = '0';
  std::memcpy(block.data() + 257, "ustar", 6);
  std::memcpy(block.data() + 263, "00", 2);
  std::memcpy(block.data() + 345, prefix.data(), prefix.size());
  std::snprintf(block.data() + 148, 8, "%06o", checksum(block));
  block[155] = ' ';
  return block;
}

void pad(int fd, uint64_t size, const std::string& what) {
  static const Block zeros{};
  if (size % kBlock != 0) write_all(fd, zeros.data(), kBlock - size % kBlock, what);
}

void add_file(int out, const sys::SafeDir& root, const Member& member, const std::string& what) {
  const std::string& path = member.path;
  const std::string& source = member.source;
  size_t slash = source.rfind('/');
  auto dir = slash == std::string::npos ? std::optional(sys::SafeDir::open(root.path()))
                                        : root.open_path(source.substr(0, slash));
  if (!dir) throw operational_error(source + " is not in " + root.path().string());
  sys::UniqueFd in = dir->open_read(source.substr(slash + 1));  // refuses a symlink
  struct stat st {};
  if (fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode))
    throw operational_error(path + " in " + root.path().string() + " is not a regular file");
  uint64_t size = static_cast<uint64_t>(st.st_size);
  Block h = header(path, size);
  write_all(out, h.data(), kBlock, what);
  std::string buffer(kChunk, '\0');
  for (uint64_t left = size; left > 0;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(left, kChunk));
    if (!read_all(in.get(), buffer.data(), n, path)) throw operational_error(path + " shrank");
    write_all(out, buffer.data(), n, what);
    left -= n;
  }
  pad(out, size, what);
}

uint64_t parse_octal(const char* field, size_t width, const std::string& what) {
  uint64_t value = 0;
  size_t i = 0;
  while (i < width && field[i] == ' ') ++i;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (value > (UINT64_MAX >> 3)) throw input_error(what + ": a size beyond any file");
    value = value * 8 + static_cast<uint64_t>(field[i] - '0');
  }
  return value;
}

// The member's path, checked: a relative path of plain components, printable, no "..".
std::string member_path(const Block& block, const std::string& bundle) {
  std::string name(block.data(), strnlen(block.data(), 100));
  std::string prefix(block.data() + 345, strnlen(block.data() + 345, 155));
  std::string path = prefix.empty() ? name : prefix + "/" + name;
  bool safe = !path.empty() && path.front() != '/' && printable(path, 300) == path;
  size_t start = 0;
  while (safe && start <= path.size()) {
    size_t end = path.find('/', start);
    std::string part = path.substr(start, end == std::string::npos ? end : end - start);
    safe = !part.empty() && part != "." && part != "..";
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (!safe) {
    throw input_error(bundle + " holds the member \"" + printable(path, 300) +
                      "\", which is not a safe relative path: the bundle is refused");
  }
  return path;
}

void extract_member(int in, const sys::SafeDir& into, const std::string& path, uint64_t size,
                    const std::string& bundle) {
  size_t slash = path.rfind('/');
  sys::SafeDir dir = slash == std::string::npos ? sys::SafeDir::open(into.path())
                                                : into.make_path(path.substr(0, slash));
  sys::UniqueFd out = dir.create_new(path.substr(slash + 1));  // a duplicate fails here
  std::string buffer(kChunk, '\0');
  for (uint64_t left = size; left > 0;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(left, kChunk));
    if (!read_all(in, buffer.data(), n, bundle)) throw input_error(bundle + " is truncated");
    write_all(out.get(), buffer.data(), n, path);
    left -= n;
  }
  if (size % kBlock != 0) {
    Block skip;
    read_all(in, skip.data(), kBlock - size % kBlock, bundle);
  }
}

// A member's header, checked: a regular file at a safe relative path, of a bounded size.
struct Header {
  std::string path;
  uint64_t size = 0;
};

Header read_header(const Block& block, const std::string& bundle) {
  if (parse_octal(block.data() + 148, 8, bundle) != checksum(block) ||
      std::memcmp(block.data() + 257, "ustar", 5) != 0)
    throw input_error(bundle + " is not a neuron-cache bundle (a damaged tar header)");
  Header h{member_path(block, bundle), parse_octal(block.data() + 124, 12, bundle)};
  char type = block[156];
  if (type != '0' && type != '\0') {
    throw input_error(bundle + " holds \"" + h.path +
                      "\", which is not a regular file (a link, a folder or a device): the "
                      "bundle is refused");
  }
  if (h.size > kMaxMemberBytes)
    throw input_error(bundle + ": \"" + h.path + "\" is beyond what a bundle may hold");
  return h;
}

// The first member is the lockfile (`bundle` writes it first): read whole, bounded.
std::string read_lock(int in, const Header& member, const std::string& bundle) {
  if (member.path != lockfile::kFileName) {
    throw input_error(bundle + " begins with \"" + member.path + "\", not " +
                      std::string(lockfile::kFileName) + ": not a neuron-cache bundle");
  }
  if (member.size == 0 || member.size > lockfile::kMaxLockBytes)
    throw input_error(bundle + ": its lockfile is empty or too large");
  std::string text(static_cast<size_t>(member.size), '\0');
  if (!read_all(in, text.data(), text.size(), bundle)) throw input_error(bundle + " is truncated");
  if (member.size % kBlock != 0) {
    Block skip;
    read_all(in, skip.data(), kBlock - member.size % kBlock, bundle);
  }
  return text;
}

// Every file the lock names, with its size: the only members a bundle may hold after its lock.
std::map<std::string, uint64_t> locked_sizes(const std::string& lock_text,
                                             const std::string& bundle) {
  lockfile::Lock lock = lockfile::parse(lock_text, bundle + "'s lockfile");
  std::map<std::string, uint64_t> sizes;
  for (const auto& file : lockfile::locked_files(lock)) sizes[file.path] = file.size;
  if (sizes.size() > kMaxMembers)
    throw input_error(bundle + ": its lock names more files than a bundle may hold");
  return sizes;
}

// The scratch folder's disk holds what the lock names, checked before anything is written.
void require_space(const std::filesystem::path& into, const std::map<std::string, uint64_t>& sizes,
                   const std::string& bundle) {
  uint64_t total = 0;
  for (const auto& [path, size] : sizes) total += std::min(size, kMaxMemberBytes);
  struct statvfs disk {};
  if (statvfs(into.c_str(), &disk) != 0) return;  // unknown: the writes will say
  uint64_t free_bytes = static_cast<uint64_t>(disk.f_bavail) * disk.f_frsize;
  if (free_bytes < total) {
    throw operational_error("unpacking " + bundle + " needs " + format::human_bytes(total) +
                            " in " + into.parent_path().string() + ", which has " +
                            format::human_bytes(free_bytes) + " free: set TMPDIR to a larger disk");
  }
}

// A member after the lock: one the lock names, of the size it locks, once.
void check_named(const Header& member, const std::map<std::string, uint64_t>& expected,
                 const std::string& bundle) {
  if (member.path == lockfile::kFileName)
    throw input_error(bundle + " holds a second " + member.path + ": the bundle is refused");
  auto it = expected.find(member.path);
  if (it == expected.end()) {
    throw input_error(bundle + " holds \"" + member.path +
                      "\", which its lock does not name or which it holds twice: the bundle is "
                      "refused");
  }
  if (it->second != member.size) {
    throw input_error(bundle + " holds \"" + member.path + "\" of " + std::to_string(member.size) +
                      " bytes where its lock says " + std::to_string(it->second) +
                      ": the bundle is refused");
  }
}

}  // namespace

void write(const std::filesystem::path& output, const std::string& lock_text,
           const std::filesystem::path& root, const std::vector<Member>& members) {
  std::filesystem::path temp = output.string() + ".partial";
  // A left-over partial file (or a link planted in its place) is removed, never written
  // through: the new one is created afresh, and a link made meanwhile is refused.
  if (::unlink(temp.c_str()) != 0 && errno != ENOENT)
    throw operational_error("cannot remove " + temp.string() + ": " + errno_text());
  sys::UniqueFd out(
      ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!out) throw operational_error("cannot write " + temp.string() + ": " + errno_text());
  std::string what = output.string();
  Block h = header(std::string(lockfile::kFileName), lock_text.size());
  write_all(out.get(), h.data(), kBlock, what);
  write_all(out.get(), lock_text.data(), lock_text.size(), what);
  pad(out.get(), lock_text.size(), what);
  sys::SafeDir from = sys::SafeDir::open(root);
  std::set<std::string> seen;
  for (const auto& member : members) {
    if (seen.insert(member.path).second) add_file(out.get(), from, member, what);
  }
  static const Block zeros{};
  write_all(out.get(), zeros.data(), kBlock, what);
  write_all(out.get(), zeros.data(), kBlock, what);
  if (fsync(out.get()) != 0 || std::rename(temp.c_str(), output.c_str()) != 0)
    throw operational_error("cannot write " + what + ": " + errno_text());
}

std::string extract(const std::filesystem::path& bundle, const std::filesystem::path& into) {
  std::string name = bundle.string();
  sys::UniqueFd in(::open(bundle.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) throw input_error("cannot open the bundle " + name + ": " + errno_text());
  sys::SafeDir target = sys::SafeDir::open(into);
  std::string lock_text;
  std::map<std::string, uint64_t> expected;  // what the lock names and is not unpacked yet
  for (Block block; read_all(in.get(), block.data(), kBlock, name);) {
    if (std::all_of(block.begin(), block.end(), [](char c) { return c == 0; })) break;
    Header member = read_header(block, name);
    if (lock_text.empty()) {
      lock_text = read_lock(in.get(), member, name);
      expected = locked_sizes(lock_text, name);
      require_space(into, expected, name);
      continue;
    }
    check_named(member, expected, name);
    extract_member(in.get(), target, member.path, member.size, name);
    expected.erase(member.path);
  }
  if (lock_text.empty())
    throw input_error(name + " holds no " + std::string(lockfile::kFileName) + ": not a bundle");
  return lock_text;
}

}  // namespace neuron_cache::bundle
