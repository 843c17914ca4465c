#!/usr/bin/env python3
"""CPython json/hashlib oracle for the pyjson and registry tests (test-only, never at runtime).

  random_docs.py docs SEED COUNT     one JSON line per random document:
      input     json.dumps(doc)  (insertion order, so keys arrive unsorted)
      indented  json.dumps(doc, indent=2, sort_keys=True)
      compact   json.dumps(doc, sort_keys=True)
      sha512_20 SHA-512[:20] of indented, sha256 of compact, md5_8 MD5[:8] of compact
  random_docs.py entries SEED COUNT  one JSON line per random registry entry:
      input, serialized, entry_hash, arch_compact, arch_digest (rules of tests/data/vectors)
  random_docs.py redump FILE         FILE holds json texts separated by \\x1e; prints each one
      re-dumped with indent=2, sort_keys=True, separated by \\x1e

Output lines are ASCII (ensure_ascii), so any strict JSON parser can read them.
"""

import hashlib
import json
import random
import struct
import sys

INT_BOUNDS = [0, -1, 1, -(2**63), 2**63 - 1, 2**63, 2**64 - 1, 2**53 + 1, -(2**53) - 1]
SPECIAL_FLOATS = [0.0, -0.0, float("nan"), float("inf"), float("-inf"), 5e-324, 1e-05, 1e16,
                  1.7976931348623157e308, 2.2250738585072014e-308, 0.1, 1e22]


def random_char(rng):
    kind = rng.random()
    if kind < 0.45:
        return chr(rng.randint(0x20, 0x7E))
    if kind < 0.55:
        return chr(rng.randint(0x00, 0x1F))  # control characters
    if kind < 0.60:
        return rng.choice('"\\/\x7f')
    if kind < 0.75:
        return chr(rng.randint(0x80, 0x7FF))
    if kind < 0.88:
        return chr(rng.choice([rng.randint(0x800, 0xD7FF), rng.randint(0xE000, 0xFFFF)]))
    if kind < 0.97:
        return chr(rng.randint(0x10000, 0x10FFFF))  # astral: a surrogate pair once escaped
    return chr(rng.randint(0xD800, 0xDFFF))  # lone surrogate


def fix_adjacent_surrogates(text):
    # A lone high surrogate right before a lone low one would be read back as one astral
    # character, which changes the string (and its sort order); keep them apart.
    out = []
    for ch in text:
        if out and 0xD800 <= ord(out[-1]) <= 0xDBFF and 0xDC00 <= ord(ch) <= 0xDFFF:
            out.append("x")
        out.append(ch)
    return "".join(out)


def random_string(rng, max_len=12):
    return fix_adjacent_surrogates("".join(random_char(rng) for _ in range(rng.randint(0, max_len))))


def random_key(rng):
    if rng.random() < 0.6:
        alphabet = "aAbBzZ_09-." if rng.random() < 0.5 else "abcXYZ_012\u00e9\u4e2d\U0001F600"
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
    return random_string(rng, 8)


def random_float(rng):
    if rng.random() < 0.2:
        return rng.choice(SPECIAL_FLOATS)
    if rng.random() < 0.1:  # subnormals: exponent bits all zero
        bits = rng.getrandbits(52) | (rng.getrandbits(1) << 63)
    else:
        bits = rng.getrandbits(64)
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def random_int(rng):
    kind = rng.random()
    if kind < 0.3:
        return rng.choice(INT_BOUNDS)
    if kind < 0.7:
        return rng.randint(-1000, 1000)
    return rng.randint(-(2**63), 2**64 - 1)


def random_scalar(rng):
    kind = rng.random()
    if kind < 0.3:
        return random_string(rng)
    if kind < 0.55:
        return random_int(rng)
    if kind < 0.85:
        return random_float(rng)
    return rng.choice([True, False, None])


def random_value(rng, depth):
    kind = rng.random()
    if depth <= 0 or kind < 0.5:
        return random_scalar(rng)
    if kind < 0.75:
        return [random_value(rng, depth - 1) for _ in range(rng.randint(0, 5))]
    return random_dict(rng, depth - 1)


