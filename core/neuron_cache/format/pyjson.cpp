#include "neuron_cache/format/pyjson.h"

#include <locale.h>
#include <stdlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>
#include <vector>

#include "neuron_cache/error.h"
#include "neuron_cache/format/utf8.h"

namespace neuron_cache::pyjson {
namespace {

// Decodes one UTF-8 (or WTF-8 surrogate) sequence at text[pos]; returns its length, 0 if invalid.
size_t decode_utf8(std::string_view text, size_t pos, uint32_t& cp) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  unsigned char b0 = byte(pos);
  size_t len = b0 < 0x80           ? 1
               : (b0 >> 5) == 0x6  ? 2
               : (b0 >> 4) == 0xE  ? 3
               : (b0 >> 3) == 0x1E ? 4
                                   : 0;
  if (len == 0 || pos + len > text.size()) return 0;
  if (len == 1) {
    cp = b0;
    return 1;
  }
  cp = b0 & (0x7F >> len);
  for (size_t i = 1; i < len; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(pos + i) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF) return 0;
  return len;
}

// strtod in the "C" locale whatever the process locale is: it rounds correctly and, like Python,
// overflows to infinity and underflows to zero.
double parse_c_double(const std::string& token) {
  static const locale_t c_locale = newlocale(LC_ALL_MASK, "C", locale_t{});
  return strtod_l(token.c_str(), nullptr, c_locale);
}

class Parser {
 public:
  Parser(std::string_view text, const Limits& limits) : text_(text), limits_(limits) {}

  Json parse_document() {
    if (text_.starts_with("\xEF\xBB\xBF")) fail("unexpected UTF-8 BOM");
    skip_ws();
    Json value = parse_value(0);
    skip_ws();
    if (pos_ != text_.size()) fail("extra data after the JSON value");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) {
        ++column;  // in characters, as Python and editors count, not in UTF-8 bytes
      }
    }
    throw input_error("invalid JSON at line " + std::to_string(line) + ", column " +
                      std::to_string(column) + ": " + what);
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  void skip_ws() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) {
      ++pos_;
    }
  }

  bool consume_literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  // Counted on containers, not values, so that an empty innermost [] or {} cannot slip one level
  // past the limit.
  void enter_container(int depth) {
    if (static_cast<size_t>(depth) >= limits_.max_depth)
      fail("nesting deeper than " + std::to_string(limits_.max_depth) + " levels");
  }

  Json parse_value(int depth) {
    // Counted before a value is built: a DOM costs far more memory than its text, so a small
    // answer of a million empty lists is refused as surely as a deep one.
    if (++values_ > limits_.max_values) {
      fail("more than " + std::to_string(limits_.max_values) + " values");
    }
    char c = peek();
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') return parse_string();
    if (consume_literal("null")) return nullptr;
    if (consume_literal("true")) return true;
    if (consume_literal("false")) return false;
    if (consume_literal("NaN")) return std::numeric_limits<double>::quiet_NaN();
    if (consume_literal("Infinity")) return std::numeric_limits<double>::infinity();
    if (consume_literal("-Infinity")) return -std::numeric_limits<double>::infinity();
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
    fail(at_end() ? "unexpected end of text" : "expected a value");
  }

  Json parse_object(int depth) {
    enter_container(depth);
    ++pos_;
    Json object = Json::object();
    skip_ws();
    if (peek() == '}') {
      ++pos_;
      return object;
    }
    while (true) {
      skip_ws();
      if (peek() != '"') fail("expected a property name in double quotes");
      std::string key = parse_string().get<std::string>();
      skip_ws();
      if (peek() != ':') fail("expected ':' after a property name");
      ++pos_;
      skip_ws();
      object[key] = parse_value(depth + 1);
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return object;
      }
      fail("expected ',' or '}' in an object");
    }
  }

  Json parse_array(int depth) {
    enter_container(depth);
    ++pos_;
    Json array = Json::array();
    skip_ws();
    if (peek() == ']') {
      ++pos_;
      return array;
    }
    while (true) {
      skip_ws();
      array.push_back(parse_value(depth + 1));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return array;
      }
      fail("expected ',' or ']' in an array");
    }
  }

  uint32_t parse_hex4() {
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i, ++pos_) {
      char c = peek();
      int digit = (c >= '0' && c <= '9')   ? c - '0'
                  : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                  : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                           : -1;
      if (at_end() || digit < 0) fail("invalid \\uXXXX escape");
      value = value * 16 + static_cast<uint32_t>(digit);
    }
    return value;
  }

  // Python joins a high surrogate escape with a following low surrogate escape.
  uint32_t parse_unicode_escape() {
    uint32_t cp = parse_hex4();
    if (cp >= 0xD800 && cp <= 0xDBFF && text_.substr(pos_, 2) == "\\u") {
      size_t saved = pos_;
      pos_ += 2;
      uint32_t low = parse_hex4();
      if (low >= 0xDC00 && low <= 0xDFFF) return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
      pos_ = saved;
    }
    return cp;
  }

  void parse_escape(std::string& out) {
    ++pos_;
    char c = peek();
    ++pos_;
    switch (c) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '/':
        out += '/';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u':
        append_utf8(out, parse_unicode_escape());
        break;
      default:
        --pos_;
        fail("invalid escape in a string");
    }
  }

  // The length of the printable ASCII at pos_ that needs neither unescaping nor UTF-8 checks.
  size_t plain_run() const {
    size_t end = pos_;
    while (end < text_.size()) {
      unsigned char b = static_cast<unsigned char>(text_[end]);
      if (b < 0x20 || b >= 0x80 || b == '"' || b == '\\') break;
      ++end;
    }
    return end - pos_;
  }

  Json parse_string() {
    ++pos_;
    std::string out;
    while (true) {
      if (at_end()) fail("unterminated string");
      char c = peek();
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (size_t run = plain_run(); run > 0) {  // most strings: one append, no decoding
        out.append(text_.substr(pos_, run));
        pos_ += run;
      } else if (c == '\\') {
        parse_escape(out);
      } else if (static_cast<unsigned char>(c) < 0x20) {
        fail("invalid control character in a string");
      } else {
        uint32_t cp = 0;
        size_t len = decode_utf8(text_, pos_, cp);
        if (len == 0 || (cp >= 0xD800 && cp <= 0xDFFF)) fail("invalid UTF-8 in a string");
        out.append(text_.substr(pos_, len));
        pos_ += len;
      }
    }
  }

  void skip_digits() {
    while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
  }

  Json parse_number() {
    size_t start = pos_;
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
    } else if (peek() >= '1' && peek() <= '9') {
      skip_digits();
    } else {
      fail("invalid number");
    }
    bool is_float = false;
    if (peek() == '.' && pos_ + 1 < text_.size() && text_[pos_ + 1] >= '0' &&
        text_[pos_ + 1] <= '9') {
      is_float = true;
      ++pos_;
      skip_digits();
    }
    if (peek() == 'e' || peek() == 'E') {
      size_t saved = pos_++;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (peek() >= '0' && peek() <= '9') {
        is_float = true;
        skip_digits();
      } else {
        pos_ = saved;  // Python stops the number before a bare 'e'; what follows is an error.
      }
    }
    std::string token(text_.substr(start, pos_ - start));
    if (is_float) return parse_c_double(token);
    return parse_integer(token);
  }

  Json parse_integer(const std::string& token) {
    const char* first = token.data();
    const char* last = token.data() + token.size();
    if (token[0] == '-') {
      int64_t value = 0;
      if (std::from_chars(first, last, value).ec == std::errc()) return value;
    } else {
      uint64_t value = 0;
      if (std::from_chars(first, last, value).ec == std::errc()) {
        if (value <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return static_cast<int64_t>(value);
        }
        return value;
      }
    }
    fail("integer " + token + " is outside the 64-bit range this tool supports");
  }

  std::string_view text_;
  Limits limits_;
  size_t values_ = 0;
  size_t pos_ = 0;
};

