#include "neuron_cache/transformers/values.h"

#include <cstdint>
#include <optional>

namespace neuron_cache::transformers {
namespace {

Json range(const std::vector<Value>& args) {
  int64_t start = 0, stop = 0, stride = 1;
  if (args.size() == 1) {
    stop = as_int(data(args[0]));
  } else {
    start = as_int(data(args.at(0)));
    stop = as_int(data(args.at(1)));
    if (args.size() > 2) stride = as_int(data(args[2]));
  }
  if (stride == 0) throw PythonError("ValueError: range() arg 3 must not be zero");
  Json out = Json::array();
  for (int64_t i = start; stride > 0 ? i < stop : i > stop; i += stride) {
    if (static_cast<int64_t>(out.size()) >= kMaxListLength) {
      throw PythonError("a range of more than " + std::to_string(kMaxListLength) + " items");
    }
    out.push_back(i);
  }
  return out;
}

}  // namespace

size_t index_of(const Json& list, const Json& key) {
  int64_t i = as_int(key);
  int64_t size = static_cast<int64_t>(list.size());
  if (i < 0) i += size;
  if (i < 0 || i >= size) throw PythonError("IndexError: list index out of range");
  return static_cast<size_t>(i);
}

bool truthy_value(const Value& value) {
  return value.object || truthy(value.json);
}

void store_item(Json& container, const Json& key, Json value) {
  if (container.is_object() && key.is_string()) {
    container[key.get<std::string>()] = std::move(value);
  } else if (container.is_array() && is_int(key)) {
    container.at(index_of(container, key)) = std::move(value);
  } else {
    throw PythonError("TypeError: item assignment into a " + type_name(container));
  }
}

const Json& data(const Value& value) {
  if (value.object) throw PythonError("a config where plain data was expected");
  return value.json;
}

Value attribute(const Object& object, const std::string& name) {
  std::optional<Value> value = get_attribute(object, name);
  if (!value) throw PythonError("AttributeError: the config has no attribute '" + name + "'");
  return *value;
}

Value attribute_of(const Value& owner, const std::string& name) {
  if (!owner.object) throw PythonError("an attribute of a " + type_name(owner.json));
  return attribute(*owner.object, name);
}

Json unary(const std::string& op, const Value& operand) {
  if (op == "Not") return !truthy_value(operand);
  const Json& x = data(operand);
  if (op == "USub") return binop("Sub", is_int(x) ? Json(0) : Json(0.0), x);
  if (op == "UAdd") return binop("Add", is_int(x) ? Json(0) : Json(0.0), x);
  if (op == "Invert") return -as_int(x) - 1;
  throw PythonError("unary operator " + op);
}

bool compare_one(const std::string& op, const Value& a, const Value& b) {
  if (op == "Is" || op == "IsNot") {
    bool same = (a.object || b.object) ? a.object == b.object
                                       : a.json.type() == b.json.type() && a.json == b.json;
    return (op == "Is") == same;
  }
  if (op == "In" || op == "NotIn") return (op == "In") == contains(data(b), data(a));
  const Json& x = data(a);
  const Json& y = data(b);
  if (op == "Eq") return equal(x, y);
  if (op == "NotEq") return !equal(x, y);
  if (op == "Lt") return less(x, y);
  if (op == "Gt") return less(y, x);
  if (op == "LtE") return !less(y, x);
  if (op == "GtE") return !less(x, y);
  throw PythonError("comparison " + op);
}

Json subscript(const Json& container, const Json& key) {
  if (container.is_object() && key.is_string()) {
    auto it = container.find(key.get<std::string>());
    if (it == container.end()) throw PythonError("KeyError: '" + key.get<std::string>() + "'");
    return *it;
  }
  if (container.is_array() && is_int(key)) return container.at(index_of(container, key));
  if (container.is_string() && is_int(key)) {
    const std::string& text = container.get_ref<const std::string&>();
    Json chars = Json::array();
    for (char c : text) chars.push_back(std::string(1, c));
    return chars.at(index_of(chars, key));
  }
  throw PythonError("TypeError: " + type_name(container) + " indices");
}

Json iterable(const Value& value) {
  const Json& x = data(value);
  if (x.is_array()) return x;
  Json out = Json::array();
  if (x.is_object()) {
    for (const auto& [key, item] : x.items()) out.push_back(key);
  } else if (x.is_string()) {
    for (char c : x.get<std::string>()) out.push_back(std::string(1, c));
  } else {
    throw PythonError("TypeError: '" + type_name(x) + "' object is not iterable");
  }
  return out;
}

Json isinstance(const Value& value, const Json& types) {
  for (const auto& type : types) {
    const std::string& t = type.get_ref<const std::string&>();
    if (value.object) {
      if (t == "PretrainedConfig" || t == value.object->cls->name) return true;
      continue;
    }
    const Json& x = value.json;
    if ((t == "dict" && x.is_object()) || ((t == "list" || t == "tuple") && x.is_array()) ||
        (t == "str" && x.is_string()) || (t == "int" && is_int(x)) ||
        (t == "float" && x.is_number_float()) || (t == "bool" && x.is_boolean())) {
      return true;
    }
  }
  return false;
}

Json mutate(Json& target, const std::string& name, const std::vector<Value>& args) {
  if (name == "append" && target.is_array()) {
    if (static_cast<int64_t>(target.size()) >= kMaxListLength) throw PythonError("a list too long");
    target.push_back(data(args.at(0)));
    return nullptr;
  }
  if (name == "pop" && target.is_object()) {
    Json key = data(args.at(0));
    auto it = key.is_string() ? target.find(key.get<std::string>()) : target.end();
    if (it == target.end()) {
      if (args.size() > 1) return data(args[1]);
      throw PythonError("KeyError in pop()");
    }
    Json value = *it;
    target.erase(it);
    return value;
  }
  throw PythonError("AttributeError: '" + type_name(target) + "' object has no " + name);
}

Json string_method(const std::string& text, const std::string& name,
                   const std::vector<Value>& args) {
  if (name == "lower") {
    std::string out = text;
    for (char& c : out) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    return out;
  }
  if (name == "strip" && args.empty()) return strip(text);
  if (name == "split" && args.size() == 1 && data(args[0]).is_string()) {
    std::string separator = data(args[0]).get<std::string>();
    if (separator.empty()) throw PythonError("ValueError: empty separator");
    Json out = Json::array();
    size_t from = 0;
    for (size_t at; (at = text.find(separator, from)) != std::string::npos;
         from = at + separator.size()) {
      out.push_back(text.substr(from, at - from));
    }
    out.push_back(text.substr(from));
    return out;
  }
  throw PythonError("the str method " + name);
}

Value builtin(const std::string& name, const std::vector<Value>& args) {
  if (name == "range") return plain(range(args));
  if (name == "len") {
    const Json& x = data(args.at(0));
    return plain(static_cast<int64_t>(x.is_string() ? x.get<std::string>().size() : x.size()));
  }
  if (name == "int") return plain(to_int(data(args.at(0))));
  if (name == "bool") return plain(truthy_value(args.at(0)));
  if (name == "float") return plain(binop("Add", Json(0.0), data(args.at(0))));
  if (name == "str") return plain(str(data(args.at(0))));
  if (name == "list") return plain(iterable(args.at(0)));
  if (name == "getattr") {
    std::optional<Value> value;
    if (args.at(0).object)
      value = get_attribute(*args[0].object, data(args.at(1)).get<std::string>());
    if (value) return *value;
    if (args.size() > 2) return args[2];
    throw PythonError("AttributeError in getattr()");
  }
  throw PythonError("the builtin " + name);
}

}  // namespace neuron_cache::transformers
