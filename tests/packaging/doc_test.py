#!/usr/bin/env python3
"""ctest doc_test: the user documentation (README.md and docs/*.md) says what is true.

    tests/packaging/doc_test.py SOURCE_DIR BUILD_DIR [--no-run]

Checks, in this order:
1. Every relative link resolves to a file of the repository, and a `#anchor` to a heading of the
   Markdown file it names (GitHub's slugs); every fence names its language.
2. No issue or pull request numbers ("issue 25", "#31", "PR 7") anywhere in the documentation.
3. README.md is at most 300 lines: the reference lives in docs/.
4. Every shell block (```sh, ```bash, ```shell, ```console) runs, in order, file by file: README.md
   first, then docs/*.md. Each file gets a temporary HOME, an empty local cache
   (NEURON_COMPILE_CACHE_URL) and an empty working folder holding the README's manifest as
   neuron-cache.yaml; all of them talk to one test Hub server (hub-server, from BUILD_DIR, with the
   demo's repos and the token hf_alice_write, whose user is in the orgs `acme` and `my-org`), with
   the built `neuron-cache` on PATH and the project's stand-in compiler as `optimum-cli`.
   What cannot exist on a build machine is mapped to a local equivalent, and each mapping is
   printed: the GitHub release URL to a loopback server holding the release tarball (the one the
   `release` fixture made in BUILD_DIR/tests/release, else a small one made here from the built
   tool), `sudo` to nothing (the paths below are the test's own), and /opt and /mnt to folders of
   the test's sandbox.
   In a console block, `$ ` lines are the commands and the lines after each are its expected
   output (stdout and stderr as a terminal shows them, without trailing spaces); a line `...`
   stands for any number of lines.

Markers, an HTML comment on the line before a block:
   <!-- doc-test: skip, REASON -->   the block is not run; the test lists it with its reason
   <!-- doc-test: file NAME -->      the block is written to NAME in the file's working folder
A shell block without a marker that does not run is a failure. --no-run does 1-3 only.
"""
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

SHELL = {"sh", "bash", "shell", "console"}
MARKER = re.compile(r"^<!--\s*doc-test:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([^\s`]*)\s*$")
ISSUE = [
    re.compile(r"(?i)\b(?:issues?|pull requests?|PRs?)\s*#?\s*\d+"),
    re.compile(r"(?<![\w&/#])#\d+\b"),
]
RELEASE_URL = "https://github.com/your-org/neuron-cache/releases/download"
README_MAX_LINES = 300
BLOCK_TIMEOUT = 120


class Block:
    def __init__(self, path, line, lang, text, marker):
        self.path, self.line, self.lang, self.text, self.marker = path, line, lang, text, marker

    def where(self, root):
        return f"{self.path.relative_to(root)}:{self.line}"


def parse(path):
    """The fenced blocks of a Markdown file, the text outside them and fence problems."""
    lines = path.read_text().splitlines()
    blocks, outside, problems = [], [], []
    i = 0
    pending = None  # (line number, marker text)
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if not fence:
            marker = MARKER.match(line.strip())
            if marker:
                if pending:
                    problems.append(f"{path}:{pending[0]}: a doc-test marker not followed by a block")
                pending = (i + 1, marker.group(1))
            elif line.strip():
                if pending:
                    problems.append(f"{path}:{pending[0]}: a doc-test marker not followed by a block")
                    pending = None
            outside.append((i + 1, line))
            i += 1
            continue
        indent, ticks, lang = fence.groups()
        start = i + 1
        body = []
        i += 1
        while i < len(lines) and not (lines[i].strip().startswith(ticks) and
                                      lines[i].strip().strip(ticks[0]) == ""):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        if i >= len(lines):
            problems.append(f"{path}:{start}: a fence that is never closed")
        i += 1
        if not lang:
            problems.append(f"{path}:{start}: a fence without a language (text, yaml, sh, ...)")
        blocks.append(Block(path, start, lang.lower(), "\n".join(body) + "\n",
                            pending[1] if pending else None))
        pending = None
    if pending:
        problems.append(f"{path}:{pending[0]}: a doc-test marker not followed by a block")
    return blocks, outside, problems


