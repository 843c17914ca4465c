#!/usr/bin/env python3
"""Writes the configuration table of one transformers release from transformers' own source.

optimum-neuron's architecture digest hashes transformers' `to_diff_dict()` of the model's config,
and that dict depends on each config class's `__init__`: the attributes it sets, their defaults and
what it derives (`head_dim = hidden_size // num_attention_heads`, Qwen2's `layer_types`, ...). This
script does not type those in: it imports the given transformers tree, reads each supported class's
signature defaults and translates the AST of its `__init__` (and of the `self.` methods it calls)
into a small JSON program that core/neuron_cache/transformers/ runs. A construct the translation
does not know stops the script, naming it: nothing is guessed.

    PYTHONPATH=<harness>:<transformers>/src:<huggingface_hub>/src:<harness>/stubsite \\
      /usr/bin/python3 generate.py table  COMMIT OUT.json
    ... generate.py verify VECTORS.json          # the vectors' dicts, recomputed by transformers
    ... generate.py probes OUT.json              # more configs and the digests transformers gives
    ... generate.py dicts MODELS.json OUT.json   # {model: config.json text} -> what is hashed

<harness> is ../shared/vectors/arch-digest/harness (stand-ins for tokenizers-only imports), the
transformers commits are those its README names.
"""
import ast
import copy
import hashlib
import inspect
import json
import os
import random
import sys
import tempfile
import textwrap
import warnings

warnings.filterwarnings("ignore")
os.environ["HF_HUB_OFFLINE"] = "1"
import transformers  # noqa: E402
from transformers import CONFIG_MAPPING, AutoConfig, PretrainedConfig  # noqa: E402

# The model types optimum-neuron exports or serves (0.4.x), and the sub-config types their
# composite configs build by default. Decoders first, then encoders.
MODEL_TYPES = [
    "llama", "qwen2", "qwen3", "qwen3_moe", "mistral", "mixtral", "phi3", "granite", "smollm3",
    "gemma3", "gemma3_text", "llama4", "llama4_text", "idefics3", "llava", "clip_vision_model",
    "gpt2", "phi",
    "bert", "roberta", "xlm-roberta", "mpnet", "distilbert", "albert", "camembert", "convbert",
    "deberta", "deberta-v2", "electra", "mobilebert", "roformer", "xlm", "flaubert",
]
# Calls that only check or log: they never change an attribute, so the program skips them.
# rope_config_validation only raises on rope_scaling dicts missing a required key, which no
# loadable checkpoint has (a known gap: neuron-cache computes a digest where transformers raises).
CHECKS = {"rope_config_validation", "logger.info", "logger.warning", "logger.warning_once",
          "logger.error", "warnings.warn"}
CACHE_WHITE_LIST = ["_name_or_path", "transformers_version", "_diffusers_version", "eos_token_id",
                    "bos_token_id", "pad_token_id", "torchscript", "torch_dtype", "_commit_hash",
                    "sample_size", "projection_dim", "_use_default_values",
                    "_attn_implementation_autoset", "return_dict"]


class Unsupported(Exception):
    pass


