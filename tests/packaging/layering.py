#!/usr/bin/env python3
"""ctest layering: the folders of core/neuron_cache/ stand in layers, and a folder includes only
folders of lower layers (docs/contributing.md's "Code layout" lists them in this order). Two more rules:
only the Hub backend of the storage seam (storage/hub_store.*, storage/hub_models.h, storage/open.cpp)
and the front ends (cli/, github-action/) include hub/, so nothing above the seam knows the Hub
client; and hub/ includes nothing of the local cache (local/).

    tests/packaging/layering.py SOURCE_DIR
"""
import pathlib
import re
import sys

# Lowest first. A folder may include itself and any folder before it.
LAYERS = [
    "sys", "format", "trust", "transformers", "process", "config", "log", "git", "manifest", "local", "net", "aws", "hub",
    "storage",
    "remote", "transfer", "fleet", "maintenance", "plan", "compile", "pipeline", "report", "cli",
]
HUB_USERS = {"storage/hub_store.h", "storage/hub_store.cpp", "storage/hub_models.h",
             "storage/open.cpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"neuron_cache/([a-z_]+)/[^"]+"', re.M)


def problems(root: pathlib.Path):
    core = root / "core" / "neuron_cache"
    for path in sorted(core.rglob("*")):
        if path.suffix not in (".h", ".cpp") or path.parent == core:
            continue
        relative = path.relative_to(core).as_posix()
        folder = relative.split("/")[0]
        if folder not in LAYERS:
            yield f"{relative}: folder {folder}/ has no layer: add it to LAYERS and docs/contributing.md"
            continue
        for used in INCLUDE.findall(path.read_text(errors="replace")):
            if used not in LAYERS:
                continue
            if LAYERS.index(used) > LAYERS.index(folder):
                yield f"{relative} includes {used}/, a layer above {folder}/"
            if used == "hub" and folder != "hub" and folder != "cli" and relative not in HUB_USERS:
                yield f"{relative} includes hub/: only the Hub backend of storage/ may"
            if folder == "hub" and used == "local":
                yield f"{relative} includes local/: the Hub client knows no local cache"


def main() -> int:
    found = list(problems(pathlib.Path(sys.argv[1])))
    for line in found:
        print("FAIL:", line, file=sys.stderr)
    if not found:
        print(f"layering: {len(LAYERS)} layers, no include against them")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