def slug(heading):
    """GitHub's anchor of a heading: its text without Markdown, lower case, punctuation dropped
    (but - and _), each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        _, outside, _ = parse(path)
        seen, result = {}, set()
        for _, line in outside:
            match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not match:
                continue
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            result.add(base if count == 0 else f"{base}-{count}")
        cache[path] = result
    return cache[path]


def check_links(root, path, outside):
    problems = []
    for number, line in outside:
        line = re.sub(r"`[^`]*`", "", line)  # links inside code spans are text
        for target in re.findall(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # https:, mailto: ...: not checked here (no network)
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(root)}:{number}"
            if root.resolve() not in dest.parents and dest != root.resolve():
                problems.append(f"{where}: link {target} leaves the repository")
                continue
            if not dest.exists():
                problems.append(f"{where}: link {target}: {dest.relative_to(root.resolve())} does not exist")
                continue
            if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append(f"{where}: link {target}: no heading with the anchor #{anchor} in "
                                f"{dest.relative_to(root.resolve())}")
    return problems


def check_issue_numbers(root, path):
    problems = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        for pattern in ISSUE:
            for match in pattern.finditer(line):
                problems.append(f"{path.relative_to(root)}:{number}: an issue number in user "
                                f"documentation: {match.group(0)!r}")
    return problems


# ---------------------------------------------------------------------------------------------
# Running the blocks


class Sandbox:
    """The test Hub, the loopback release host and the stand-in compiler, for every file."""

    def __init__(self, root, build, work):
        self.root, self.build, self.work = root, build, work
        self.tool = build / "core" / "neuron-cache"
        hub_server = build / "tests" / "hub_server" / "hub-server"
        for needed in (self.tool, hub_server):
            if not os.access(needed, os.X_OK):
                sys.exit(f"FAIL: {needed} is not built (cmake --build {build} --target "
                         "neuron-cache hub-server)")
        self.version = re.search(r"project\(neuron_cache VERSION ([0-9.]+)",
                                 (root / "CMakeLists.txt").read_text()).group(1)
        for folder in ("bin", "opt", "mnt", "tmp"):
            (work / folder).mkdir(parents=True)
        # The stand-in compiler as optimum-cli, as the demo and the front ends' tests use it.
        shim = work / "bin" / "optimum-cli"
        shim.write_text('#!/bin/sh\n[ "$1 $2" = "export neuron" ] && shift 2\nexec "%s" "$@"\n'
                        % (root / "tests" / "tools" / "stand-in-export"))
        shim.chmod(0o755)
        # The test Hub with the demo's repos; alice (hf_alice_write) is in my-org too, the
        # namespace the docs use.
        config = json.loads((root / "examples" / "demo-hub.json").read_text())
        for user in config["users"]:
            if user["name"] == "alice":
                user.setdefault("orgs", []).append("my-org")
        (work / "hub-config.json").write_text(json.dumps(config))
        self.hub_log = open(work / "hub.log", "w")
        self.hub = subprocess.Popen(
            [str(hub_server), "--data", str(work / "hub-data"), "--config",
             str(work / "hub-config.json"), "--ready-file", str(work / "hub.json")],
            stdout=self.hub_log, stderr=subprocess.STDOUT)
        for _ in range(100):
            if (work / "hub.json").exists() and (work / "hub.json").stat().st_size:
                break
            time.sleep(0.1)
        else:
            self.close()
            sys.exit("FAIL: the test Hub did not start: " + (work / "hub.log").read_text())
        self.endpoint = json.loads((work / "hub.json").read_text())["url"]
        self.release_source = self._release()
        handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(
            *a, directory=str(work / "releases"), **k)
        http.server.SimpleHTTPRequestHandler.log_message = lambda *a: None
        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.release_url = f"http://127.0.0.1:{self.http.server_address[1]}"

    def _release(self):
        """releases/v<version>/<tarball> and its .sha256: the release fixture's tarball when this
        build made one, else a small one holding the built tool (what the Install block uses)."""
        name = f"neuron-cache-{self.version}-linux-x86_64"
        folder = self.work / "releases" / f"v{self.version}"
        folder.mkdir(parents=True)
        made = self.build / "tests" / "release" / f"{name}.tar.gz"
        tarball = folder / f"{name}.tar.gz"
        if made.is_file():
            shutil.copyfile(made, tarball)  # a copy: the fixture may write a new one meanwhile
            source = f"the release fixture's {made}"
        else:
            stage = self.work / "stage" / name
            (stage / "bin").mkdir(parents=True)
            shutil.copy2(self.tool, stage / "bin" / "neuron-cache")
            with tarfile.open(tarball, "w:gz", compresslevel=1) as tar:
                tar.add(stage, arcname=name)
            source = "a tarball of the built tool (no release fixture in this build)"
        digest = subprocess.run(["sha256sum", tarball.name], cwd=folder, check=True,
                                capture_output=True, text=True).stdout
        (folder / f"{name}.tar.gz.sha256").write_text(digest)
        return source

    def close(self):
        if getattr(self, "http", None):
            self.http.shutdown()
        if self.hub.poll() is None:
            self.hub.terminate()
            try:
                self.hub.wait(5)
            except subprocess.TimeoutExpired:
                self.hub.kill()
                self.hub.wait()
        self.hub_log.close()

    def environment(self, page):
        home = page / "home"
        home.mkdir(parents=True, exist_ok=True)
        return {
            "PATH": f"{self.work / 'bin'}:{self.tool.parent}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(home),
            "TMPDIR": str(self.work / "tmp"),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "HF_ENDPOINT": self.endpoint,
            "HF_TOKEN": "hf_alice_write",
            "NEURON_COMPILE_CACHE_URL": str(page / "neuron-compile-cache"),
            "NEURON_CACHE_RETRY_BASE_MS": "10",
            "AWS_EC2_METADATA_DISABLED": "true",
            "STAND_IN_DELAY": "0",
        }

    def map(self, text):
        """The block as it runs here, and the mappings applied."""
        applied = []
        if RELEASE_URL in text:
            text = text.replace(RELEASE_URL, self.release_url)
            applied.append(f"{RELEASE_URL} -> the loopback release host ({self.release_source})")
        if re.search(r"(?m)(^|[;&|]\s*)sudo\s+", text):
            text = re.sub(r"(?m)(^|[;&|]\s*)sudo\s+", r"\1", text)
            applied.append("sudo -> (nothing: the test's own folders)")
        for folder in ("opt", "mnt"):
            pattern = re.compile(r"(?<![\w.~-])/" + folder + r"\b")
            if pattern.search(text):
                text = pattern.sub(str(self.work / folder), text)
                applied.append(f"/{folder} -> the sandbox's {folder}/")
        return text, applied


def run_shell(sandbox, block, cwd, env):
    script, applied = sandbox.map(block.text)
    for line in applied:
        print(f"    mapped: {line}")
    result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=BLOCK_TIMEOUT)
    if result.returncode != 0:
        return [f"exited {result.returncode}:\n{indent(script)}\n  output:\n{indent(result.stdout)}"]
    return []


def console_steps(text):
    """(command, expected lines) of each `$ ` line of a console block."""
    steps = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            if lines[i].strip():
                raise ValueError(f"output before the first `$ ` command: {lines[i]!r}")
            i += 1
            continue
        command = lines[i][2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1] + "\n" + lines[i]
        i += 1
        expected = []
        while i < len(lines) and not lines[i].startswith("$ "):
            expected.append(lines[i].rstrip())
            i += 1
        while expected and not expected[-1]:
            expected.pop()
        steps.append((command, expected))
    return steps


def matches(expected, actual):
    """Whether the actual lines are the expected ones, `...` standing for any lines."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(matches(expected[1:], actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and actual[0] == expected[0] and matches(expected[1:], actual[1:])


