#!/usr/bin/env python3
"""The canonical statement of index entries (docs/formats.md, "Signed entries"), rebuilt with
CPython's json alone: a second implementation for tests/unit/signing_test.cpp to compare with.

    signing_statement.py ENTRIES.json OUT_DIR

ENTRIES.json is a list of entries as the index writes them; OUT_DIR/<i> receives the statement
bytes of entry i.
"""
import json
import os
import sys


def statement(entry: dict) -> bytes:
    files = [{"path": module["name"] + "/" + f["name"], "size": f["size"], "sha256": f["sha256"]}
             for module in entry["modules"] for f in module["files"]]
    files += [{"path": f["name"], "size": f["size"], "sha256": f["sha256"]}
              for f in entry["registry"]]
    files.sort(key=lambda f: f["path"])
    return json.dumps({"statement": "neuron-cache entry v1", "key": entry["key"],
                       "compiler_version": entry["inputs"]["compiler"]["version"],
                       "inputs": entry["inputs"], "files": files}, sort_keys=True).encode("utf-8")


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as source:
        entries = json.load(source)
    for index, entry in enumerate(entries):
        with open(os.path.join(sys.argv[2], str(index)), "wb") as out:
            out.write(statement(entry))
    return 0


if __name__ == "__main__":
    sys.exit(main())
