// A profile's credential_process: its command line split as the AWS CLI splits it (no shell),
// run with a time and output bound; its stdout is the Version 1 JSON document.
#include "neuron_cache/aws/sources.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/process/process.h"

namespace neuron_cache::aws {
namespace {

// A helper that prompts (MFA) or hangs must not hold a run forever.
constexpr std::chrono::minutes kProcessTimeout{2};
constexpr size_t kMaxProcessOutput = 64u << 10;

// POSIX-shell-like words: blanks separate, quotes group, a backslash escapes (shlex.split).
std::vector<std::string> split_command(const std::string& command, const std::string& origin) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < command.size(); ++i) {
    char c = command[i];
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < command.size()) {
        word += command[++i];
      } else {
        word += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < command.size()) {
      word += command[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote != 0) throw input_error("credential_process in " + origin + " has an unclosed quote");
  if (in_word) words.push_back(std::move(word));
  if (words.empty()) throw input_error("credential_process in " + origin + " is empty");
  return words;
}

}  // namespace

Credentials fetch_process(const config::AwsSource& source, const FetchOptions& /*options*/) {
  std::vector<std::string> argv = split_command(source.process_command, source.origin);
  const std::string what = "credential_process " + argv[0] + " (" + source.origin + ")";
  process::ProcessResult run = process::run_for_stdout(argv, kProcessTimeout, kMaxProcessOutput);
  if (run.exit_code == 127) throw input_error(what + " cannot be run: check the command");
  if (run.timed_out)
    throw operational_error(what + " did not finish within 2 minutes: run it by hand to see why");
  if (run.output.size() > kMaxProcessOutput)
    throw operational_error(what + " printed more than 64 KiB: it is not a credential helper");
  if (run.exit_code != 0) {
    throw operational_error(what + " exited with status " + std::to_string(run.exit_code) +
                            ": run it by hand to see why");
  }
  std::optional<pyjson::Json> document =
      pyjson::parse_or_nothing(run.output, pyjson::Limits{kMaxProcessOutput, 8, 1000});
  bool versioned = document && document->is_object() && document->contains("Version") &&
                   (*document)["Version"] == 1;
  if (!versioned) {
    throw operational_error(what + " did not print a Version 1 credential document");
  }
  return credentials_from_json(run.output, what);
}

}  // namespace neuron_cache::aws