def run_console(sandbox, block, cwd, env):
    try:
        steps = console_steps(block.text)
    except ValueError as error:
        return [str(error)]
    for command, expected in steps:
        script, applied = sandbox.map(command)
        for line in applied:
            print(f"    mapped: {line}")
        result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                timeout=BLOCK_TIMEOUT)
        actual = [line.rstrip() for line in result.stdout.splitlines()]
        while actual and not actual[-1]:
            actual.pop()
        if result.returncode != 0:
            return [f"$ {command}\n  exited {result.returncode}:\n{indent(result.stdout)}"]
        if not matches(expected, actual):
            return [f"$ {command}\n  expected:\n{indent(chr(10).join(expected))}\n"
                    f"  got:\n{indent(result.stdout)}"]
    return []


def indent(text):
    return "\n".join("    | " + line for line in text.rstrip("\n").splitlines())


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    no_run = "--no-run" in sys.argv
    if len(args) != 2:
        sys.exit(__doc__)
    root, build = Path(args[0]).resolve(), Path(args[1]).resolve()
    files = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    started = time.monotonic()

    problems, parsed = [], {}
    for path in files:
        blocks, outside, fence_problems = parse(path)
        parsed[path] = blocks
        problems += [p.replace(str(root) + "/", "") for p in fence_problems]
        problems += check_links(root, path, outside)
        problems += check_issue_numbers(root, path)
        for block in blocks:
            marker = block.marker
            if marker and not (marker.startswith("skip,") or marker.startswith("file ")):
                problems.append(f"{block.where(root)}: unknown doc-test marker {marker!r} (skip, "
                                "REASON or file NAME)")
            if marker and marker.startswith("skip,") and not marker[5:].strip():
                problems.append(f"{block.where(root)}: a skip without a reason")
    readme_lines = len((root / "README.md").read_text().splitlines())
    if readme_lines > README_MAX_LINES:
        problems.append(f"README.md: {readme_lines} lines, more than {README_MAX_LINES}: move "
                        "reference material to docs/")
    print(f"{len(files)} files, README.md {readme_lines} lines; links, anchors and issue numbers "
          f"checked: {len(problems)} problems")
    for problem in problems:
        print("FAIL:", problem)
    if no_run:
        return 1 if problems else 0

    manifests = [b for b in parsed[root / "README.md"]
                 if b.marker == "file neuron-cache.yaml"]
    if not manifests:
        problems.append("README.md: no block marked <!-- doc-test: file neuron-cache.yaml --> "
                        "(the quick start's manifest)")
    work = Path(tempfile.mkdtemp(prefix="neuron-cache-doc-test."))
    ran, skipped, failed = 0, [], 0
    sandbox = None
    try:
        sandbox = Sandbox(root, build, work)
        for path in files:
            name = path.relative_to(root).as_posix()
            page = work / "pages" / name.replace("/", "_")
            cwd = page / "work"
            cwd.mkdir(parents=True)
            if manifests and path != root / "README.md":
                (cwd / "neuron-cache.yaml").write_text(manifests[0].text)
            env = sandbox.environment(page)
            for block in parsed[path]:
                if block.marker and block.marker.startswith("file "):
                    target = cwd / block.marker[5:].strip()
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(block.text)
                    continue
                if block.lang not in SHELL:
                    continue
                if block.marker and block.marker.startswith("skip,"):
                    skipped.append((block.where(root), block.marker[5:].strip()))
                    continue
                print(f"== {block.where(root)} ({block.lang})")
                began = time.monotonic()
                try:
                    runner = run_console if block.lang == "console" else run_shell
                    errors = runner(sandbox, block, cwd, env)
                except subprocess.TimeoutExpired:
                    errors = [f"did not finish within {BLOCK_TIMEOUT} s"]
                ran += 1
                if errors:
                    failed += 1
                    for error in errors:
                        problems.append(f"{block.where(root)}: {error}")
                        print(f"FAIL: {block.where(root)}: {error}")
                else:
                    print(f"    ok ({time.monotonic() - began:.1f} s)")
    finally:
        if sandbox:
            sandbox.close()
        if os.environ.get("KEEP_WORK"):
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    print(f"\n{ran} shell blocks run ({failed} failed), {len(skipped)} skipped:")
    for where, reason in skipped:
        print(f"  skipped {where}: {reason}")
    print(f"{time.monotonic() - started:.1f} s")
    if problems:
        print(f"\n{len(problems)} problems")
        return 1
    print("the documentation is true")
    return 0


if __name__ == "__main__":
    sys.exit(main())
