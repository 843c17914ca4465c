// The one rule for text from a store, a compile or a manifest in the Markdown a job summary
// shows (GitHub renders it with HTML allowed): such text is shown as the characters it is, never
// as markup, so an error message that holds `<img src=...>`, `[a](https://...)` or `<details>`
// cannot fetch, link or hide anything in the summary.
#pragma once

#include <string>

namespace neuron_cache::report {

// `text` on one line with every character Markdown or HTML would read as markup made literal:
// <, > and & as entities, the Markdown punctuation (\ ` * _ [ ] | ! ~) backslash-escaped, line
// breaks as spaces. For a table cell or a line of prose.
std::string markdown_text(const std::string& text);

// `text` (printable already, so on one line) as a Markdown code span no '|' or backtick of it
// can break out of, in a table cell or a line. Inside a code span neither HTML nor Markdown is
// read.
std::string code_cell(const std::string& text);

}  // namespace neuron_cache::report
