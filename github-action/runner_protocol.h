// The GitHub Actions runner's side of the contract, as the action binary needs it: workflow
// commands on stdout (annotations, masks, groups), the GITHUB_OUTPUT and GITHUB_STEP_SUMMARY
// files, and whether the triggering event is a pull request from a fork (GITHUB_EVENT_PATH).
// Nothing here knows about caches.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace neuron_cache::action {

// Escapes a workflow command's data as the runner unescapes it: % \r \n.
std::string escape_data(const std::string& text);

// Writes workflow commands to one stream (stdout in the action), each line flushed so they
// interleave correctly with anything else the step prints. Whatever they carry may quote a store
// (an error message, a log): it is printed with every known secret masked (config/redact.h) and
// never where the runner would obey it, by one rule: command data escaped (escape_data), free
// text between stop-commands whenever the runner could read a command in it.
class WorkflowCommands {
 public:
  explicit WorkflowCommands(std::ostream& out) : out_(out) {}
  void mask(const std::string& secret);
  void notice(const std::string& text) { annotation("notice", text); }
  void warning(const std::string& text) { annotation("warning", text); }
  void error(const std::string& text) { annotation("error", text); }
  void group(const std::string& title);
  void endgroup();
  // Prints text that did not come from us (a compiler's log) with workflow commands disabled,
  // so a line in it that looks like `::add-mask::` or `::error::` is shown, not obeyed.
  void untrusted(const std::string& text);
  // Free text (a progress line, the plan), as it is when the runner could read no command in it,
  // else as untrusted().
  void line(const std::string& text);

 private:
  void annotation(const std::string& kind, const std::string& text);
  // Each command or line in one write, flushed: progress lines come from other threads too (the
  // transfer display, the compile workers), and one written in parts could be cut by another.
  void write(const std::string& text);
  std::ostream& out_;
};

// A token no line of `avoid` contains, for heredoc-style delimiters and stop-commands.
std::string random_delimiter(const std::string& avoid);

// One step output in the file format GITHUB_OUTPUT expects: `name=value` for one-line values,
// `name<<DELIMITER` ... `DELIMITER` (random) for the rest and for JSON.
std::string output_entry(const std::string& name, const std::string& value, bool multi_line);

// Appends to a file the runner gave us (GITHUB_OUTPUT, GITHUB_STEP_SUMMARY), known secrets
// masked; throws an operational Error when it cannot.
void append_file(const std::string& path, const std::string& text);

// Whether the event that started the workflow is a pull request whose head lives in another
// repository, and why we think so (for the notice). Nothing when it is not a pull request event.
struct ForkCheck {
  bool fork = false;
  std::string why;
};
std::optional<ForkCheck> pull_request_fork(const std::string& event_name,
                                           const std::string& event_path);

}  // namespace neuron_cache::action
