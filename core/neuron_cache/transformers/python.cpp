#include "neuron_cache/transformers/python.h"

#include <cmath>
#include <limits>

namespace neuron_cache::transformers {
namespace {

bool is_number(const Json& v) {
  return v.is_number() || v.is_boolean();
}

double as_double(const Json& v) {
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  if (v.is_number_unsigned()) return static_cast<double>(v.get<uint64_t>());
  if (v.is_number_integer()) return static_cast<double>(v.get<int64_t>());
  return v.get<double>();
}

[[noreturn]] void type_error(const std::string& op, const Json& a, const Json& b) {
  throw PythonError("TypeError: unsupported operand types for " + op + ": '" + type_name(a) +
                    "' and '" + type_name(b) + "'");
}

Json checked(__int128 value) {
  if (value > std::numeric_limits<int64_t>::max() || value < std::numeric_limits<int64_t>::min()) {
    throw PythonError("an integer beyond 64 bits");
  }
  return Json(static_cast<int64_t>(value));
}

// Python's floor division and modulo on ints: the quotient rounds toward minus infinity and the
// remainder takes the divisor's sign.
Json int_floordiv(int64_t a, int64_t b, bool modulo) {
  if (b == 0) throw PythonError("ZeroDivisionError: integer division or modulo by zero");
  __int128 q = static_cast<__int128>(a) / b;
  __int128 r = static_cast<__int128>(a) % b;
  if (r != 0 && ((r < 0) != (b < 0))) {
    q -= 1;
    r += b;
  }
  return checked(modulo ? r : q);
}

Json float_op(const std::string& op, double a, double b) {
  if ((op == "Div" || op == "FloorDiv" || op == "Mod") && b == 0.0) {
    throw PythonError("ZeroDivisionError: float division by zero");
  }
  if (op == "Add") return a + b;
  if (op == "Sub") return a - b;
  if (op == "Mult") return a * b;
  if (op == "Div") return a / b;
  if (op == "FloorDiv") return std::floor(a / b);
  if (op == "Mod") {
    double r = std::fmod(a, b);
    if (r != 0.0 && ((r < 0) != (b < 0))) r += b;
    return r;
  }
  if (op == "Pow") return std::pow(a, b);
  throw PythonError("unsupported operator " + op);
}

Json int_pow(int64_t base, int64_t exponent) {
  if (exponent < 0) return std::pow(static_cast<double>(base), static_cast<double>(exponent));
  __int128 result = 1;
  for (int64_t i = 0; i < exponent; ++i) {
    result *= base;
    if (result > std::numeric_limits<int64_t>::max() ||
        result < std::numeric_limits<int64_t>::min()) {
      throw PythonError("an integer beyond 64 bits");
    }
  }
  return checked(result);
}

Json int_op(const std::string& op, int64_t a, int64_t b) {
  if (op == "Add") return checked(static_cast<__int128>(a) + b);
  if (op == "Sub") return checked(static_cast<__int128>(a) - b);
  if (op == "Mult") return checked(static_cast<__int128>(a) * b);
  if (op == "FloorDiv") return int_floordiv(a, b, false);
  if (op == "Mod") return int_floordiv(a, b, true);
  if (op == "Pow") return int_pow(a, b);
  return float_op(op, static_cast<double>(a), static_cast<double>(b));  // Div
}

Json repeat(const Json& sequence, int64_t times) {
  if (times <= 0) return sequence.is_string() ? Json("") : Json::array();
  size_t size = sequence.is_string() ? sequence.get<std::string>().size() : sequence.size();
  if (static_cast<double>(size) * static_cast<double>(times) > kMaxListLength) {
    throw PythonError("a sequence of more than " + std::to_string(kMaxListLength) + " items");
  }
  Json out = sequence.is_string() ? Json("") : Json::array();
  for (int64_t i = 0; i < times; ++i) {
    if (sequence.is_string()) {
      out.get_ref<std::string&>() += sequence.get<std::string>();
    } else {
      for (const auto& item : sequence) out.push_back(item);
    }
  }
  return out;
}

Json sequence_op(const std::string& op, const Json& a, const Json& b) {
  if (op == "Add" && a.is_string() && b.is_string()) {
    return a.get<std::string>() + b.get<std::string>();
  }
  if (op == "Add" && a.is_array() && b.is_array()) {
    if (a.size() + b.size() > static_cast<size_t>(kMaxListLength)) repeat(a, kMaxListLength);
    Json out = a;
    for (const auto& item : b) out.push_back(item);
    return out;
  }
  if (op == "Mult" && (a.is_string() || a.is_array()) && is_int(b)) return repeat(a, as_int(b));
  if (op == "Mult" && (b.is_string() || b.is_array()) && is_int(a)) return repeat(b, as_int(a));
  type_error(op, a, b);
}

}  // namespace

bool truthy(const Json& value) {
  if (value.is_null()) return false;
  if (value.is_boolean()) return value.get<bool>();
  if (value.is_number()) return as_double(value) != 0.0;
  if (value.is_string()) return !value.get<std::string>().empty();
  return !value.empty();
}

bool equal(const Json& a, const Json& b) {
  if (is_number(a) && is_number(b)) {
    if (is_int(a) && is_int(b)) return as_int(a) == as_int(b);
    return as_double(a) == as_double(b);
  }
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!equal(a[i], b[i])) return false;
    }
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [key, item] : a.items()) {
      auto other = b.find(key);
      if (other == b.end() || !equal(item, *other)) return false;
    }
    return true;
  }
  return a == b;
}

