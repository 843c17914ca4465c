#include "neuron_cache/sys/interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <cstring>

namespace neuron_cache::sys {
namespace {

// Built before any signal: a handler may only write() what is already there.
std::array<char, 512> sigint_text{};
std::array<char, 512> sigterm_text{};
volatile sig_atomic_t reported = 0;

void fill(std::array<char, 512>& out, const std::string& program, const char* name,
          const std::string& line) {
  std::string text = program + ": interrupted (" + name + "): " + line + "\n";
  if (text.size() >= out.size()) text = text.substr(0, out.size() - 2) + "\n";
  std::memcpy(out.data(), text.c_str(), text.size() + 1);
}

void on_signal(int signo) {
  if (!reported) {
    reported = 1;
    const char* text = signo == SIGINT ? sigint_text.data() : sigterm_text.data();
    ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
    (void)ignored;
  }
  // Die by the signal itself, not exit(130): the parent then knows the run was interrupted.
  ::signal(signo, SIG_DFL);
  ::raise(signo);
}

void install(int signo) {
  struct sigaction old {};
  if (::sigaction(signo, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) return;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  ::sigaction(signo, &action, nullptr);
}

}  // namespace

void report_interrupts(const std::string& program, const std::string& line) {
  fill(sigint_text, program, "SIGINT", line);
  fill(sigterm_text, program, "SIGTERM", line);
  install(SIGINT);
  install(SIGTERM);
}

void survive_file_size_limit() {
  ::signal(SIGXFSZ, SIG_IGN);
}

}  // namespace neuron_cache::sys
