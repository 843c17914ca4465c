// What a user sees when they stop a run (Ctrl-C, SIGTERM from a CI runner's cancel): one line
// saying what stays on disk, then the process ends by the same signal, so a shell reports 130
// (143 for SIGTERM) and a script's loop stops as it would for any interrupted program.
#pragma once

#include <string>

namespace neuron_cache::sys {

// Installs handlers for SIGINT and SIGTERM that write `program: interrupted (SIGNAL): <line>` to
// stderr once, then die by that signal. A signal the parent ignores (nohup, a background job of
// a script) stays ignored. Call once, early in main, before any thread starts.
void report_interrupts(const std::string& program, const std::string& line);

// A file size limit (`ulimit -f`) kills a process by SIGXFSZ, without a word, when a write goes
// past it. Ignored, the write fails with EFBIG instead, and the tool names the file and the
// limit (sys::io_failure). Children get the default back (process::spawn resets every signal).
void survive_file_size_limit();

// What an interrupted run leaves (docs/formats.md): entries are installed whole
// or not at all, and the next prefetch reuses the files a killed one staged whole and resumes
// the ones it had partly downloaded from their download journal (net::kProgressStep).
inline constexpr const char* kInterruptedLine =
    "nothing half-written was installed in the cache; files downloaded whole are kept and reused "
    "by the next run, and a file cut short resumes from its last 16 MiB checkpoint";

}  // namespace neuron_cache::sys