void write_escaped(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  auto escape_unit = [&](uint32_t unit) {
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(unit >> shift) & 0xF];
  };
  out += '"';
  for (size_t pos = 0; pos < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[pos]);
    if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
      out += static_cast<char>(c);
      ++pos;
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        ++pos;
        continue;
      case '\\':
        out += "\\\\";
        ++pos;
        continue;
      case '\n':
        out += "\\n";
        ++pos;
        continue;
      case '\r':
        out += "\\r";
        ++pos;
        continue;
      case '\t':
        out += "\\t";
        ++pos;
        continue;
      case '\b':
        out += "\\b";
        ++pos;
        continue;
      case '\f':
        out += "\\f";
        ++pos;
        continue;
      default:
        break;
    }
    uint32_t cp = 0;
    size_t len = decode_utf8(s, pos, cp);
    if (len == 0) throw input_error("cannot serialize a string that is not valid UTF-8");
    pos += len;
    if (cp >= 0x10000) {
      cp -= 0x10000;
      escape_unit(0xD800 + (cp >> 10));
      escape_unit(0xDC00 + (cp & 0x3FF));
    } else {
      escape_unit(cp);
    }
  }
  out += '"';
}

void write_float(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
  } else if (std::isinf(value)) {
    out += value > 0 ? "Infinity" : "-Infinity";
  } else {
    out += float_repr(value);
  }
}

// Whether every key is a decimal int as str(int) writes it ("0", "-3", not "03").
bool int_keys(const Json& object) {
  for (const auto& [key, item] : object.items()) {
    size_t start = key.starts_with('-') ? 1 : 0;
    if (key.size() <= start || key.size() > start + 18) return false;
    if (key[start] == '0' && key.size() > start + 1) return false;
    for (size_t i = start; i < key.size(); ++i) {
      if (key[i] < '0' || key[i] > '9') return false;
    }
  }
  return true;
}

