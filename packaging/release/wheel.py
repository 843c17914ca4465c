#!/usr/bin/env python3
"""Packs the release's files as a Python wheel, as cmake and ninja ship theirs: `pip install`
puts `neuron-cache` (and `neuron-cache-action`) on PATH. A build-time script: the installed
package runs no Python but the two-line launcher pip's entry point needs.

    wheel.py STAGE VERSION OUTDIR   (STAGE: the unpacked release folder)

The wheel holds STAGE's bin/ and lib/ under neuron_cache/data/ (the executables' $ORIGIN/../lib
RPATH still finds the bundled libraries) and the license texts; its tag says glibc 2.34, which
check-glibc.sh proves."""
import base64
import hashlib
import os
import sys
import zipfile

TAG = "py3-none-manylinux_2_34_x86_64"

LAUNCHER = '''"""neuron-cache's release executables (see the project's README)."""
import os
import sys

_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "bin")


def _exec(name):
    path = os.path.join(_BIN, name)
    os.execv(path, [name] + sys.argv[1:])


def main():
    _exec("neuron-cache")


def action():
    _exec("neuron-cache-action")
'''


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def main():
    stage, version, out = sys.argv[1:4]
    dist = "neuron_cache-%s" % version
    info = dist + ".dist-info"
    members = [("neuron_cache/__init__.py", LAUNCHER.encode(), 0o644)]
    for top in ["bin", "lib", "share/licenses"]:
        for folder, dirs, files in sorted(os.walk(os.path.join(stage, top))):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(folder, name)
                relative = os.path.relpath(path, stage)
                mode = 0o755 if top == "bin" else 0o644
                with open(path, "rb") as f:
                    members.append(("neuron_cache/data/" + relative, f.read(), mode))
    metadata = ("Metadata-Version: 2.1\nName: neuron-cache\nVersion: %s\n"
                "Summary: Reuse compiled AWS Neuron models (NEFFs) instead of recompiling them\n"
                "Requires-Python: >=3.7\n" % version)
    wheel = ("Wheel-Version: 1.0\nGenerator: neuron-cache packaging/release/wheel.py\n"
             "Root-Is-Purelib: false\nTag: %s\n" % TAG)
    entry_points = ("[console_scripts]\nneuron-cache = neuron_cache:main\n"
                    "neuron-cache-action = neuron_cache:action\n")
    members += [(info + "/METADATA", metadata.encode(), 0o644),
                (info + "/WHEEL", wheel.encode(), 0o644),
                (info + "/entry_points.txt", entry_points.encode(), 0o644)]
    record = "".join(record_line(n, d) + "\n" for n, d, _ in members) + info + "/RECORD,,\n"
    members.append((info + "/RECORD", record.encode(), 0o644))

    target = os.path.join(out, "%s-%s.whl" % (dist, TAG))
    with zipfile.ZipFile(target + ".partial", "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data, mode in members:
            entry = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            entry.external_attr = (0o100000 | mode) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, data)
    os.replace(target + ".partial", target)
    print(target)


if __name__ == "__main__":
    main()
