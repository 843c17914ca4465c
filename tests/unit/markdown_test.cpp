// The job summary shows store and compile text as text: an error message that holds HTML or
// Markdown (an <img> that would fetch a URL, a link with a hidden target, <details> that hides
// what follows) renders as its characters, never as markup.
#include "neuron_cache/report/markdown.h"

#include <gtest/gtest.h>

#include "neuron_cache/pipeline/run.h"
#include "neuron_cache/report/report.h"

namespace neuron_cache::report {
namespace {

const char* const kHostile =
    "push failed: <img src=https://evil.example/p.png> [docs](https://evil.example) "
    "<details><summary>ok</summary> **bold** `x` | col ![i](https://evil.example/i) ~~s~~ &amp;\n"
    "# heading";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(MarkdownText, HtmlAndMarkdownAreShownAsTheirCharacters) {
  std::string md = markdown_text(kHostile);
  EXPECT_FALSE(contains(md, "<")) << md;
  EXPECT_FALSE(contains(md, ">")) << md;
  EXPECT_FALSE(contains(md, "\n")) << md;
  EXPECT_TRUE(contains(md, "&lt;img src=https://evil.example/p.png&gt;")) << md;
  EXPECT_TRUE(contains(md, "\\[docs\\](https://evil.example)")) << md;
  EXPECT_TRUE(contains(md, "\\!\\[i\\]")) << md;
  EXPECT_TRUE(contains(md, "\\*\\*bold\\*\\* \\`x\\` \\| col")) << md;
  EXPECT_TRUE(contains(md, "\\~\\~s\\~\\~ &amp;amp;")) << md;
  // Plain words, names and paths read as they are.
  EXPECT_EQ(markdown_text("llama3-8b-chat: 12 MiB from acme/cache (2.5 s)"),
            "llama3-8b-chat: 12 MiB from acme/cache (2.5 s)");
}

TEST(MarkdownText, ACodeCellHoldsAnyText) {
  EXPECT_EQ(code_cell("a|b`c<d>"), "`a\\|b'c<d>`");
}

TEST(MarkdownText, TheRunSummaryEscapesEveryNoteAndNotice) {
  pipeline::RunResult run;
  run.repo = "acme/<b>cache</b>";
  plan::PlanRow row;
  row.target.configuration.name = "chat_<i>";
  row.target.configuration.model_id = "acme/[m](https://evil.example)";
  row.target.key = "0123456789abcdef";
  row.reason = kHostile;
  run.initial.rows.push_back(row);
  run.notices.push_back({true, kHostile});
  std::string md = run_markdown(run);
  for (const char* markup : {"<img", "<details", "<i>", "[docs](", "[m](", "**bold**"})
    EXPECT_FALSE(contains(md, markup)) << markup << " in\n" << md;
  EXPECT_TRUE(contains(md, "**warning:** push failed: &lt;img")) << md;
  EXPECT_TRUE(contains(md, "| chat\\_&lt;i&gt; |")) << md;
  // The repo is a code span: inside one, neither HTML nor Markdown is read.
  EXPECT_TRUE(contains(md, "| Cache repo | `acme/<b>cache</b>` |")) << md;
}

}  // namespace
}  // namespace neuron_cache::report
