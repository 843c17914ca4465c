#include "neuron_cache/manifest/command_template.h"

#include <map>

#include "neuron_cache/error.h"

namespace neuron_cache::manifest {
namespace {

constexpr std::string_view kPlaceholders =
    "{model_id}, {revision}, {task}, {batch_size}, {sequence_length}, {num_cores}, "
    "{tensor_parallel_size}, {precision}, {instance_type}, {name}, {output}";

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Step 1: words, quotes removed.
std::vector<std::string> split_words(std::string_view command) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;  // "" makes a word even though it adds no character
  for (size_t i = 0; i < command.size(); ++i) {
    char c = command[i];
    if (is_space(c)) {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\'') {
      size_t end = command.find('\'', i + 1);
      if (end == std::string_view::npos) {
        throw input_error("unterminated ' in the compile command (add the closing ')");
      }
      word.append(command.substr(i + 1, end - i - 1));
      i = end;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < command.size() && command[j] != '"'; ++j) {
        if (command[j] == '\\' && j + 1 < command.size() &&
            (command[j + 1] == '"' || command[j + 1] == '\\')) {
          ++j;
        }
        word += command[j];
      }
      if (j >= command.size()) {
        throw input_error("unterminated \" in the compile command (add the closing \")");
      }
      i = j;
    } else if (c == '\\' && i + 1 < command.size()) {
      word += command[++i];
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  if (words.empty()) throw input_error("the compile command is empty (give the program to run)");
  return words;
}

using Values = std::map<std::string, std::string, std::less<>>;

// Step 2 for one word.
std::string substitute(std::string_view word, const Values& values) {
  std::string out;
  for (size_t i = 0; i < word.size(); ++i) {
    char c = word[i];
    if ((c == '{' || c == '}') && i + 1 < word.size() && word[i + 1] == c) {
      out += c;
      ++i;
    } else if (c == '}') {
      throw input_error("lone } in the compile command \"" + std::string(word) +
                        "\" (write }} for a literal })");
    } else if (c == '{') {
      size_t end = word.find('}', i + 1);
      if (end == std::string_view::npos) {
        throw input_error("unterminated placeholder in the compile command \"" + std::string(word) +
                          "\" (close it with }, or write {{ for a literal {)");
      }
      std::string_view key = word.substr(i + 1, end - i - 1);
      auto it = values.find(key);
      if (it == values.end()) {
        throw input_error(
            "unknown placeholder {" + std::string(key) +
            "} in the compile command (expected one of: " + std::string(kPlaceholders) + ")");
      }
      out += it->second;
      i = end;
    } else {
      out += c;
    }
  }
  return out;
}

Values values_of(const Configuration& c, const std::string& output) {
  std::string cores = std::to_string(c.num_cores);
  return {{"model_id", c.model_id},
          {"revision", c.revision.value_or("main")},
          {"task", c.task},
          {"batch_size", std::to_string(c.batch_size)},
          {"sequence_length", std::to_string(c.sequence_length)},
          {"num_cores", cores},
          {"tensor_parallel_size", cores},
          {"precision", c.precision},
          {"instance_type", c.instance_type},
          {"name", c.name},
          {"output", output}};
}

}  // namespace

void check_command_template(std::string_view command) {
  render_command(command, Configuration{}, "");
}

std::vector<std::string> render_command(std::string_view command,
                                        const Configuration& configuration,
                                        const std::string& output) {
  Values values = values_of(configuration, output);
  std::vector<std::string> argv;
  for (const std::string& word : split_words(command)) argv.push_back(substitute(word, values));
  return argv;
}

}  // namespace neuron_cache::manifest