class Writer {
 public:
  Writer(std::optional<int> indent, const std::set<std::string>* int_keyed)
      : indent_(indent), int_keyed_(int_keyed) {}

  void write(const Json& value, int level) {
    switch (value.type()) {
      case Json::value_t::null:
        out_ += "null";
        break;
      case Json::value_t::boolean:
        out_ += value.get<bool>() ? "true" : "false";
        break;
      case Json::value_t::number_integer:
        out_ += std::to_string(value.get<int64_t>());
        break;
      case Json::value_t::number_unsigned:
        out_ += std::to_string(value.get<uint64_t>());
        break;
      case Json::value_t::number_float:
        write_float(out_, value.get<double>());
        break;
      case Json::value_t::string:
        write_escaped(out_, value.get_ref<const std::string&>());
        break;
      case Json::value_t::array:
        write_array(value, level);
        break;
      case Json::value_t::object:
        write_object(value, level, parent_is_int_keyed_);
        break;
      default:
        throw input_error("cannot serialize binary or discarded JSON values");
    }
  }

  std::string take() { return std::move(out_); }

 private:
  // Python's separators: "," + newline with indent, ", " without.
  void separator(int level) {
    if (indent_) {
      out_ += ",";
      newline(level);
    } else {
      out_ += ", ";
    }
  }

  void newline(int level) {
    if (!indent_) return;
    out_ += '\n';
    out_.append(static_cast<size_t>(*indent_ * level), ' ');
  }

  void write_array(const Json& array, int level) {
    if (array.empty()) {
      out_ += "[]";
      return;
    }
    out_ += '[';
    newline(level + 1);
    bool first = true;
    for (const auto& item : array) {
      if (!first) separator(level + 1);
      first = false;
      write(item, level + 1);
    }
    newline(level);
    out_ += ']';
  }

  // nlohmann's object map is ordered by byte-wise key comparison, which for UTF-8 (and WTF-8)
  // is code point order: exactly Python's sort_keys order.
  // A dict with int keys (int_keyed) sorts them as ints: "2" before "10".
  void write_object(const Json& object, int level, bool int_keyed) {
    if (object.empty()) {
      out_ += "{}";
      return;
    }
    std::vector<std::pair<std::string, const Json*>> members;
    for (const auto& [key, item] : object.items()) members.emplace_back(key, &item);
    if (int_keyed && int_keys(object)) {
      std::stable_sort(members.begin(), members.end(), [](const auto& a, const auto& b) {
        return std::stoll(a.first) < std::stoll(b.first);
      });
    }
    out_ += '{';
    newline(level + 1);
    bool first = true;
    for (const auto& [key, item] : members) {
      if (!first) separator(level + 1);
      first = false;
      write_escaped(out_, key);
      out_ += ": ";
      parent_is_int_keyed_ = int_keyed_ != nullptr && int_keyed_->count(key) > 0;
      write(*item, level + 1);
    }
    parent_is_int_keyed_ = false;
    newline(level);
    out_ += '}';
  }

  std::optional<int> indent_;
  const std::set<std::string>* int_keyed_;
  bool parent_is_int_keyed_ = false;
  std::string out_;
};

}  // namespace

Json parse(std::string_view text, const Limits& limits) {
  if (text.size() > limits.max_bytes) {
    throw input_error("a JSON text of " + std::to_string(text.size()) + " bytes (at most " +
                      std::to_string(limits.max_bytes) + " expected here)");
  }
  return Parser(text, limits).parse_document();
}

std::optional<Json> parse_or_nothing(std::string_view text, const Limits& limits) {
  try {
    return parse(text, limits);
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::optional<Json> read_kept(const sys::RootedFile& file, const Limits& limits) {
  std::optional<std::string> text = file.read(limits.max_bytes);
  return text ? parse_or_nothing(*text, limits) : std::nullopt;
}

std::string dumps(const Json& value, std::optional<int> indent,
                  const std::set<std::string>* int_keyed) {
  Writer writer(indent, int_keyed);
  writer.write(value, 0);
  return writer.take();
}

std::string float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, std::fabs(value),
                                 std::chars_format::scientific);
  std::string_view sci(buffer, static_cast<size_t>(end - buffer));
  size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits += c;
  }
  int exponent = std::atoi(std::string(sci.substr(e + 1)).c_str());
  int decpt = exponent + 1;  // value = 0.DIGITS * 10^decpt
  int n = static_cast<int>(digits.size());
  std::string out = std::signbit(value) ? "-" : "";
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (n > 1) out += "." + digits.substr(1);
    std::string exp_digits = std::to_string(std::abs(exponent));
    if (exp_digits.size() < 2) exp_digits = "0" + exp_digits;
    out += std::string("e") + (exponent < 0 ? "-" : "+") + exp_digits;
  } else if (decpt <= 0) {
    out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
  } else if (decpt >= n) {
    out += digits + std::string(static_cast<size_t>(decpt - n), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(decpt)) + "." +
           digits.substr(static_cast<size_t>(decpt));
  }
  return out;
}

}  // namespace neuron_cache::pyjson
