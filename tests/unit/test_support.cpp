#include "test_support.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace neuron_cache::testing {

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "neuron-cache-test-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code error;
  // Tests chmod folders read-only; give permissions back so everything can be removed.
  for (auto it = fs::recursive_directory_iterator(path_, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (it->is_directory(error) && !it->is_symlink(error)) {
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, error);
    }
  }
  fs::remove_all(path_, error);
}

void write_file(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << content;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

namespace {
long status_kib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with(field + ":")) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}
}  // namespace

long resident_kib() {
  return status_kib("VmRSS");
}

long peak_resident_kib() {
  return status_kib("VmHWM");
}

void reset_peak_rss() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

fs::path make_entry(const fs::path& root, const std::string& module, Kind kind,
                    const std::string& compiler_dir) {
  fs::path dir = root / compiler_dir / module;
  fs::create_directories(dir);
  const std::string flags = "[\"--model-type=transformer\", \"--auto-cast=none\"]";
  switch (kind) {
    case Kind::Success:
      write_file(dir / "model.hlo_module.pb", "hlo-bytes");
      write_file(dir / "compile_flags.json", flags);
      write_file(dir / "model.neff", "neff-bytes-" + module);
      write_file(dir / "model.done", "");
      break;
    case Kind::Failed:
      write_file(dir / "model.hlo_module.pb", "hlo-bytes");
      write_file(dir / "compile_flags.json", flags);
      write_file(dir / "model.log", "ERROR: compilation failed");
      break;
    case Kind::Locked:
      write_file(dir / "model.hlo_module.pb", "hlo-bytes");
      write_file(dir / "model.hlo_module.pb.lock", "");
      break;
    case Kind::Empty:
      write_file(dir / "model.hlo_module.pb", "hlo-bytes");
      break;
    case Kind::LegacySuccess:
      write_file(dir / "model.hlo.pb", "hlo-bytes");
      write_file(dir / "compile_flags.txt", "--model-type=transformer --auto-cast=none");
      write_file(dir / "model.neff", "legacy-neff");
      write_file(dir / "model.done", "");
      break;
    case Kind::Traced:
      write_file(dir / "model.neuron", "traced-model");
      write_file(dir / "config.json", "{\"model_type\": \"bert\"}");
      write_file(dir / "tokenizer" / "vocab.txt", "[PAD]\n");
      break;
  }
  return dir;
}

std::map<std::string, std::string> snapshot_tree(const fs::path& root) {
  std::map<std::string, std::string> nodes;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    std::string rel = fs::relative(it->path(), root).string();
    if (it->is_symlink()) {
      nodes[rel] = "link:" + fs::read_symlink(it->path()).string();
    } else if (it->is_directory()) {
      nodes[rel] = "dir";
    } else {
      nodes[rel] = "file:" + read_file(it->path());
    }
  }
  return nodes;
}

int run_command(const std::string& command_line, std::string* output) {
  FILE* pipe = popen((command_line + " 2>&1").c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + command_line);
  std::array<char, 4096> buffer{};
  std::string text;
  size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) text.append(buffer.data(), n);
  int status = pclose(pipe);
  if (output != nullptr) *output = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

size_t stat_calls(const std::string& strace_summary) {
  size_t calls = 0;
  std::istringstream lines(strace_summary);
  for (std::string line; std::getline(lines, line);) {
    // "% time  seconds  usecs/call  calls  [errors]  syscall"
    std::istringstream words(line);
    std::vector<std::string> w{std::istream_iterator<std::string>(words), {}};
    bool is_stat = w.size() >= 5 && w.back().find("stat") != std::string::npos;
    if (is_stat && std::isdigit(static_cast<unsigned char>(w[3][0]))) calls += std::stoul(w[3]);
  }
  return calls;
}

bool strace_works() {
  return run_command("strace -f -c -o /dev/null true") == 0;
}

std::string tool_path() {
  return NEURON_CACHE_TOOL;
}

pid_t spawn_logged(std::vector<std::string> args, const fs::path& log) {
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = -1;
  int error = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(error));
  }
  return pid;
}

}  // namespace neuron_cache::testing