bool less(const Json& a, const Json& b) {
  if (is_number(a) && is_number(b)) {
    if (is_int(a) && is_int(b)) return as_int(a) < as_int(b);
    return as_double(a) < as_double(b);
  }
  if (a.is_string() && b.is_string()) return a.get<std::string>() < b.get<std::string>();
  type_error("<", a, b);
}

bool is_int(const Json& value) {
  return value.is_boolean() || value.is_number_integer();
}

int64_t as_int(const Json& value) {
  if (value.is_boolean()) return value.get<bool>() ? 1 : 0;
  if (value.is_number_unsigned()) {
    uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw PythonError("an integer beyond 64 bits");
    }
    return static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  throw PythonError("TypeError: '" + type_name(value) +
                    "' object cannot be interpreted as an "
                    "integer");
}

Json binop(const std::string& op, const Json& a, const Json& b) {
  if (is_number(a) && is_number(b)) {
    if (is_int(a) && is_int(b)) return int_op(op, as_int(a), as_int(b));
    return float_op(op, as_double(a), as_double(b));
  }
  return sequence_op(op, a, b);
}

bool contains(const Json& haystack, const Json& needle) {
  if (haystack.is_array()) {
    for (const auto& item : haystack) {
      if (equal(item, needle)) return true;
    }
    return false;
  }
  if (haystack.is_object())
    return needle.is_string() && haystack.contains(needle.get<std::string>());
  if (haystack.is_string() && needle.is_string()) {
    return haystack.get<std::string>().find(needle.get<std::string>()) != std::string::npos;
  }
  throw PythonError("TypeError: argument of type '" + type_name(haystack) + "' is not iterable");
}

std::string type_name(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "NoneType";
    case Json::value_t::boolean:
      return "bool";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "int";
    case Json::value_t::number_float:
      return "float";
    case Json::value_t::string:
      return "str";
    case Json::value_t::array:
      return "list";
    case Json::value_t::object:
      return "dict";
    default:
      return "object";
  }
}

std::string str(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_null()) return "None";
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  if (value.is_number_float()) return pyjson::float_repr(value.get<double>());
  if (value.is_number()) return std::to_string(as_int(value));
  throw PythonError("str() of a " + type_name(value) + " is not supported here");
}

std::string strip(const std::string& text) {
  size_t from = text.find_first_not_of(" \t\n\r\f\v");
  if (from == std::string::npos) return "";
  size_t to = text.find_last_not_of(" \t\n\r\f\v");
  return text.substr(from, to - from + 1);
}

Json to_int(const Json& value) {
  if (is_int(value)) return as_int(value);
  if (value.is_number_float()) {
    double d = value.get<double>();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) throw PythonError("int() of " + str(value));
    return static_cast<int64_t>(std::trunc(d));
  }
  if (value.is_string()) {
    std::string text = strip(value.get<std::string>());
    size_t start = (!text.empty() && (text[0] == '-' || text[0] == '+')) ? 1 : 0;
    bool digits = text.size() > start && text.size() < 19;
    for (size_t i = start; i < text.size() && digits; ++i)
      digits = text[i] >= '0' && text[i] <= '9';
    if (!digits) throw PythonError("ValueError: invalid literal for int(): '" + text + "'");
    return static_cast<int64_t>(std::stoll(text));
  }
  throw PythonError("TypeError: int() argument must be a string or a number, not '" +
                    type_name(value) + "'");
}

}  // namespace neuron_cache::transformers
