#!/usr/bin/env python3
"""Writes vector.json, the worked example of a signed index entry (docs/formats.md, "Signed
entries"), with nothing but CPython's json/hashlib/base64 and the openssl command line, so the
vector is independent of neuron-cache's code; tests/unit/signing_test.cpp checks neuron-cache
against it.

    tests/data/signing/make_vector.py > tests/data/signing/vector.json

The seed is RFC 8032's first Ed25519 test key (its public key is known), used for the vector
only: never trust it.
"""
import base64
import hashlib
import json
import os
import subprocess
import sys
import tempfile

SEED = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
NAME = "acme-ci-1"
# PKCS#8 of an Ed25519 private key: this fixed prefix and the 32-byte seed (RFC 8410).
PKCS8_PREFIX = bytes.fromhex("302e020100300506032b657004220420")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def openssl(*args: str, data: bytes = b"") -> bytes:
    return subprocess.run(["openssl", *args], input=data, check=True, capture_output=True).stdout


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def main() -> int:
    inputs = {
        "compiler": {"flags": ["--optlevel=2"], "num_cores": 8, "target": "trn1",
                     "version": "2.21.33363.0+82129205"},
        "environment": {"checkpoint_revision": "9ab9e76e2b09f9f29ea2d56aa5bd139e4445c59e",
                        "optimum_neuron_version": "0.4.5"},
        "key_format": 1,
        "model": {"batch_size": 4, "model_id": "meta-llama/Llama-3.1-8B", "model_type": "llama",
                  "precision": "bf16", "sequence_length": 4096, "task": "text-generation"},
    }
    key = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:32]
    module_a = "MODULE_10521812233406584412+d7517139"
    module_b = "MODULE_7364287463573413187+d7517139"
    registry = "0_REGISTRY/0.4.5/llama/meta-llama/Llama-3.1-8B/6d3bb3f3e7d7c2ac0a47.json"
    entry = {
        "compile_seconds": 1834.5, "configuration": "llama-bs4", "created_at": "2026-11-29T18:00:00Z",
        "inputs": inputs, "key": key,
        "modules": [
            {"files": [{"name": "model.done", "sha256": sha(""), "size": 0},
                       {"name": "model.neff", "sha256": sha("neff a"), "size": 48213504}],
             "name": module_a},
            {"files": [{"name": "model.done", "sha256": sha(""), "size": 0},
                       {"name": "model.neff", "sha256": sha("neff b"), "size": 1048576}],
             "name": module_b},
        ],
        "registry": [{"name": registry, "sha256": sha("registry"), "size": 1229}],
        "tool": "neuron-cache 0.2.0",
    }
    files = [{"path": m["name"] + "/" + f["name"], "size": f["size"], "sha256": f["sha256"]}
             for m in entry["modules"] for f in m["files"]]
    files += [{"path": f["name"], "size": f["size"], "sha256": f["sha256"]} for f in entry["registry"]]
    files.sort(key=lambda f: f["path"])
    statement = json.dumps({"statement": "neuron-cache entry v1", "key": key,
                            "compiler_version": inputs["compiler"]["version"], "inputs": inputs,
                            "files": files}, sort_keys=True)

    with tempfile.TemporaryDirectory() as folder:
        pem = os.path.join(folder, "key.pem")
        message = os.path.join(folder, "statement")
        with open(message, "wb") as out:
            out.write(statement.encode("utf-8"))
        openssl("pkey", "-inform", "DER", "-out", pem, data=PKCS8_PREFIX + SEED)
        public_der = openssl("pkey", "-in", pem, "-pubout", "-outform", "DER")
        signature = openssl("pkeyutl", "-sign", "-rawin", "-inkey", pem, "-in", message)
    assert len(public_der) == 44 and len(signature) == 64
    entry["signatures"] = [{"key": NAME, "sig": b64(signature)}]
    vector = {
        "seed_hex": SEED.hex(),
        "secret_key_file": NAME + ":" + b64(SEED) + "\n",
        "public_key_line": NAME + ":" + b64(public_der[-32:]),
        "entry": entry,
        "statement": statement,
        "statement_sha256": hashlib.sha256(statement.encode()).hexdigest(),
        "signature": b64(signature),
    }
    json.dump(vector, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
