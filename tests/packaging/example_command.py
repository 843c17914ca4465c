#!/usr/bin/env python3
"""One example compile command: the README's manifest snippet (its first yaml block, the quick
start's manifest), the manifest of docs/configuration.md and the example manifests
(examples/neuron-cache.yaml, examples/bazel/neuron-cache.yaml) must give the same
`compile: command:` words, so a user copying either gets the flags the other has.
  example_command.py SOURCE_DIR"""
import re
import sys
from pathlib import Path


def command_words(text: str, where: str) -> list:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        match = re.match(r"^(\s*)command:\s*(>-|>|\|)?\s*(.*)$", line)
        if not match:
            continue
        indent = len(match.group(1))
        words = match.group(3).split("#")[0].split()
        for follow in lines[i + 1:]:
            if follow.strip() and len(follow) - len(follow.lstrip()) <= indent:
                break
            words += follow.split()
        return words
    sys.exit(f"{where}: no `command:` found")


def main() -> int:
    root = Path(sys.argv[1])
    readme = (root / "README.md").read_text()
    snippet = re.search(r"```yaml\n(.*?)```", readme, re.S)
    if not snippet:
        sys.exit("README.md: no yaml snippet")
    reference = command_words((root / "examples/neuron-cache.yaml").read_text(), "example")
    reference_doc = re.search(r"```yaml\n(.*?)```", (root / "docs/configuration.md").read_text(), re.S)
    if not reference_doc:
        sys.exit("docs/configuration.md: no yaml snippet")
    sources = {
        "README.md's manifest snippet": snippet.group(1),
        "docs/configuration.md's manifest": reference_doc.group(1),
        "examples/bazel/neuron-cache.yaml": (root / "examples/bazel/neuron-cache.yaml").read_text(),
    }
    status = 0
    for where, text in sources.items():
        words = command_words(text, where)
        if words != reference:
            print(f"{where}: compile command differs from examples/neuron-cache.yaml's:\n"
                  f"  {' '.join(words)}\n  {' '.join(reference)}")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
