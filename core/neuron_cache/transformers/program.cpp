#include "neuron_cache/transformers/program.h"

#include <map>
#include <utility>
#include <vector>

#include "neuron_cache/transformers/values.h"

namespace neuron_cache::transformers {
namespace {

// Work one config may take: a real config runs a few thousand steps.
constexpr size_t kMaxSteps = 5'000'000;
constexpr int kMaxDepth = 16;  // nested constructions and method calls

const std::string& name_of(const Json& node) {
  return node.at(1).get_ref<const std::string&>();
}

class Interpreter {
 public:
  explicit Interpreter(const Table& table) : table_(table) {}

  ObjectPtr construct(const ClassInfo& cls, Json kwargs) {
    if (++depth_ > kMaxDepth) throw PythonError("config constructions nested too deep");
    auto object = std::make_shared<Object>();
    object->table = &table_;
    object->cls = &cls;
    Frame frame{object.get(), {}};
    for (const auto& [name, fallback] : cls.params) {
      auto given = kwargs.find(name);
      frame.locals[name] = plain(given == kwargs.end() ? fallback : *given);
      if (given != kwargs.end()) kwargs.erase(given);
    }
    frame.locals["kwargs"] = plain(std::move(kwargs));
    run(cls.body, frame);
    --depth_;
    return object;
  }

 private:
  struct Frame {
    Object* self;
    std::map<std::string, Value> locals;
  };
  enum class Flow { Next, Return };

  void step() {
    if (++steps_ > kMaxSteps) throw PythonError("a config that takes too much work to build");
  }

  Flow run(const Json& statements, Frame& frame) {
    for (const auto& statement : statements) {
      if (execute(statement, frame) == Flow::Return) return Flow::Return;
    }
    return Flow::Next;
  }

  Flow execute(const Json& s, Frame& frame) {
    step();
    const std::string& kind = s.at(0).get_ref<const std::string&>();
    if (kind == "assign") {
      assign(s.at(1), evaluate(s.at(2), frame), frame);
    } else if (kind == "if") {
      return run(truthy_value(evaluate(s.at(1), frame)) ? s.at(2) : s.at(3), frame);
    } else if (kind == "for") {
      return loop(s, frame);
    } else if (kind == "expr") {
      evaluate(s.at(1), frame);
    } else if (kind == "return") {
      return Flow::Return;
    } else if (kind == "check_layer_types") {
      check_layer_types(s, frame);
    } else if (kind == "raise") {
      throw PythonError("transformers raises " + s.at(1).get<std::string>());
    } else {
      throw PythonError("a statement the program does not know: " + kind);
    }
    return Flow::Next;
  }

  Flow loop(const Json& s, Frame& frame) {
    Json items = iterable(evaluate(s.at(2), frame));
    for (const auto& item : items) {
      frame.locals[name_of(s)] = plain(item);
      if (run(s.at(3), frame) == Flow::Return) return Flow::Return;
    }
    return Flow::Next;
  }

  // transformers' layer_type_validation: every type allowed, and in 4.57 as many as layers.
  void check_layer_types(const Json& s, Frame& frame) {
    std::vector<Value> args = arguments(s.at(1), frame);
    Json types = iterable(args.at(0));
    for (const auto& type : types) {
      if (!contains(s.at(2), type)) throw PythonError("ValueError: a layer type not allowed");
    }
    bool counted = s.at(3).get<bool>() && args.size() > 1 && !data(args[1]).is_null();
    if (counted && !equal(data(args[1]), static_cast<int64_t>(types.size()))) {
      throw PythonError("ValueError: num_hidden_layers is not the number of layer types");
    }
  }

  void assign(const Json& target, Value value, Frame& frame) {
    const std::string& kind = target.at(0).get_ref<const std::string&>();
    if (kind == "name") {
      frame.locals[name_of(target)] = std::move(value);
    } else if (kind == "attr") {
      set_attribute(*frame.self, name_of(target), std::move(value));
    } else if (kind == "item") {
      Json key = evaluate(target.at(2), frame).json;
      Json& container = place(target.at(1), frame);
      if (value.object) throw PythonError("a config stored inside a container");
      store_item(container, key, std::move(value.json));
    } else {
      throw PythonError("an assignment target the program does not know: " + kind);
    }
  }

