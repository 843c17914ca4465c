#!/usr/bin/env python3
"""The registry parity case table (issue 24): a cache repo as optimum-neuron 0.4.5 fills it, the
models' config.json files as the Hub serves them, and the cases neuron-cache's plan and lookup
must answer exactly as optimum-neuron's own filter (optimum_select.py) does. Test-only.

Prints one JSON document:
  models   {model id: config.json text}
  entries  registry entries for tests/tools/optimum_registry_writer.py (which writes the files)
  plans    [{name, model, task, instance_type, batch_size, sequence_length, num_cores,
             precision, why}]: one declared configuration each, for the current compiler
  lookups  [{model, task?, instance_type?, batch_size?, sequence_length?, tensor_parallel_size?,
             dtype?, why}]: `lookup` queries

  hashed   {model id: {task: the dict optimum-neuron 0.4.5 hashes, or {"error"}}}

The entries are written from the format spec (sections 4.1-4.8), not by neuron-cache: each entry's
config is the dict optimum-neuron hashed, transformers 4.57's to_diff_dict() of the model's config
(its text config for text-generation) without CACHE_WHITE_LIST keys. Those dicts come from real
transformers (tests/data/vectors/arch-digest/parity-models.json, which
core/neuron_cache/transformers/tables/generate.py dicts writes from `--models`), not from a rule.

    registry_parity_cases.py            the case table
    registry_parity_cases.py --models   {model: config.json text}, for generate.py dicts
"""

import json
import os
import sys

CURRENT = "neuronxcc-2.21.33363.0+82129205"
OLDER = "neuronxcc-2.20.10.0+2b1ab5c1"
COMPILER = "2.21.33363.0+82129205"

L3 = "meta-llama/Meta-Llama-3-8B"
L3I = "meta-llama/Meta-Llama-3-8B-Instruct"
FT = "acme/llama3-8b-support-ft"  # a fine-tune: the same architecture, no entry of its own
L31 = "meta-llama/Llama-3.1-8B"  # rope_scaling added: another architecture
QW = "Qwen/Qwen2.5-0.5B"
VLM = "acme/tiny-mllama"  # a model type neuron-cache's tables lack: found by stored config
GEMMA = "acme/tiny-gemma3"  # a composite config: text-generation reads its text_config
BERT = "sentence-transformers/all-MiniLM-L6-v2"  # traced (feature-extraction)
L3I_CASE = "meta-llama/meta-llama-3-8b-instruct"  # the Instruct model's id in another case
L3_OLD = "meta-llama/Meta-Llama-3-8B@old"  # the base model's config.json before an edit
DECOY = "evil/decoy"  # an entry planted where the raw file's digest would look

CACHE_WHITE_LIST = ["_name_or_path", "transformers_version", "_diffusers_version", "eos_token_id",
                    "bos_token_id", "pad_token_id", "torchscript", "torch_dtype", "_commit_hash",
                    "sample_size", "projection_dim", "_use_default_values",
                    "_attn_implementation_autoset", "return_dict"]


def llama3(**changes):
    config = {
        "_name_or_path": "meta-llama/Meta-Llama-3-8B",
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 128000,
        "eos_token_id": 128001,
        "hidden_act": "silu",
        "hidden_size": 4096,
        "initializer_range": 0.02,
        "intermediate_size": 14336,
        "max_position_embeddings": 8192,
        "model_type": "llama",
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": None,
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.55.4",
        "use_cache": True,
        "vocab_size": 128256,
    }
    config.update(changes)
    return config


