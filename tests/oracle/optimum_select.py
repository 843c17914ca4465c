#!/usr/bin/env python3
"""optimum-neuron 0.4.5's registry lookup, reimplemented from its source for tests (never used by
the product): optimum/neuron/cache/hub_cache.py hub_registry_path, get_hub_cached_entries and
select_hub_cached_entries, entries/single_model.py (from_hub, arch_digest), entries/cache_entry.py
(CACHE_WHITE_LIST, deserialize), utils/input_generators.py (DTYPE_MAPPER) and
commands/neuron/cache.py (the lookup table's rows). HfApi calls are made over HTTP against the
Hub at "endpoint", as huggingface_hub makes them (tree listings follow the Link header).

The architecture digest hashes transformers' to_diff_dict() of the model's config, which this
oracle does not compute: "hashed" gives it, as real transformers 4.57 made it
(tests/data/vectors/arch-digest/parity-models.json), and the oracle hashes it as optimum-neuron does.

stdin: {"endpoint", "token", "repo", "pinned" (neuronx-cc version from the package metadata),
        "optimum_version" (optimum-neuron __version__), "hashed": {model: {task: to_diff_dict()
        without CACHE_WHITE_LIST, or {"error"} where transformers fails}}, "queries": [{"model", "task",
        "instance_type", "batch_size", "sequence_length", "tensor_parallel_size",
        "torch_dtype"}]} (a missing or null filter is None)
stdout: one result per query: {"selected": [neuron config dicts], "rows": [[batch size,
        sequence length, tensor parallel, dtype, instance type]] or null with "lookup_error"
        when optimum-cli's lookup table raises (traced entries have no batch_size)}
"""

import hashlib
import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request

CACHE_WHITE_LIST = ["_name_or_path", "transformers_version", "_diffusers_version", "eos_token_id",
                    "bos_token_id", "pad_token_id", "torchscript", "torch_dtype", "_commit_hash",
                    "sample_size", "projection_dim", "_use_default_values",
                    "_attn_implementation_autoset", "return_dict"]

# DTYPE_MAPPER.MAPPING | EXTENDED_MAPPING, torch dtypes by name.
DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "int64": "int64",
          "int32": "int32", "int8": "int8", "bool": "bool", "bfloat16": "bfloat16",
          "float16": "float16", "float32": "float32", "float64": "float64"}


class EntryNotFound(Exception):
    pass


class Hub:
    def __init__(self, endpoint, token):
        self.endpoint = endpoint.rstrip("/")
        self.token = token

    def get(self, url):
        request = urllib.request.Request(url)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            return urllib.request.urlopen(request, timeout=60)
        except urllib.error.HTTPError as error:
            if error.code == 404:
                raise EntryNotFound(url) from None
            raise

    def list_repo_tree(self, repo, path_in_repo="", recursive=False):
        path = urllib.parse.quote(path_in_repo.rstrip("/"), safe="")
        url = f"{self.endpoint}/api/models/{repo}/tree/main" + (f"/{path}" if path else "")
        url += "?recursive=true&expand=false" if recursive else "?expand=false"
        while url:
            response = self.get(url)
            yield from json.loads(response.read())
            match = re.search(r'<([^>]+)>;\s*rel="next"', response.headers.get("Link") or "")
            url = match.group(1) if match else None

    def download(self, repo, path):
        return self.get(f"{self.endpoint}/{repo}/resolve/main/{urllib.parse.quote(path)}").read()

    def file_exists(self, repo, path):
        try:
            self.download(repo, path)
            return True
        except EntryNotFound:
            return False


def hub_registry_path(hub, repo, pinned, optimum_version):
    prefix = "neuronxcc-" + pinned
    for item in hub.list_repo_tree(repo, ""):
        if item["path"].startswith(prefix):
            return item["path"] + "/0_REGISTRY/" + optimum_version
    raise ValueError(f"No hub cache registry found in {repo} for neuronx-cc-{pinned}")


def single_arch_digest(hashed, model_id, task):
    """SingleModelCacheEntry.from_hub(model_id, task).arch_digest(): SHA-256 of the dict
    transformers' to_diff_dict() gave (`hashed`), as cache_entry.py hashes it."""
    config = dict(hashed[model_id][task])
    if "error" in config:
        raise ValueError(f"transformers cannot load {model_id}: {config['error']}")
    for key in CACHE_WHITE_LIST:
        config.pop(key, None)
    config.pop("neuron", None)
    arch = {"model_type": config["model_type"], "task": task, "config": config}
    return hashlib.sha256(json.dumps(arch, sort_keys=True).encode("utf-8")).hexdigest()


def deserialize_neuron_config(text):
    cache = json.loads(text)
    entry_class = cache.pop("_entry_class")
    cache.pop("_model_id")
    cache.pop("_task")
    if entry_class == "SingleModelCacheEntry":
        return cache.get("neuron")
    if entry_class == "MultiModelCacheEntry":
        return cache["unet"].get("neuron")
    raise ValueError(f"Invalid cache entry of type {entry_class}")


def get_hub_cached_entries(hub, request, model_id, task):
    if not hub.file_exists(model_id, "config.json"):
        raise ValueError(f"Unable to evaluate model type for {model_id}")
    json.loads(hub.download(model_id, "config.json"))  # from_hub reads it: it must be there
    target_arch = single_arch_digest(request["hashed"], model_id, task)
    target_path = hub_registry_path(hub, request["repo"], request["pinned"],
                                    request["optimum_version"]) + "/" + target_arch + "/"
    entries = []
    try:
        for item in hub.list_repo_tree(request["repo"], target_path):
            entries.append(deserialize_neuron_config(hub.download(request["repo"], item["path"])))
    except EntryNotFound:
        pass
    return entries


def select_hub_cached_entries(hub, request, q):
    selected = []
    for entry in get_hub_cached_entries(hub, request, q["model"], q.get("task")):
        if q.get("instance_type") is not None and entry.get("target") != q["instance_type"]:
            continue
        if q.get("batch_size") is not None and entry.get("batch_size") != q["batch_size"]:
            continue
        if q.get("sequence_length") is not None and \
                entry.get("sequence_length") != q["sequence_length"]:
            continue
        if q.get("tensor_parallel_size") is not None and \
                entry.get("tp_degree") != q["tensor_parallel_size"]:
            continue
        if q.get("torch_dtype") is not None:
            target_value = DTYPES[q["torch_dtype"]]
            entry_value = DTYPES[entry.get("torch_dtype", entry.get("dtype"))]
            if target_value != entry_value:
                continue
        selected.append(entry)
    return selected


def lookup_rows(entries):
    """optimum-cli neuron cache lookup's table rows: deduplicated, sorted."""
    rows = set()
    for entry in entries:
        rows.add((str(entry["batch_size"]), str(entry["sequence_length"]),
                  str(entry.get("tp_degree", entry.get("tensor_parallel_size"))),
                  str(entry.get("torch_dtype", entry.get("dtype"))), str(entry["target"])))
    return sorted(rows, key=lambda x: (int(x[2]), int(x[0]), int(x[1]), x[3]))


def main():
    request = json.load(sys.stdin)
    hub = Hub(request["endpoint"], request.get("token"))
    results = []
    for q in request["queries"]:
        selected = select_hub_cached_entries(hub, request, q)
        result = {"selected": selected}
        try:
            result["rows"] = [list(row) for row in lookup_rows(selected)]
        except KeyError as error:
            result["rows"] = None
            result["lookup_error"] = f"KeyError: {error}"
        results.append(result)
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
