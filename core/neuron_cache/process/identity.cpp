#include "neuron_cache/process/identity.h"

#include <unistd.h>

#include <cctype>
#include <charconv>
#include <optional>
#include <sstream>

#include "neuron_cache/error.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::process {
namespace {

std::string trimmed(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

// "pid:[4026531836]": processes in another pid namespace (another container on the same
// machine) have pids of their own, so a pid means nothing across them.
std::string pid_namespace() {
  char target[64] = {};
  ssize_t n = ::readlink("/proc/self/ns/pid", target, sizeof target - 1);
  if (n <= 0) return "";
  std::string text(target, static_cast<size_t>(n));
  return text.find_first_of(" \t\n") == std::string::npos ? text : "";
}

// Field 22 of /proc/<pid>/stat, after the command name in parentheses (which may hold anything,
// parentheses included): when the process started, in clock ticks since boot.
std::optional<std::string> start_time(long pid) {
  std::string stat;
  try {
    stat = sys::SafeDir::open("/proc/" + std::to_string(pid)).read_small_file("stat", 4096);
  } catch (const Error&) {
    return std::nullopt;
  }
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int index = 3; index <= 22; ++index) {  // fields 3.. follow the name
    if (!(fields >> field)) return std::nullopt;
  }
  return field;
}

std::optional<long> pid_of(const std::string& text) {
  long pid = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), pid);
  if (error != std::errc() || end != text.data() + text.size() || pid <= 0 || pid > 4194304)
    return std::nullopt;
  return pid;
}

}  // namespace

const std::string& boot_id() {
  static const std::string id = [] {
    try {
      std::string text =
          sys::SafeDir::open("/proc/sys/kernel/random").read_small_file("boot_id", 256);
      return trimmed(text);
    } catch (const Error&) {
      return std::string("unknown");
    }
  }();
  return id;
}

std::string identity_of(long pid) {
  std::string ns = pid_namespace();
  std::optional<std::string> started = start_time(pid);
  if (boot_id() == "unknown" || boot_id().empty() || ns.empty() || !started) return "";
  return boot_id() + " " + ns + " " + std::to_string(pid) + " " + *started;
}

const std::string& this_process() {
  static const std::string identity = identity_of(static_cast<long>(::getpid()));
  return identity;
}

bool ended(std::string_view identity) {
  const std::string& mine = this_process();
  if (mine.empty() || identity.size() > 255) return false;
  std::istringstream words{std::string(identity)};
  std::string boot, ns, pid_text, started, extra;
  if (!(words >> boot >> ns >> pid_text >> started) || (words >> extra)) return false;
  std::istringstream own(mine);
  std::string own_boot, own_ns;
  own >> own_boot >> own_ns;
  if (boot != own_boot || ns != own_ns) return false;
  std::optional<long> pid = pid_of(pid_text);
  if (!pid) return false;
  std::optional<std::string> now = start_time(*pid);
  return !now || *now != started;
}

}  // namespace neuron_cache::process