  // The storage a mutation reaches: a local, an attribute, or an item of one.
  Json& place(const Json& e, Frame& frame) {
    const std::string& kind = e.at(0).get_ref<const std::string&>();
    Value* value = nullptr;
    if (kind == "name") {
      auto it = frame.locals.find(name_of(e));
      if (it == frame.locals.end()) throw PythonError("NameError: " + name_of(e));
      value = &it->second;
    } else if (kind == "self") {
      auto it = frame.self->attributes.find(stored_name(*frame.self, name_of(e)));
      if (it == frame.self->attributes.end()) throw PythonError("AttributeError: " + name_of(e));
      value = &it->second;
    } else if (kind == "subscript") {
      Json& container = place(e.at(1), frame);
      Json key = evaluate(e.at(2), frame).json;
      if (container.is_object() && key.is_string() && container.contains(key.get<std::string>())) {
        return container[key.get<std::string>()];
      }
      if (container.is_array() && is_int(key)) return container.at(index_of(container, key));
      throw PythonError("KeyError in a mutated item");
    } else {
      throw PythonError("a mutation of an expression the program does not know: " + kind);
    }
    if (value->object) throw PythonError("a config used as a container");
    return value->json;
  }

  Value evaluate(const Json& e, Frame& frame) {
    step();
    const std::string& kind = e.at(0).get_ref<const std::string&>();
    if (kind == "const") return plain(e.at(1));
    if (kind == "name") return local(e, frame);
    if (kind == "self") return attribute(*frame.self, name_of(e));
    if (kind == "getattr")
      return attribute_of(evaluate(e.at(1), frame), e.at(2).get<std::string>());
    if (kind == "binop") {
      return plain(binop(e.at(1).get<std::string>(), data(evaluate(e.at(2), frame)),
                         data(evaluate(e.at(3), frame))));
    }
    if (kind == "unary") return plain(unary(e.at(1).get<std::string>(), evaluate(e.at(2), frame)));
    if (kind == "boolop") return boolean(e, frame);
    if (kind == "compare") return plain(compare(e, frame));
    if (kind == "ifexp") {
      return truthy_value(evaluate(e.at(1), frame)) ? evaluate(e.at(2), frame)
                                                    : evaluate(e.at(3), frame);
    }
    if (kind == "list") return plain(list(e.at(1), frame));
    if (kind == "dict") return plain(dict(e, frame));
    if (kind == "subscript")
      return plain(subscript(data(evaluate(e.at(1), frame)), data(evaluate(e.at(2), frame))));
    if (kind == "listcomp") return plain(comprehension(e, frame));
    return call(kind, e, frame);
  }

  Value local(const Json& e, Frame& frame) {
    auto it = frame.locals.find(name_of(e));
    if (it == frame.locals.end()) throw PythonError("NameError: name '" + name_of(e) + "'");
    return it->second;
  }

  Value boolean(const Json& e, Frame& frame) {
    bool is_and = e.at(1).get<std::string>() == "And";
    Value last;
    for (const auto& operand : e.at(2)) {
      last = evaluate(operand, frame);
      if (truthy_value(last) != is_and) return last;  // Python returns the deciding operand
    }
    return last;
  }

  Json compare(const Json& e, Frame& frame) {
    Value left = evaluate(e.at(1), frame);
    for (size_t i = 0; i < e.at(2).size(); ++i) {
      Value right = evaluate(e.at(3).at(i), frame);
      if (!compare_one(e.at(2).at(i).get<std::string>(), left, right)) return false;
      left = std::move(right);
    }
    return true;
  }

  Json list(const Json& items, Frame& frame) {
    Json out = Json::array();
    for (const auto& item : items) out.push_back(data(evaluate(item, frame)));
    return out;
  }

  Json dict(const Json& e, Frame& frame) {
    Json out = Json::object();
    for (size_t i = 0; i < e.at(1).size(); ++i) {
      Json key = data(evaluate(e.at(1).at(i), frame));
      if (!key.is_string()) throw PythonError("a dict with a key that is not a str");
      out[key.get<std::string>()] = data(evaluate(e.at(2).at(i), frame));
    }
    return out;
  }

  Json comprehension(const Json& e, Frame& frame) {
    const std::string& variable = e.at(2).get_ref<const std::string&>();
    Json items = iterable(evaluate(e.at(3), frame));
    std::optional<Value> outer;
    if (auto it = frame.locals.find(variable); it != frame.locals.end()) outer = it->second;
    Json out = Json::array();
    for (const auto& item : items) {
      frame.locals[variable] = plain(item);
      bool keep = true;
      for (const auto& condition : e.at(4)) keep = keep && truthy_value(evaluate(condition, frame));
      if (keep) out.push_back(data(evaluate(e.at(1), frame)));
    }
    frame.locals.erase(variable);  // a comprehension's variable is its own
    if (outer) frame.locals[variable] = *outer;
    return out;
  }

  Value call(const std::string& kind, const Json& e, Frame& frame) {
    if (kind == "base_init") {
      base_init(*frame.self, keywords(e.at(1), e.at(2), frame));
      return plain(nullptr);
    }
    if (kind == "method") return method(e, frame);
    if (kind == "isinstance") return plain(isinstance(evaluate(e.at(1), frame), e.at(2)));
    if (kind == "builtin") return builtin(e.at(1).get<std::string>(), arguments(e.at(2), frame));
    if (kind == "new_class" || kind == "new") return construction(kind, e, frame);
    if (kind == "call_method") return plain(call_method(e, frame));
    throw PythonError("an expression the program does not know: " + kind);
  }

