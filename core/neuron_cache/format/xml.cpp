#include "neuron_cache/format/xml.h"

#include <cctype>

#include "neuron_cache/error.h"
#include "neuron_cache/format/utf8.h"

namespace neuron_cache::xml {
namespace {

[[noreturn]] void bad(const std::string& why) {
  throw operational_error("not the XML expected (" + why + ")");
}

void append_character(std::string& out, uint32_t code) {
  if (code == 0 || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) bad("bad character");
  append_utf8(out, code);
}

// Decodes one "&...;" reference at text[i]; returns the index after it.
size_t decode_entity(std::string_view text, size_t i, std::string& out) {
  size_t end = text.find(';', i);
  if (end == std::string_view::npos || end - i > 12) bad("unterminated entity");
  std::string_view name = text.substr(i + 1, end - i - 1);
  if (name == "amp")
    out += '&';
  else if (name == "lt")
    out += '<';
  else if (name == "gt")
    out += '>';
  else if (name == "quot")
    out += '"';
  else if (name == "apos")
    out += '\'';
  else if (name.size() > 1 && name[0] == '#') {
    bool hex = name[1] == 'x';
    std::string_view digits = name.substr(hex ? 2 : 1);
    if (digits.empty() || digits.size() > 8) bad("bad character reference");
    uint32_t code = 0;
    for (char c : digits) {
      int v = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
              : hex && std::isxdigit(static_cast<unsigned char>(c))
                  ? std::tolower(static_cast<unsigned char>(c)) - 'a' + 10
                  : -1;
      if (v < 0) bad("bad character reference");
      code = code * (hex ? 16 : 10) + static_cast<uint32_t>(v);
    }
    append_character(out, code);
  } else {
    bad("unknown entity");
  }
  return end + 1;
}

void append_text(std::string& out, std::string_view raw, size_t max_text) {
  for (size_t i = 0; i < raw.size();) {
    if (raw[i] == '&') {
      i = decode_entity(raw, i, out);
    } else {
      out += raw[i++];
    }
    if (out.size() > max_text) bad("a text longer than " + std::to_string(max_text));
  }
}

std::string local_name(std::string_view tag) {
  size_t end = tag.find_first_of(" \t\r\n/");
  std::string_view name = tag.substr(0, end);
  if (size_t colon = name.find(':'); colon != std::string_view::npos) name.remove_prefix(colon + 1);
  if (name.empty()) bad("an element without a name");
  return std::string(name);
}

class Parser {
 public:
  Parser(std::string_view body, size_t max_text) : body_(body), max_text_(max_text) {}

  Element run() {
    if (body_.size() > kMaxBodyBytes) bad("more than " + std::to_string(kMaxBodyBytes) + " bytes");
    Element root;
    root.name = "#document";
    std::vector<Element*> stack{&root};
    size_t i = 0;
    while (i < body_.size()) {
      size_t open = body_.find('<', i);
      if (open == std::string_view::npos) open = body_.size();
      if (stack.size() > 1) append_text(stack.back()->text, body_.substr(i, open - i), max_text_);
      if (open == body_.size()) break;
      i = tag(open, stack);
    }
    if (stack.size() != 1) bad("unclosed element <" + stack.back()->name + ">");
    if (root.children.size() != 1) bad("not one root element");
    return std::move(root.children.front());
  }

 private:
  size_t skip_until(size_t from, std::string_view end) {
    size_t at = body_.find(end, from);
    if (at == std::string_view::npos) bad("unterminated markup");
    return at + end.size();
  }

  size_t tag(size_t open, std::vector<Element*>& stack) {
    std::string_view rest = body_.substr(open);
    if (rest.starts_with("<?")) return skip_until(open, "?>");
    if (rest.starts_with("<!--")) return skip_until(open, "-->");
    if (rest.starts_with("<![CDATA[")) {
      size_t end = skip_until(open, "]]>");
      if (stack.size() > 1) {
        stack.back()->text.append(body_.substr(open + 9, end - open - 12));
        if (stack.back()->text.size() > max_text_) bad("a text too long");
      }
      return end;
    }
    if (rest.starts_with("<!")) bad("a DTD or declaration");
    size_t close = body_.find('>', open);
    if (close == std::string_view::npos) bad("unterminated tag");
    std::string_view inside = body_.substr(open + 1, close - open - 1);
    if (inside.starts_with("/")) {
      if (stack.size() == 1 || local_name(inside.substr(1)) != stack.back()->name) {
        bad("mismatched closing tag");
      }
      stack.pop_back();
      return close + 1;
    }
    if (++elements_ > kMaxElements) bad("more than " + std::to_string(kMaxElements) + " elements");
    if (stack.size() > kMaxDepth) bad("nested deeper than " + std::to_string(kMaxDepth));
    Element& child = stack.back()->children.emplace_back();
    child.name = local_name(inside);
    if (!inside.ends_with("/")) stack.push_back(&child);
    return close + 1;
  }

  std::string_view body_;
  size_t max_text_;
  size_t elements_ = 0;
};

}  // namespace

std::optional<std::string> Element::child(std::string_view wanted) const {
  for (const Element& c : children) {
    if (c.name == wanted) return c.text;
  }
  return std::nullopt;
}

Element parse(std::string_view body, size_t max_text) {
  return Parser(body, max_text).run();
}

}  // namespace neuron_cache::xml