def plain(value, where):
    """A default as JSON, or Unsupported: the table holds data only."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [plain(v, where) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: plain(v, where) for k, v in value.items()}
    raise Unsupported(f"{where}: default {value!r} is not plain data")


class Translator:
    """Python AST -> the JSON program of core/neuron_cache/transformers/program.cpp."""

    def __init__(self, cls):
        self.cls = cls
        self.methods = {}

    def body(self, statements):
        out = []
        for s in statements:
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
                continue  # docstring
            out.extend(self.statement(s))
        return out

    def statement(self, s):
        where = f"{self.cls.__name__}: {ast.unparse(s).splitlines()[0]}"
        if isinstance(s, ast.Assign):
            if len(s.targets) != 1:
                raise Unsupported(where)
            return [["assign", self.target(s.targets[0], where), self.expr(s.value, where)]]
        if isinstance(s, ast.If):
            return [["if", self.expr(s.test, where), self.body(s.body), self.body(s.orelse)]]
        if isinstance(s, ast.For) and isinstance(s.target, ast.Name) and not s.orelse:
            return [["for", s.target.id, self.expr(s.iter, where), self.body(s.body)]]
        if isinstance(s, ast.Raise):
            return [["raise", ast.unparse(s.exc) if s.exc else ""]]
        if isinstance(s, ast.Return) and s.value is None:
            return [["return"]]
        if isinstance(s, ast.Pass):
            return []
        if isinstance(s, ast.FunctionDef):
            return []  # a local function (Llama4VisionConfig's stray property): calls to it fail

        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            name = ast.unparse(s.value.func)
            if name in CHECKS:
                return []
            if name == "layer_type_validation":
                return [self.layer_type_check(s.value, where)]
            if name.startswith("self.") and name.endswith("_validation"):
                return []
            return [["expr", self.expr(s.value, where)]]
        raise Unsupported(where)

    def layer_type_check(self, call, where):
        """layer_type_validation(layer_types[, num_hidden_layers]): the allowed layer types and
        whether this release compares the count (4.57 does, 4.55 takes one argument)."""
        from transformers import configuration_utils as cu
        takes_count = len(inspect.signature(cu.layer_type_validation).parameters) > 1
        args = [self.expr(a, where) for a in call.args]
        return ["check_layer_types", args, sorted(cu.ALLOWED_LAYER_TYPES), takes_count]

    def target(self, t, where):
        if isinstance(t, ast.Name):
            return ["name", t.id]
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
            return ["attr", t.attr]
        if isinstance(t, ast.Subscript):
            return ["item", self.expr(t.value, where), self.expr(t.slice, where)]
        raise Unsupported(where)

    def expr(self, e, where):
        x = lambda v: self.expr(v, where)  # noqa: E731
        if isinstance(e, ast.Constant):
            return ["const", plain(e.value, where)]
        if isinstance(e, ast.JoinedStr):
            return ["const", ast.unparse(e)]  # only messages are formatted
        if isinstance(e, ast.Name):
            return ["name", e.id]
        if isinstance(e, ast.Attribute):
            if isinstance(e.value, ast.Name) and e.value.id == "self":
                return ["self", e.attr]
            return ["getattr", x(e.value), e.attr]
        if isinstance(e, ast.BinOp):
            return ["binop", type(e.op).__name__, x(e.left), x(e.right)]
        if isinstance(e, ast.UnaryOp):
            return ["unary", type(e.op).__name__, x(e.operand)]
        if isinstance(e, ast.BoolOp):
            return ["boolop", type(e.op).__name__, [x(v) for v in e.values]]
        if isinstance(e, ast.Compare):
            return ["compare", x(e.left), [type(o).__name__ for o in e.ops],
                    [x(c) for c in e.comparators]]
        if isinstance(e, ast.IfExp):
            return ["ifexp", x(e.test), x(e.body), x(e.orelse)]
        if isinstance(e, (ast.List, ast.Tuple)):
            return ["list", [x(v) for v in e.elts]]
        if isinstance(e, ast.Dict) and None not in e.keys:
            return ["dict", [x(k) for k in e.keys], [x(v) for v in e.values]]
        if isinstance(e, ast.Subscript):
            return ["subscript", x(e.value), x(e.slice)]
        if isinstance(e, ast.ListComp) and len(e.generators) == 1:
            g = e.generators[0]
            if not isinstance(g.target, ast.Name) or g.is_async:
                raise Unsupported(where)
            return ["listcomp", x(e.elt), g.target.id, x(g.iter), [x(c) for c in g.ifs]]
        if isinstance(e, ast.Call):
            return self.call(e, where)
        raise Unsupported(f"{where} ({type(e).__name__})")

    def call(self, e, where):
        x = lambda v: self.expr(v, where)  # noqa: E731
        args = [x(a) for a in e.args]
        keywords = {k.arg: x(k.value) for k in e.keywords if k.arg is not None}
        spread = [x(k.value) for k in e.keywords if k.arg is None]
        if len(spread) > 1 or any(isinstance(a, ast.Starred) for a in e.args):
            raise Unsupported(where)
        spread = spread[0] if spread else None
        f = e.func
        if ast.unparse(f) == "super().__init__":
            return ["base_init", keywords, spread]
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
            self.method(f.attr, where)
            return ["method", f.attr, args]
        if isinstance(f, ast.Name) and f.id in ("isinstance",) and len(args) == 2:
            types = e.args[1].elts if isinstance(e.args[1], ast.Tuple) else [e.args[1]]
            return ["isinstance", args[0], [ast.unparse(t) for t in types]]
        if isinstance(f, ast.Name) and f.id in ("range", "int", "bool", "list", "len", "getattr",
                                                "float", "str"):
            return ["builtin", f.id, args]
        if isinstance(f, ast.Name) and f.id in CONFIG_CLASSES:
            return ["new_class", f.id, keywords, spread]
        if isinstance(f, ast.Subscript) and ast.unparse(f.value) == "CONFIG_MAPPING":
            return ["new", x(f.slice), keywords, spread]
        if isinstance(f, ast.Attribute) and f.attr in ("get", "pop", "append", "strip", "lower",
                                                       "split", "items", "keys", "values"):
            return ["call_method", x(f.value), f.attr, args]
        raise Unsupported(f"{where}: call {ast.unparse(f)}")

    def method(self, name, where):
        if name in self.methods:
            return
        fn = getattr(self.cls, name, None)
        source = textwrap.dedent(inspect.getsource(fn))
        node = ast.parse(source).body[0]
        params = [a.arg for a in node.args.args[1:]]
        self.methods[name] = None  # recursion guard
        self.methods[name] = {"params": params, "body": self.body(node.body)}


CONFIG_CLASSES = {}  # the classes of the table by name, filled by table()


def supported_classes():
    """The classes of MODEL_TYPES and the sub-config classes they build, by name."""
    found = {}
    todo = [CONFIG_MAPPING[t] for t in MODEL_TYPES]
    while todo:
        cls = todo.pop(0)
        if cls.__name__ in found or cls is AutoConfig:
            continue
        found[cls.__name__] = cls
        todo.extend(getattr(cls, "sub_configs", {}).values())
    return found


def property_alias(cls, name, prop):
    """The attribute a property reads and writes, when that is all it does."""
    def last_statement(fn):
        node = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
        return [s for s in node.body if not (isinstance(s, ast.Expr))]
    get = last_statement(prop.fget)
    put = last_statement(prop.fset) if prop.fset else []
    if (len(get) == 1 and isinstance(get[0], ast.Return) and len(put) == 1
            and isinstance(put[0], ast.Assign)):
        read, write = ast.unparse(get[0].value), ast.unparse(put[0].targets[0])
        if read == write and read.startswith("self.") and ast.unparse(put[0].value) == "value":
            return read[len("self."):]
    raise Unsupported(f"{cls.__name__}: property {name} does more than alias an attribute")


def class_entry(cls):
    init = cls.__init__
    source = textwrap.dedent(inspect.getsource(init))
    node = ast.parse(source).body[0]
    params = []
    for name, p in inspect.signature(init).parameters.items():
        if name == "self" or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        default = None if p.default is inspect.Parameter.empty else p.default
        params.append([name, plain(default, f"{cls.__name__}.{name}")])
    aliases = {}
    for k in cls.__mro__:
        if k is PretrainedConfig or not issubclass(k, PretrainedConfig):
            continue
        for n, v in vars(k).items():
            if isinstance(v, property):
                aliases[n] = property_alias(cls, n, v)
    t = Translator(cls)
    body = t.body(node.body)
    sub_configs = {}
    for key, sub in getattr(cls, "sub_configs", {}).items():
        sub_configs[key] = getattr(sub, "model_type", "") or ""  # AutoConfig: any type
    instance = cls()
    return cls.__name__, {
        "model_type": cls.model_type,
        "attribute_map": dict(cls.attribute_map),
        "sub_configs": sub_configs,
        # Properties that only read and write another attribute: name -> that attribute.
        "property_aliases": aliases,
        "has_no_defaults_at_init": bool(getattr(cls, "has_no_defaults_at_init", False)),
        "params": params,
        "body": body,
        "methods": t.methods,
        # cls().to_dict(): what to_diff_dict compares with; the C++ tests check the program
        # gives the same.
        "defaults": jsonable(instance.to_dict()),
    }


def jsonable(d):
    return json.loads(json.dumps(d, sort_keys=True, default=str))


def base_entry():
    sig = inspect.signature(PretrainedConfig.__init__)
    params = [[n, plain(None if p.default is inspect.Parameter.empty else p.default, n)]
              for n, p in sig.parameters.items()
              if n != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    defaults = jsonable(PretrainedConfig().to_dict())
    defaults.pop("transformers_version", None)
    return {
        "dtype_attribute": "dtype" if "dtype" in sig.parameters else "torch_dtype",
        "params": params,
        "generation_defaults": plain(PretrainedConfig._get_global_generation_defaults(), "gen"),
        "defaults": defaults,
    }


def table(commit, out):
    found = supported_classes()
    CONFIG_CLASSES.update({name: cls.model_type for name, cls in found.items()})
    classes = {}
    for cls in found.values():
        name, entry = class_entry(cls)
        classes[name] = entry
    doc = {
        "transformers_version": transformers.__version__,
        "transformers_commit": commit,
        "generated_by": "core/neuron_cache/transformers/tables/generate.py",
        "base": base_entry(),
        # CONFIG_MAPPING, for the classes above.
        "model_types": {c.model_type: name for name, c in found.items()
                        if c.model_type in CONFIG_MAPPING and CONFIG_MAPPING[c.model_type] is c},
        "classes": classes,
    }
    with open(out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")


# ---- the digest as optimum-neuron 0.4.5 computes it (entries/single_model.py), for checks
def optimum_dict(config_text, task):
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "config.json"), "w") as f:
            f.write(config_text)
        config = AutoConfig.from_pretrained(d)
    if task == "text-generation":
        tc = config.get_text_config()
        if tc is not None:
            config = tc
    out = copy.deepcopy(config).to_diff_dict()
    for k in CACHE_WHITE_LIST:
        out.pop(k, None)
    out.pop("neuron", None)
    return out


def digest(d, task):
    text = json.dumps({"model_type": d["model_type"], "task": task, "config": d}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def verify(vectors_path):
    """Recomputes the dict and digest of every vector of this transformers release."""
    vectors = json.load(open(vectors_path))
    major_minor = ".".join(transformers.__version__.split(".")[:2])
    checked = bad = 0
    for v in vectors:
        if not v["transformers_version"].startswith(major_minor):
            continue
        d = optimum_dict(v["config_json"], v["task"])
        checked += 1
        if jsonable(d) != v["optimum_config_hashed"] or digest(d, v["task"]) != v["optimum_digest"]:
            bad += 1
            print("DIFFERS:", v["local_name"], v["task"], file=sys.stderr)
    print(f"{checked} vectors of transformers {major_minor}: {checked - bad} reproduced")
    return 1 if bad or not checked else 0


# ---- probes: configs of every supported family, and what transformers makes of them
def probe_configs(model_type, rng):
    cls = CONFIG_MAPPING[model_type]
    saved = cls().to_diff_dict()
    saved.pop("transformers_version", None)
    yield "saved", saved
    yield "bare", {"model_type": model_type}
    labels = {str(i): f"LABEL_{i}" for i in range(12)}  # json.dumps sorts int keys as ints
    yield "labels", {"model_type": model_type, "id2label": labels,
                     "label2id": {v: int(k) for k, v in labels.items()}}
    keys = [k for k in saved if k != "model_type"]
    for i in range(5):
        d = {k: copy.deepcopy(saved[k]) for k in keys if rng.random() < 0.5}
        d["model_type"] = model_type
        for k in list(d):
            v = d[k]
            if isinstance(v, bool) or v is None:
                continue
            if isinstance(v, int) and rng.random() < 0.3:
                d[k] = v * 2 if v else 1
            elif isinstance(v, float) and rng.random() < 0.3:
                d[k] = float(int(v)) if v == int(v) and rng.random() < 0.5 else v / 4
        extras = {
            "torch_dtype": rng.choice(["bfloat16", "float16", "float32"]),
            "tie_word_embeddings": rng.choice([True, False]),
            "use_cache": rng.choice([True, False]),
            "rope_scaling": rng.choice([None, {"type": "linear", "factor": 2.0},
                                        {"rope_type": "dynamic", "factor": 4.0}]),
            "num_key_value_heads": None,
            "head_dim": None,
            "use_sliding_window": rng.choice([True, False]),
            "sliding_window": rng.choice([None, 4096]),
            "attention_dropout": rng.choice([0, 0.0, 0.1]),
            "architectures": [cls.__name__.replace("Config", "ForCausalLM")],
            "bos_token_id": 1, "eos_token_id": [2, 3],
            "custom_key_from_the_file": {"a": [1, 2.5, None]},
            "transformers_version": "4.40.0",
        }
        for k, v in extras.items():
            if rng.random() < 0.35 and (k in saved or k.startswith(("torch", "custom",
                                                                    "architectures",
                                                                    "transformers", "bos",
                                                                    "eos"))):
                d[k] = copy.deepcopy(v)
        yield f"random-{i}", d


def probes(out):
    rng = random.Random(20261205)
    tasks = {"bert": "feature-extraction"}
    cases = []
    for t in MODEL_TYPES:
        for name, d in probe_configs(t, rng):
            text = json.dumps(d, indent=2)
            for task in ("text-generation", "feature-extraction"):
                try:
                    o = optimum_dict(text, task)
                except Exception as e:  # the config is invalid for transformers too
                    cases.append({"model_type": t, "case": name, "task": task,
                                  "config_json": text, "error": type(e).__name__})
                    continue
                cases.append({"model_type": t, "case": name, "task": task, "config_json": text,
                              "optimum_config_hashed": jsonable(o), "optimum_digest": digest(o, task)})
    del tasks
    with open(out, "w") as f:  # one case a line
        f.write('{"transformers_version": %s, "cases": [\n' % json.dumps(transformers.__version__))
        f.write(",\n".join(json.dumps(c, sort_keys=True) for c in cases))
        f.write("\n]}\n")
    print(f"{len(cases)} probe cases")


def dicts(models_path, out):
    """For each model's config.json text: the dict optimum-neuron hashes, by task."""
    models = json.load(open(models_path))
    result = {}
    for model, text in sorted(models.items()):
        by_task = {}
        for task in ("text-generation", "feature-extraction"):
            try:
                by_task[task] = jsonable(optimum_dict(text, task))
            except Exception as e:  # transformers cannot load it (an unknown model type here)
                by_task[task] = {"error": f"{type(e).__name__}: {e}"[:200]}
        result[model] = {"config_json": text, "hashed": by_task}
    with open(out, "w") as f:
        json.dump({"transformers_version": transformers.__version__, "models": result}, f,
                  indent=1, sort_keys=True)
        f.write("\n")


def main():
    mode = sys.argv[1]
    if mode == "dicts":
        dicts(sys.argv[2], sys.argv[3])
        return 0
    if mode == "table":
        table(sys.argv[2], sys.argv[3])
        return 0
    if mode == "verify":
        return verify(sys.argv[2])
    if mode == "probes":
        probes(sys.argv[2])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Unsupported as e:
        print(f"generate.py: cannot translate {e}", file=sys.stderr)
        sys.exit(1)