def random_dict(rng, depth, max_keys=6):
    return {random_key(rng): random_value(rng, depth) for _ in range(rng.randint(0, max_keys))}


def hashes(indented, compact):
    return {
        "sha512_20": hashlib.sha512(indented.encode()).hexdigest()[:20],
        "sha256": hashlib.sha256(compact.encode()).hexdigest(),
        "md5_8": hashlib.md5(compact.encode()).hexdigest()[:8],
    }


def doc_record(rng):
    doc = random_value(rng, 5) if rng.random() < 0.2 else random_dict(rng, 5)
    indented = json.dumps(doc, indent=2, sort_keys=True)
    compact = json.dumps(doc, sort_keys=True)
    return {"input": json.dumps(doc), "indented": indented, "compact": compact,
            **hashes(indented, compact)}


UNDERSCORE_KEYS = ("_entry_class", "_model_id", "_task")


def random_config(rng):
    config = random_dict(rng, 3)
    if rng.random() < 0.5:
        config["_" + random_key(rng)] = random_scalar(rng)  # other "_" keys stay in the config
    return config


def single_entry(rng):
    entry = random_config(rng)
    entry["model_type"] = rng.choice(["llama", "bert", "qwen3", random_string(rng, 6)])
    if rng.random() < 0.9:
        entry["neuron"] = random_dict(rng, 2) if rng.random() < 0.9 else None
    entry.update({"_entry_class": "SingleModelCacheEntry", "_model_id": "org/" + random_key(rng),
                  "_task": rng.choice(["text-generation", "feature-extraction", random_key(rng)])})
    config = {k: v for k, v in entry.items() if k != "neuron" and k not in UNDERSCORE_KEYS}
    return entry, {"model_type": entry["model_type"], "task": entry["_task"], "config": config}


def multi_entry(rng):
    main = rng.choice(["unet", "transformer"])
    names = [main] + rng.sample(["text_encoder", "text_encoder_2", "text_encoder_3", "\u00e9tage"],
                                rng.randint(0, 3))
    entry = {}
    for name in names:
        entry[name] = random_config(rng)
        if rng.random() < 0.7:
            entry[name]["neuron"] = random_dict(rng, 2)
    entry.update({"_entry_class": "MultiModelCacheEntry", "_model_id": "org/" + random_key(rng),
                  "_task": None})
    configs = {name: {k: v for k, v in entry[name].items() if k != "neuron"} for name in names}
    model_type = "stable-diffusion" if main == "unet" else "diffusion-transformer"
    return entry, {"model_type": model_type, "configs": configs}


def shuffled(rng, entry):
    # The C++ side must not depend on the order keys arrive in.
    items = list(entry.items())
    rng.shuffle(items)
    return dict(items)


def entry_record(rng):
    entry, arch = single_entry(rng) if rng.random() < 0.6 else multi_entry(rng)
    serialized = json.dumps(entry, indent=2, sort_keys=True)
    arch_compact = json.dumps(arch, sort_keys=True)
    return {"input": json.dumps(shuffled(rng, entry)), "serialized": serialized,
            "entry_hash": hashlib.sha512(serialized.encode()).hexdigest()[:20],
            "arch_compact": arch_compact,
            "arch_digest": hashlib.sha256(arch_compact.encode()).hexdigest()}


def redump(path):
    with open(path, encoding="ascii") as f:
        texts = f.read().split("\x1e")
    sys.stdout.write("\x1e".join(json.dumps(json.loads(t), indent=2, sort_keys=True) for t in texts))


def main(argv):
    if len(argv) == 3 and argv[1] == "redump":
        redump(argv[2])
        return 0
    if len(argv) != 4 or argv[1] not in ("docs", "entries"):
        sys.stderr.write(__doc__)
        return 2
    rng = random.Random(int(argv[2]))
    make = doc_record if argv[1] == "docs" else entry_record
    for _ in range(int(argv[3])):
        sys.stdout.write(json.dumps(make(rng)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