  // Keyword arguments, then **spread, as one kwargs dict.
  Json keywords(const Json& named, const Json& spread, Frame& frame) {
    Json out = spread.is_null() ? Json::object() : data(evaluate(spread, frame));
    if (!out.is_object()) throw PythonError("TypeError: ** of a " + type_name(out));
    for (const auto& [key, expr] : named.items()) {
      if (out.contains(key)) throw PythonError("TypeError: got multiple values for '" + key + "'");
      out[key] = data(evaluate(expr, frame));
    }
    return out;
  }

  std::vector<Value> arguments(const Json& exprs, Frame& frame) {
    std::vector<Value> out;
    for (const auto& expr : exprs) out.push_back(evaluate(expr, frame));
    return out;
  }

  Value method(const Json& e, Frame& frame) {
    const std::string& name = name_of(e);
    const Json& definition = frame.self->cls->methods.at(name);
    std::vector<Value> args = arguments(e.at(2), frame);
    if (args.size() != definition.at("params").size()) {
      throw PythonError("TypeError: " + name + "() arguments");
    }
    if (++depth_ > kMaxDepth) throw PythonError("method calls nested too deep");
    Frame inner{frame.self, {}};
    for (size_t i = 0; i < args.size(); ++i) {
      inner.locals[definition.at("params").at(i).get<std::string>()] = args[i];
    }
    run(definition.at("body"), inner);
    --depth_;
    return plain(nullptr);
  }

  Value construction(const std::string& kind, const Json& e, Frame& frame) {
    const ClassInfo* cls = nullptr;
    if (kind == "new_class") {
      cls = table_.class_named(name_of(e));
      if (cls == nullptr) throw PythonError("the class " + name_of(e) + " is not in the table");
    } else {
      Json type = data(evaluate(e.at(1), frame));
      if (!type.is_string())
        throw PythonError("KeyError: CONFIG_MAPPING[" + pyjson::dumps(type) + "]");
      cls = table_.class_of_type(type.get<std::string>());
      if (cls == nullptr) throw UnknownModelType(type.get<std::string>());
    }
    return Value{Json(), construct(*cls, keywords(e.at(2), e.at(3), frame))};
  }

  Json call_method(const Json& e, Frame& frame) {
    const std::string& name = e.at(2).get_ref<const std::string&>();
    std::vector<Value> args = arguments(e.at(3), frame);
    if (name == "pop" || name == "append") {
      Json& target = place(e.at(1), frame);
      return mutate(target, name, args);
    }
    Json receiver = data(evaluate(e.at(1), frame));
    if (name == "get" && receiver.is_object()) {
      Json key = data(args.at(0));
      auto it = key.is_string() ? receiver.find(key.get<std::string>()) : receiver.end();
      if (it != receiver.end()) return *it;
      return args.size() > 1 ? data(args[1]) : Json();
    }
    if (receiver.is_string()) return string_method(receiver.get<std::string>(), name, args);
    if (receiver.is_object() && (name == "keys" || name == "values" || name == "items")) {
      Json out = Json::array();
      for (const auto& [key, item] : receiver.items()) {
        out.push_back(name == "keys"     ? Json(key)
                      : name == "values" ? item
                                         : Json::array({key, item}));
      }
      return out;
    }
    throw PythonError("AttributeError: '" + type_name(receiver) + "' object has no " + name);
  }

  void base_init(Object& self, Json kwargs);

