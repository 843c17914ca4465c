#!/usr/bin/env python3
"""Writes registry entries the way optimum-neuron does, for tests that must not trust
neuron-cache's own writer. Reads a JSON list of entries on stdin, prints {path in repo: file text}.

Each entry: {"compiler_dir", "optimum_version", "generation", "model_id", "task", "model_type",
"config" (model config without neuron), "neuron" (neuron config), "mode" (0.1 only),
"machine" (optional: the local cache the entry was written in; aliases are per machine),
"alias" (optional, default true: false when the machine's alias folder already existed),
"digest_folder" (optional: a folder other than the entry's digest, for planted decoys)}.
Generations (format spec 4.8):
  "0.4.5": serialize() text at <ver>/<arch digest>/<h>.json, plus the alias
           <ver>/<model_type>/<model_id>/<h>.json only when the alias folder does not exist yet;
  "0.2":   serialize() text at <ver>/<model_type>/<model_id>/<h>.json;
  "0.1":   compact json.dumps(config, sort_keys=True) with the neuron part inside the config, at
           <ver>/<mode>/<model_type>/<model_id>/<h>.json.
"""
import hashlib
import json
import sys


def serialize(entry):
    d = dict(entry["config"])
    d["neuron"] = entry["neuron"]
    d["_entry_class"] = "SingleModelCacheEntry"
    d["_model_id"] = entry["model_id"]
    d["_task"] = entry["task"]
    return json.dumps(d, indent=2, sort_keys=True)


def arch_digest(entry):
    arch = {"model_type": entry["model_type"], "task": entry["task"], "config": entry["config"]}
    return hashlib.sha256(json.dumps(arch, sort_keys=True).encode()).hexdigest()


def entry_hash(text):
    return hashlib.sha512(text.encode("utf-8")).hexdigest()[:20]


def main():
    files = {}
    alias_dirs = set()
    for entry in json.load(sys.stdin):
        registry = entry["compiler_dir"] + "/0_REGISTRY/" + entry["optimum_version"]
        model_dir = entry["model_type"] + "/" + entry["model_id"]
        generation = entry["generation"]
        if generation == "0.1":
            config = dict(entry["config"])
            config["neuron"] = entry["neuron"]
            text = json.dumps(config, sort_keys=True)
            files[f"{registry}/{entry['mode']}/{model_dir}/{entry_hash(text)}.json"] = text
            continue
        text = serialize(entry)
        h = entry_hash(text)
        if generation == "0.2":
            files[f"{registry}/{model_dir}/{h}.json"] = text
            continue
        folder = entry.get("digest_folder") or arch_digest(entry)
        files[f"{registry}/{folder}/{h}.json"] = text
        alias_dir = f"{registry}/{model_dir}"
        machine_dir = (entry.get("machine", ""), alias_dir)
        if machine_dir not in alias_dirs:  # os.path.exists(alias dir) in hub_neuronx_cache
            alias_dirs.add(machine_dir)
            if entry.get("alias", True):
                files[f"{alias_dir}/{h}.json"] = text
    json.dump(files, sys.stdout)


if __name__ == "__main__":
    main()