MODELS = {
    L3: llama3(),
    # Instruct differs only by white-listed keys: the same digest folder as the base model.
    L3I: llama3(eos_token_id=128009, _name_or_path="meta-llama/Meta-Llama-3-8B-Instruct"),
    FT: llama3(_name_or_path="/home/user/ft/checkpoint-4000", transformers_version="4.56.1"),
    L31: llama3(rope_scaling={"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                              "original_max_position_embeddings": 8192, "rope_type": "llama3"},
                max_position_embeddings=131072),
    QW: {"architectures": ["Qwen2ForCausalLM"], "hidden_size": 896, "model_type": "qwen2",
         "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
         "rope_theta": 1000000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
         "transformers_version": "4.43.1", "vocab_size": 151936},
    VLM: {"architectures": ["MllamaForConditionalGeneration"], "model_type": "mllama",
          "text_config": {"hidden_size": 64, "model_type": "mllama_text_model",
                          "num_hidden_layers": 2, "cross_attention_layers": [1],
                          "torch_dtype": "bfloat16", "eos_token_id": [128001, 128009]},
          "vision_config": {"hidden_size": 32, "model_type": "mllama_vision_model"},
          "transformers_version": "4.55.4"},
    GEMMA: {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
            "text_config": {"hidden_size": 64, "intermediate_size": 128, "model_type": "gemma3_text",
                            "num_hidden_layers": 4, "num_attention_heads": 2,
                            "num_key_value_heads": 1, "head_dim": 32, "sliding_window": 512,
                            "rope_scaling": {"factor": 8.0, "rope_type": "linear"}},
            "vision_config": {"hidden_size": 32, "model_type": "siglip_vision_model",
                              "num_hidden_layers": 2, "image_size": 224, "patch_size": 14},
            "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0"},
    BERT: {"_name_or_path": "nreimers/MiniLM-L6-H384-uncased", "architectures": ["BertModel"],
           "hidden_size": 384, "intermediate_size": 1536, "model_type": "bert",
           "num_attention_heads": 12, "num_hidden_layers": 6, "transformers_version": "4.8.2",
           "vocab_size": 30522},
}


# Config files no Hub repo serves: a model's config.json before an edit.
EXTRA_CONFIGS = {L3_OLD: llama3(rope_theta=10000.0)}

HASHED_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "vectors",
                           "arch-digest", "parity-models.json")


def config_texts():
    return {m: json.dumps(c, indent=2) for m, c in {**MODELS, **EXTRA_CONFIGS}.items()}


def hashed():
    """What optimum-neuron hashes for each model, as real transformers computed it."""
    recorded = json.load(open(HASHED_FILE))["models"]
    for model, text in config_texts().items():
        if recorded.get(model, {}).get("config_json") != text:
            sys.exit(f"{HASHED_FILE} is out of date for {model}: regenerate it with "
                     "generate.py dicts (see its docstring)")
    return {model: recorded[model]["hashed"] for model in config_texts()}


HASHED = hashed() if "--models" not in sys.argv else {}
if HASHED:
    HASHED[L3I_CASE] = HASHED[L3I]  # the Hub serves the same config.json for either case


def entry_config(model, task):
    """SingleModelCacheEntry's config (format spec 4.5): what optimum-neuron hashed."""
    return HASHED[model][task]


def raw_rule_digest(model, task):
    """The digest of the raw file minus the white list (what neuron-cache used to compute)."""
    config = dict(json.loads(config_texts()[model]))
    if task == "text-generation" and isinstance(config.get("text_config"), dict):
        config = dict(config["text_config"])
    for key in CACHE_WHITE_LIST + ["neuron"]:
        config.pop(key, None)
    arch = {"model_type": config["model_type"], "task": task, "config": config}
    import hashlib
    return hashlib.sha256(json.dumps(arch, sort_keys=True).encode()).hexdigest()


def nxd(model, batch, seq, tp, dtype, target, compiler=COMPILER, optimum="0.4.5"):
    """An NxDNeuronConfig dict (format spec 4.6)."""
    return {
        "_serialized_key": "NxDNeuronConfig", "batch_size": batch, "capacity_factor": None,
        "checkpoint_id": model, "checkpoint_revision": "c4a54320a52ed5f88b7a2f84496903ea4ff07b45",
        "continuous_batching": batch > 1, "ep_degree": 1, "fused_qkv": True, "glu_mlp": True,
        "local_ranks_size": tp, "max_batch_size": batch, "max_context_length": seq,
        "max_topk": 256, "n_active_tokens": seq, "neuronxcc_version": compiler,
        "on_device_sampling": True, "optimum_neuron_version": optimum, "output_logits": False,
        "pp_degree": 1, "prefill_chunk_size": 0, "sequence_length": seq, "speculation_length": 0,
        "start_rank_id": 0, "target": target, "torch_dtype": dtype, "tp_degree": tp,
    }


def traced(batch, seq, tp):
    return {"auto_cast": "matmul", "auto_cast_type": "bf16", "compiler_type": "neuronx-cc",
            "compiler_version": COMPILER, "dynamic_batch_size": False, "float_dtype": "fp32",
            "inline_weights_to_neff": True, "int_dtype": "int64", "model_type": "bert",
            "optlevel": "2", "output_attentions": False, "output_hidden_states": False,
            "static_batch_size": batch, "static_sequence_length": seq,
            "task": "feature-extraction", "tensor_parallel_size": tp}