  const Table& table_;
  size_t steps_ = 0;
  int depth_ = 0;
};

// PretrainedConfig.__init__ (configuration_utils.py), the same in 4.55 and 4.57 but for the
// dtype's name: 4.56 renamed the torch_dtype parameter to dtype and takes torch_dtype for it.
Json take(Json& kwargs, const std::string& name, const Json& fallback) {
  auto it = kwargs.find(name);
  if (it == kwargs.end()) return fallback;
  Json value = *it;
  kwargs.erase(it);
  return value;
}

// torch's own names of the dtypes it has aliases for: with torch installed, as where
// optimum-neuron runs, a string dtype becomes torch.<name> and is written back by that name.
Json torch_dtype_name(const Json& dtype) {
  static const std::map<std::string, std::string> kAliases = {
      {"half", "float16"},     {"float", "float32"},      {"double", "float64"},
      {"long", "int64"},       {"int", "int32"},          {"short", "int16"},
      {"cfloat", "complex64"}, {"cdouble", "complex128"}, {"chalf", "complex32"}};
  if (!dtype.is_string()) return dtype;
  auto it = kAliases.find(dtype.get<std::string>());
  return it == kAliases.end() ? dtype : Json(it->second);
}

void check_base_arguments(const Json& args) {
  for (const char* name : {"label2id", "id2label"}) {
    if (!args[name].is_null() && !args[name].is_object()) {
      throw PythonError(std::string("ValueError: Argument ") + name + " should be a dictionary.");
    }
  }
  const Json& problem = args["problem_type"];
  if (!problem.is_null() && problem != "regression" && problem != "single_label_classification" &&
      problem != "multi_label_classification") {
    throw PythonError("ValueError: problem_type " + pyjson::dumps(problem) + " not understood");
  }
}

void Interpreter::base_init(Object& self, Json kwargs) {
  const BaseInfo& base = table_.base;
  Json args = Json::object();
  for (const auto& [name, fallback] : base.params) args[name] = take(kwargs, name, fallback);
  check_base_arguments(args);
  const std::string& dtype_key = base.dtype_attribute;
  if (dtype_key == "dtype") {
    Json legacy = take(kwargs, "torch_dtype", nullptr);
    if (!legacy.is_null() && args["dtype"].is_null()) args["dtype"] = legacy;
  }
  args[dtype_key] = torch_dtype_name(args[dtype_key]);
  auto put = [&](const std::string& name, Json value) {
    self.attributes[name] = plain(std::move(value));
  };
  for (const char* name : {"return_dict", "output_hidden_states", "torchscript"})
    put(name, args[name]);
  put(dtype_key, args[dtype_key]);
  put("_output_attentions", args["output_attentions"]);
  put("pruned_heads", args["pruned_heads"].is_null() ? Json::object() : args["pruned_heads"]);
  for (const char* name : {"tie_word_embeddings", "chunk_size_feed_forward", "is_encoder_decoder",
                           "is_decoder", "cross_attention_hidden_size", "add_cross_attention",
                           "tie_encoder_decoder", "architectures", "finetuning_task", "id2label",
                           "label2id", "task_specific_params", "problem_type"}) {
    put(name, args[name]);
  }
  if (args["id2label"].is_null()) {
    set_attribute(self, "num_labels",
                  plain(args["num_labels"].is_null() ? Json(2) : args["num_labels"]));
  } else {
    Json labels = Json::object();
    for (const auto& [key, value] : args["id2label"].items()) {
      labels[str(to_int(Json(key)))] = value;
    }
    put("id2label", std::move(labels));
  }
  for (const char* name : {"tokenizer_class", "prefix", "bos_token_id", "pad_token_id",
                           "eos_token_id", "sep_token_id", "decoder_start_token_id"}) {
    put(name, args[name]);
  }
  for (const auto& [name, fallback] : base.generation_defaults.items()) {
    set_attribute(self, name, plain(take(kwargs, name, fallback)));
  }
  put("_name_or_path", str(take(kwargs, "name_or_path", "")));
  put("_commit_hash", take(kwargs, "_commit_hash", nullptr));
  set_attribute(self, "_attn_implementation", plain(take(kwargs, "attn_implementation", nullptr)));
  put("transformers_version", take(kwargs, "transformers_version", nullptr));
  for (const auto& [key, value] : kwargs.items()) set_attribute(self, key, plain(value));
  put("tf_legacy_loss", take(kwargs, "tf_legacy_loss", false));
  put("use_bfloat16", take(kwargs, "use_bfloat16", false));
}

}  // namespace

ObjectPtr construct(const Table& table, const ClassInfo& cls, const Json& kwargs) {
  if (!kwargs.is_object()) throw PythonError("config arguments that are not a dict");
  return Interpreter(table).construct(cls, kwargs);
}

ObjectPtr from_config_json(const Table& table, const Json& config) {
  if (!config.is_object()) throw PythonError("a config.json that is not a JSON object");
  auto type = config.find("model_type");
  if (type == config.end() || !type->is_string()) {
    throw PythonError("ValueError: the config.json has no model_type");
  }
  const ClassInfo* cls = table.class_of_type(type->get<std::string>());
  if (cls == nullptr) throw UnknownModelType(type->get<std::string>());
  Json kwargs = config;
  kwargs["attn_implementation"] = nullptr;  // PretrainedConfig.from_dict sets it so
  ObjectPtr object = construct(table, *cls, kwargs);
  auto heads = object->attributes.find("pruned_heads");
  if (heads != object->attributes.end() && heads->second.json.is_object()) {
    Json converted = Json::object();
    for (const auto& [key, value] : heads->second.json.items())
      converted[str(to_int(Json(key)))] = value;
    heads->second.json = std::move(converted);
  }
  return object;
}

}  // namespace neuron_cache::transformers