def entry(model, neuron, task="text-generation", config_of=None, machine="ci-1", alias=True,
          compiler_dir=CURRENT, optimum="0.4.5", generation="0.4.5", folder=None):
    cleaned = entry_config(config_of or model, task)
    written = {"compiler_dir": compiler_dir, "optimum_version": optimum, "generation": generation,
               "model_id": model, "task": task, "model_type": cleaned["model_type"],
               "config": cleaned, "neuron": neuron, "machine": machine, "alias": alias}
    if folder:
        written["digest_folder"] = folder
    return written


def entries():
    return [
        # Machine ci-1 exported the Instruct model twice: only its first entry has an alias.
        entry(L3I, nxd(L3I, 4, 4096, 8, "bfloat16", "trn1")),
        entry(L3I, nxd(L3I, 8, 4096, 8, "bfloat16", "trn1")),
        # Machine ci-2 had an alias folder for the base model from an older export, so its two
        # entries of the current architecture have none: a digest folder alias-less for it.
        entry(L3, nxd(L3, 32, 4096, 8, "bfloat16", "trn1"), config_of=L3_OLD, machine="ci-2"),
        entry(L3, nxd(L3, 8, 2048, 8, "bfloat16", "trn2"), machine="ci-2"),
        entry(L3, nxd(L3, 1, 4096, 2, "float16", "trn1"), machine="ci-2"),
        entry(L31, nxd(L31, 4, 4096, 8, "bfloat16", "trn1")),
        # A target optimum-neuron 0.4.5 does not know (a newer writer's).
        entry(QW, nxd(QW, 4, 4096, 2, "bfloat16", "trn3")),
        entry(QW, nxd(QW, 4, 4096, 2, "bfloat16", "trn2")),
        entry(VLM, nxd(VLM, 1, 4096, 8, "bfloat16", "trn1")),
        # Another machine's VLM entry, alias-less: found only by comparing stored configs.
        entry(VLM, nxd(VLM, 2, 4096, 8, "bfloat16", "trn1"), machine="ci-3", alias=False),
        entry(GEMMA, nxd(GEMMA, 1, 4096, 2, "bfloat16", "trn1"), alias=False),
        # Planted in the folder the raw file's digest names: optimum-neuron never reads it.
        entry(DECOY, nxd(DECOY, 1, 4096, 4, "bfloat16", "trn1"), config_of=L3, alias=False,
              folder=raw_rule_digest(L3, "text-generation")),
        entry(DECOY, nxd(DECOY, 1, 4096, 2, "bfloat16", "trn1"), config_of=QW, alias=False,
              folder=raw_rule_digest(QW, "text-generation")),
        entry(BERT, traced(1, 128, 1), task="feature-extraction"),
        # Other generations and compilers optimum-neuron 0.4.5 with 2.21.33363.0 never reads.
        entry(L3, nxd(L3, 2, 4096, 8, "bfloat16", "trn1", optimum="0.4.4"), optimum="0.4.4",
              generation="0.2"),
        entry(L3, nxd(L3, 16, 4096, 8, "bfloat16", "trn1", compiler="2.20.10.0+2b1ab5c1"),
              compiler_dir=OLDER),
    ]


def plan(name, model, instance, batch, seq, tp, precision, why, task="text-generation"):
    return {"name": name, "model": model, "task": task, "instance_type": instance,
            "batch_size": batch, "sequence_length": seq, "num_cores": tp,
            "precision": precision, "why": why}


def plans():
    return [
        plan("i-4", L3I, "trn1", 4, 4096, 8, "bf16", "the model's aliased entry"),
        plan("i-8", L3I, "trn1", 8, 4096, 8, "bf16", "its entry without an alias"),
        plan("b-8-2048", L3, "trn2", 8, 2048, 8, "bf16", "an alias-less digest folder"),
        plan("b-1-fp16", L3, "trn1", 1, 4096, 2, "fp16", "an alias-less digest folder, fp16"),
        plan("b-4", L3, "trn1", 4, 4096, 8, "bf16", "the Instruct entry: same architecture"),
        plan("ft-4", FT, "trn1", 4, 4096, 8, "bf16", "a fine-tune: same architecture"),
        plan("ft-8-2048", FT, "trn2", 8, 2048, 8, "bf16", "a fine-tune, an alias-less folder"),
        plan("l31-4", L31, "trn1", 4, 4096, 8, "bf16", "its own architecture"),
        plan("l31-8", L31, "trn1", 8, 4096, 8, "bf16", "near miss: Llama-3's shape, not its arch"),
        plan("b-32", L3, "trn1", 32, 4096, 8, "bf16", "near miss: made from an older config.json"),
        plan("b-2", L3, "trn1", 2, 4096, 8, "bf16", "near miss: only an 0.4.4 entry"),
        plan("b-16", L3, "trn1", 16, 4096, 8, "bf16", "near miss: only another compiler's"),
        plan("q-trn1", QW, "trn1", 4, 4096, 2, "bf16", "near miss: a trn3 entry"),
        plan("q-trn2", QW, "trn2", 4, 4096, 2, "bf16", "the trn2 entry"),
        plan("q-fp16", QW, "trn2", 4, 4096, 2, "fp16", "near miss: dtype"),
        plan("q-inf2", QW, "inf2", 4, 4096, 2, "bf16", "near miss: inf2 is trn1"),
        plan("vlm-1", VLM, "trn1", 1, 4096, 8, "bf16", "an unknown model type, by stored config"),
        plan("vlm-2", VLM, "trn1", 2, 4096, 8, "bf16", "an alias-less folder, by stored config"),
        plan("vlm-4", VLM, "trn1", 4, 4096, 8, "bf16", "near miss: an unknown model type"),
        plan("gemma-1", GEMMA, "trn1", 1, 4096, 2, "bf16", "its text config's digest, no alias"),
        plan("gemma-2", GEMMA, "trn1", 2, 4096, 2, "bf16", "near miss: batch size"),
        plan("decoy-l3", L3, "trn1", 1, 4096, 4, "bf16", "near miss: a decoy in the raw digest"),
        plan("decoy-qw", QW, "trn1", 1, 4096, 2, "bf16", "near miss: a decoy in the raw digest"),
        plan("i-inf2", L3I, "inf2", 4, 4096, 8, "bf16", "inf2 normalised to trn1"),
        plan("case-8", L3I_CASE, "trn1", 8, 4096, 8, "bf16", "another case: its alias-less entry"),
        plan("case-dtype", L3I_CASE, "trn1", 4, 4096, 8, "fp16", "another case, near miss"),
        plan("i-trn1n", L3I, "trn1n", 8, 4096, 8, "bf16", "trn1n normalised to trn1"),
        plan("i-target", L3I, "trn2", 4, 4096, 8, "bf16", "near miss: target"),
        plan("i-seq", L3I, "trn1", 4, 2048, 8, "bf16", "near miss: sequence length"),
        plan("i-tp", L3I, "trn1", 4, 4096, 4, "bf16", "near miss: tensor parallel"),
        plan("i-dtype", L3I, "trn1", 4, 4096, 8, "fp16", "near miss: dtype"),
        plan("i-batch", L3I, "trn1", 2, 4096, 8, "bf16", "near miss: batch size"),
        plan("b-fp16-tp", L3, "trn1", 1, 4096, 8, "fp16", "near miss: tensor parallel"),
        plan("ft-trn1", FT, "trn1", 8, 2048, 8, "bf16", "near miss: target"),
        plan("bert-1", BERT, "trn1", 1, 128, 1, "bf16", "traced: never selected",
             task="feature-extraction"),
    ]


def lookups():
    tg = {"task": "text-generation"}
    return [
        dict(tg, model=L3, why="every entry of the base model's architecture"),
        dict(model=L3, why="no task: every task's digest"),
        dict(tg, model=L3I, why="the Instruct model"),
        dict(tg, model=FT, why="a fine-tune"),
        dict(tg, model=L31, why="another architecture"),
        dict(tg, model=QW, why="trn2 and trn3 entries"),
        dict(tg, model=VLM, why="an unknown model type"),
        dict(tg, model=GEMMA, why="a composite config"),
        dict(tg, model=L3I_CASE, why="the Instruct model's id in another case"),
        dict(tg, model=L3, instance_type="trn2", why="filtered by target"),
        dict(tg, model=L3, instance_type="inf2", why="inf2 compared as given"),
        dict(tg, model=L3, batch_size=8, why="filtered by batch size"),
        dict(tg, model=L3, sequence_length=4096, tensor_parallel_size=8, dtype="bfloat16",
             why="filtered by shape and dtype"),
        dict(tg, model=FT, dtype="float16", why="a fine-tune, fp16"),
        dict(tg, model=QW, instance_type="trn1", why="no trn1 entry"),
    ]


def main():
    if "--models" in sys.argv:
        print(json.dumps(config_texts(), indent=1, sort_keys=True))
        return
    texts = config_texts()
    print(json.dumps({"models": {m: texts[m] for m in MODELS}, "hashed": HASHED,
                      "entries": entries(), "plans": plans(), "lookups": lookups()}))


if __name__ == "__main__":
    main()
