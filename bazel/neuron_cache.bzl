"""Compiled AWS Neuron models as a Bazel external repository, fetched by Bazel's own downloader.

`neuron_model_artifacts` asks `neuron-cache plan --json --files` which of a manifest's model
configurations (see the project README) are cached, locally or on the Hub, and the files of each
with their size and sha256; then it downloads every file with `repository_ctx.download`, as
`http_archive` does. So Bazel's repository cache (`--repository_cache`) applies, a second
workspace on the machine downloads nothing, and every file is checked against its sha256.
(`--distdir` applies too, but it matches by file name and most NEFFs are named `model.neff`.) No
`canonical_id`: the sha256 alone identifies a file, whichever URL (Hub or `file://`) gave it. Nothing is compiled here: configurations the cache does
not have are reported (or fail the fetch with `strict = True`), and `neuron-cache ci` is what fills
the cache.

Example (WORKSPACE):

```python
load("@neuron_cache//bazel:neuron_cache.bzl", "neuron_model_artifacts")

neuron_model_artifacts(
    name = "neuron_models",
    manifest = "//:neuron-cache.yaml",
    configs = ["llama3-8b-chat"],
)
```

Targets of the generated repository (`@neuron_models` above):

- `:<configuration>`: every file of the configuration, a small Neuron compile cache of its own:
  `<configuration>/neuronxcc-<version>/MODULE_*/<files>` (regular files of the external
  repository) and `<configuration>/neuron-cache-entry.json`. The folder holding the entry file is
  what a program takes as `NEURON_COMPILE_CACHE_URL`. Characters Bazel labels forbid (`:`) become
  `_`, and a name taken by another target gets a `_2`, `_3`... suffix (printed when it happens).
- `:<configuration>_entry` and the exported file `:<configuration>/neuron-cache-entry.json`: the
  artifact index entry (key, inputs, modules with sizes and sha256).
- `:all`: the files of every configuration. `:report.json`: the plan (`neuron-cache plan --json
  --files`).

A configuration the cache does not have gives an empty filegroup and a warning (or a failed fetch
with `strict = True`).

Where files come from: a MODULE_ folder complete in the local Neuron compile cache is copied from
it (`file://` URL); any other is downloaded from the Hub's resolve URL pinned at the commit the
plan read. Without a Hub token, only the tool's plan talks to the Hub API; it downloads no
artifact itself.

With a Hub token (a private cache repo), Bazel's downloader is never given it: that downloader
sends `auth` to the exact URLs it is given only, and the Hub answers a regular (non-LFS) file's
resolve URL with a redirect to another of its own URLs (`/api/resolve-cache/...`), which needs the
token as well. So a Hub file Bazel's repository cache lacks is fetched by the tool
(`neuron-cache prefetch`, which follows the Hub's redirects as huggingface_hub does and sends the
token to the Hub only, never to its CDN) into the local Neuron compile cache, then copied from
there with its sha256 into the repository cache. What the repository cache holds is taken from
it first, with or without a token. The rule reads the token's place like the tool does
(`HF_TOKEN` or `HUGGING_FACE_HUB_TOKEN`, else the file `HF_TOKEN_PATH` names (recommended), else
`token` in `HF_HOME`, default `$XDG_CACHE_HOME/huggingface`, `~/.cache/huggingface`) only to know
whether there is one; tests/frontends/bazel-test.sh checks both ways on the loopback Hub.

Settings come from the environment: `HF_TOKEN_PATH`, `HF_HOME`, `HF_ENDPOINT`, `HF_HUB_OFFLINE`,
`CUSTOM_CACHE_REPO`, `NEURON_COMPILE_CACHE_URL`, `NEURON_CC_FLAGS`, `NEURON_CACHE_TOOL`, and for an
S3 store `AWS_PROFILE`, `AWS_REGION`, `AWS_DEFAULT_REGION`, `AWS_CONFIG_FILE`,
`AWS_SHARED_CREDENTIALS_FILE`, `AWS_ENDPOINT_URL` (and its `_S3`, `_STS`, `_SSO` forms),
`AWS_ROLE_ARN`, `AWS_WEB_IDENTITY_TOKEN_FILE`, `AWS_NO_SIGN_REQUEST`, `AWS_EC2_METADATA_DISABLED`.
Pass them with `--repo_env=NAME=value`; a change of any of them refetches (AWS keys and tokens are
read but not watched, like `HF_TOKEN`). `HF_TOKEN` is deliberately not
watched: Bazel writes the values of watched variables in clear into the output base
(`external/@<name>.marker`). Bazel also logs its whole client environment in `java.log` under the
output base, which is why a token file is recommended over `HF_TOKEN` in Bazel's environment.

The repository is fetched again only when the manifest's content, an attribute, the tool (a
`tool` label), one of the variables above or this file changes. A configuration that was missing
at the last fetch stays empty until then: `bazel sync --only=<name>` fetches again after the cache
was filled; what the repository cache holds is not downloaded again.
"""

# Variables that change what the fetch produces; Bazel refetches when one of them changes. Their
# values are written in clear in the repository's marker file, so HF_TOKEN is not among them (the
# tool and this rule still see it: repository rules get Bazel's whole client environment).
NEURON_CACHE_ENVIRON = [
    "CUSTOM_CACHE_REPO",
    "HF_ENDPOINT",
    "HF_HOME",
    "HF_HUB_OFFLINE",
    "NEURON_CACHE_OFFLINE",
    "HF_TOKEN_PATH",
    "NEURON_CACHE_TOOL",
    "NEURON_CC_FLAGS",
    "NEURON_COMPILE_CACHE_URL",
    # An S3 store's credentials source, region and endpoints (never a key or a token: those are
    # secrets, and the source's choice is what changes the result).
    "AWS_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL_STS",
    "AWS_ENDPOINT_URL_SSO",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_NO_SIGN_REQUEST",
    "AWS_EC2_METADATA_DISABLED",
]

# The tool's exit code for usage and input errors (an unknown configuration, a bad manifest): a
# mistake in the declaration, never a cache problem, so it fails the fetch even without `strict`.
_EXIT_USAGE = 2

# The tool words its advice for a Bazel user (a token file through --repo_env, say).
_FRONT_END = {"NEURON_CACHE_FRONT_END": "bazel"}

_DEFAULT_ENDPOINT = "https://huggingface.co"

# Target names the generated BUILD file uses itself, and file names it cannot share with a folder.
_RESERVED = ["all", "report.json", "BUILD", "BUILD.bazel", "WORKSPACE", "WORKSPACE.bazel",
             "MODULE.bazel", "REPO.bazel"]

_LABEL_SAFE = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-+@"

_ENTRY_FILE = "neuron-cache-entry.json"
_EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

def _sanitize(name):
    """Replaces the characters a Bazel target name forbids (of the manifest's `:`) with `_`."""
    return "".join([c if c in _LABEL_SAFE else "_" for c in name.elems()])

def _unique(name, taken):
    candidate = name
    suffix = 2
    for _ in range(1000):
        if candidate not in taken:
            break
        candidate = "%s_%d" % (name, suffix)
        suffix += 1
    taken[candidate] = True
    return candidate

def _locate_tool(rctx):
    """The tool's path and how it was chosen: NEURON_CACHE_TOOL, `tool`, `tool_path`, PATH."""
    from_env = rctx.os.environ.get("NEURON_CACHE_TOOL", "")
    if rctx.attr.tool and not from_env:
        return rctx.path(rctx.attr.tool), "the `tool` label %s" % rctx.attr.tool
    name = from_env or rctx.attr.tool_path
    origin = "NEURON_CACHE_TOOL" if from_env else "the `tool_path` attribute"
    if not name:
        found = rctx.which("neuron-cache")
        if not found:
            fail("neuron-cache is not on PATH: install it, or give it with the `tool` attribute " +
                 "(a label), `tool_path` or --repo_env=NEURON_CACHE_TOOL=/path/to/neuron-cache")
        return found, "PATH"
    if "/" not in name:
        found = rctx.which(name)
        if not found:
            fail("neuron_model_artifacts: `%s` (from %s) is not on PATH" % (name, origin))
        return found, origin
    if not name.startswith("/"):
        fail("neuron_model_artifacts: the tool must be an absolute path or a command on PATH, " +
             "not `%s` (from %s)" % (name, origin))
    return rctx.path(name), origin

def _check_tool(rctx):
    """Finds the tool and checks it runs and says it is neuron-cache; returns its path."""
    tool, origin = _locate_tool(rctx)
    if not tool.exists:
        fail("neuron_model_artifacts: the tool %s (from %s) does not exist" % (tool, origin))
    result = rctx.execute([tool, "--version"], timeout = 60, quiet = True)
    answer = result.stdout.strip()
    if result.return_code != 0 or not answer.startswith("neuron-cache "):
        fail(("neuron_model_artifacts: %s (from %s) is not neuron-cache: `--version` exited %d " +
              "and printed `%s`. Give the neuron-cache executable (the `tool` attribute).") %
             (tool, origin, result.return_code, (answer or result.stderr.strip())[:200]))
    return tool

def _is_progress_line(line):
    """The tool's progress lines (`--progress`): its own lines that are neither a warning nor an
    error ("neuron-cache: fetching ...") and transfer lines ("Downloading: 1.0 MiB of ...",
    "Downloading done: ...")."""
    if line.startswith("neuron-cache: "):
        return not (line.startswith("neuron-cache: warning: ") or
                    line.startswith("neuron-cache: error: "))
    word, colon, rest = line.partition(": ")
    word = word.removesuffix(" done")
    return bool(colon) and word.isalpha() and word[:1].isupper() and rest[:1].isdigit()

def _tool_message(result):
    """The tool's warnings and errors; its progress lines were shown as they came."""
    lines = [line for line in (result.stderr or result.stdout).strip().split("\n")
             if not _is_progress_line(line)]
    text = "\n".join(lines).strip()
    return text if text else "(no output)"

# The report format this rule reads (core/neuron_cache/report/report.schema.json in the tool's sources).
_REPORT_FORMAT = 2

# Format 1 said "hub" where format 2 says "store" (a row cached in the store): both are read.
_REPORT_FORMATS = [1, 2]

def _decode_report(result, tool):
    text = result.stdout.strip()
    if not text.startswith("{"):
        return None
    report = json.decode(text)
    version = report.get("format_version")
    if version not in _REPORT_FORMATS:
        fail(("%s writes JSON reports of format %s; this rule reads format %d: use the " +
              "neuron-cache of the same release as this rule (the `tool` attribute)") %
             (tool, version, _REPORT_FORMAT))
    for row in report.get("configurations", []):
        if row.get("status") in ["local", "store", "hub"] and "files" not in row:
            fail(("%s lists no files of %s (`plan --files`): use the neuron-cache of the same " +
                  "release as this rule (the `tool` attribute)") % (tool, row.get("name")))
    return report

def _has_hf_token(rctx):
    """Whether the tool has a Hub token, from where it reads one (config/settings.cpp). The token
    is never kept nor passed on: the tool reads it again."""
    env = rctx.os.environ
    for name in ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"]:
        if env.get(name, "").strip():
            return True
    path = env.get("HF_TOKEN_PATH", "")
    if not path:
        home = env.get("HF_HOME", "")
        if not home:
            cache = env.get("XDG_CACHE_HOME", "") or env.get("HOME", "") + "/.cache"
            home = cache + "/huggingface"
        path = home + "/token"
    if not path.startswith("/") or not rctx.path(path).exists:
        return False
    return rctx.read(rctx.path(path)).strip() != ""

def _hub_endpoint(rctx):
    endpoint = rctx.os.environ.get("HF_ENDPOINT", "") or _DEFAULT_ENDPOINT
    for _ in range(len(endpoint)):
        if not endpoint.endswith("/"):
            break
        endpoint = endpoint[:-1]
    return endpoint

def _safe_path(path):
    """Whether a listed path stays inside its folder (the tool checks names; this rule too)."""
    parts = path.split("/")
    return (len(parts) >= 3 and "\\" not in path and
            not [p for p in parts if p in ["", ".", ".."]] and
            parts[0].startswith("neuronxcc-") and parts[1].startswith("MODULE_"))

def _in_repository_cache(rctx, output, sha256):
    """Whether Bazel's repository cache holds this content (then it is now at `output`): a
    download without a URL only looks there, and prints nothing when it is not."""
    return rctx.download(url = [], output = output, sha256 = sha256, allow_fail = True).success

def _download_configuration(rctx, row, folder, through_tool):
    """Lays the configuration out as `<folder>/...`; returns (its files, entry first; or None,
    why not; the Hub files left to the tool as (record, output)). With `through_tool` (a Hub
    token), Hub files the repository cache lacks are left to the tool: Bazel's downloader sends
    `auth` to the exact URLs it is given only, and the Hub answers a regular file's resolve with a
    redirect to another URL of its own, which needs the token too."""
    rctx.file(folder + "/" + _ENTRY_FILE, row["entry"], executable = False)
    files = [folder + "/" + _ENTRY_FILE]
    pending = []
    for record in row["files"]:
        path = record["path"]
        if not _safe_path(path):
            fail("neuron-cache listed the unsafe path `%s` for %s" % (path, row["name"]))
        output = folder + "/" + path
        files.append(output)
        if record["size"] == 0 and record["sha256"] == _EMPTY_SHA256:
            rctx.file(output, "", executable = False)  # a marker such as model.done
            continue
        if through_tool and record.get("source") == "hub":
            if not _in_repository_cache(rctx, output, record["sha256"]):
                pending.append((record, output))
            continue
        if "url" not in record:
            return None, "%s was not fetched from %s (see the prefetch warning above)" % (
                path, record.get("source", "the store")), []
        result = rctx.download(
            url = [record["url"]] + record.get("fallback_urls", []),
            output = output,
            sha256 = record["sha256"],
            allow_fail = not rctx.attr.strict,  # strict: Bazel's own error fails the fetch
        )
        if not result.success:
            return None, "downloading %s failed: see Bazel's warning above" % path, []
    return files, None, pending

# Where the tool links the files it fetched for this rule (`prefetch --export-dir`), inside the
# repository being made and removed before it is done.
_EXPORT_DIR = "_neuron_cache_fetched"

def _run_showing_progress(rctx, args):
    """Runs a prefetch with its stderr on the terminal as it comes (`quiet = False`): a download
    of hundreds of MiB is not a silent minute. Its stdout is empty (`--quiet`, no `--json`)."""
    return rctx.execute(args, environment = _FRONT_END, timeout = rctx.attr.timeout,
                        quiet = False)

def _fetch_through_tool(rctx, names, problems, pending):
    """Has the tool fetch the configurations `names` (their Hub files the repository cache
    lacks) into the local cache, then copies each pending file from there by its sha256, so the
    repository cache holds it from now on. Records a configuration's problem in `problems`."""
    tool = _check_tool(rctx)
    export = rctx.path(_EXPORT_DIR)
    args = _tool_args(rctx, tool, "prefetch", names) + ["--export-dir", str(export)]
    if rctx.attr.lockfile:
        args.extend(["--locked", "--lockfile", str(rctx.path(rctx.attr.lockfile))])
    rctx.report_progress("neuron-cache prefetch of %d configurations from the Hub" % len(names))
    result = _run_showing_progress(rctx, args)
    if result.return_code != 0 and (rctx.attr.strict or result.return_code == _EXIT_USAGE):
        fail("neuron-cache prefetch failed (exit %d) for @%s:\n%s" %
             (result.return_code, rctx.name, _tool_message(result)))
    for name, record, output in pending:
        if name in problems:
            continue
        source = rctx.path("%s/%s/%s" % (export, name, record["path"]))
        if not source.exists:
            problems[name] = "neuron-cache prefetch did not fetch %s (exit %d): %s" % (
                record["path"], result.return_code, _tool_message(result))
            continue
        copied = rctx.download(url = [_file_url(source)], output = output,
                               sha256 = record["sha256"], allow_fail = not rctx.attr.strict)
        if not copied.success:
            problems[name] = "copying %s failed: see Bazel's warning above" % record["path"]
    rctx.delete(export)

def _file_url(path):
    return "file://" + _url_encode(str(path), True)

def _bzl_list(items, indent):
    if not items:
        return "[]"
    pad = " " * indent
    return "[\n" + "".join([pad + "    %s,\n" % repr(item) for item in items]) + pad + "]"

def _tool_args(rctx, tool, command, configs = None):
    """`neuron-cache COMMAND MANIFEST --quiet` with the rule's selection (or `configs`) and
    stores: `plan` with `--json` (the rule reads its report), `prefetch` with `--progress` (its
    transfer lines are shown as they come: see _run_showing_progress)."""
    manifest = rctx.path(rctx.attr.manifest)  # through the label: Bazel tracks its content
    if rctx.attr.cache_dir and not rctx.attr.cache_dir.startswith("/"):
        fail("neuron_model_artifacts: cache_dir must be an absolute path, not `%s`" %
             rctx.attr.cache_dir)
    shown = "--progress" if command == "prefetch" else "--json"
    args = [tool, command, str(manifest), shown, "--quiet"]
    for config in (rctx.attr.configs if configs == None else configs):
        args.extend(["--config", config])
    if rctx.attr.cache_repo and not rctx.attr.lockfile:  # a lock names its store
        args.extend(["--repo", rctx.attr.cache_repo])
    if rctx.attr.cache_dir:
        args.extend(["--cache-dir", rctx.attr.cache_dir])
    if rctx.attr.strict:
        args.append("--strict")
    for key in rctx.attr.trusted_keys:
        args.extend(["--trusted-key", key])
    if rctx.attr.require_signatures:
        args.append("--require-signatures")
    return args

def _needs_prefetch(report):
    """Whether a cached file has no URL a plain downloader can read (an S3 store: its requests
    must be signed), so the tool must fetch it into the local cache first."""
    for row in report.get("configurations", []):
        for record in row.get("files", []):
            if "url" not in record:
                return True
    return False

def _run_plan(rctx, tool):
    """Runs `neuron-cache plan --json --files`; returns (its result, the report or None)."""
    args = _tool_args(rctx, tool, "plan") + ["--files"]
    environment = dict(_FRONT_END)
    if rctx.attr.offline:
        environment["NEURON_CACHE_OFFLINE"] = "1"

    what = ", ".join(rctx.attr.configs) if rctx.attr.configs else "every configuration"
    rctx.report_progress("neuron-cache plan %s of %s" % (what, rctx.attr.manifest))
    result = rctx.execute(args, environment = environment, timeout = rctx.attr.timeout,
                          quiet = True)

    report = _decode_report(result, tool) if result.return_code == 0 else None
    if result.return_code == _EXIT_USAGE or (result.return_code != 0 and rctx.attr.strict):
        fail("neuron-cache plan failed (exit %d) for @%s:\n%s" %
             (result.return_code, rctx.name, _tool_message(result)))
    if result.return_code != 0:
        print("WARNING: neuron-cache plan failed (exit %d); every filegroup of @%s is empty:\n%s" %
              (result.return_code, rctx.name, _tool_message(result)))
    elif report == None:
        fail("neuron-cache plan printed no JSON report for @%s:\n%s" %
             (rctx.name, _tool_message(result)))
    elif result.stderr.strip():
        print("@%s: %s" % (rctx.name, result.stderr.strip()))
    return result, report

def _prefetch(rctx, tool):
    """`neuron-cache prefetch`: the tool downloads (signed, verified) into the local cache."""
    rctx.report_progress("neuron-cache prefetch from a store without plain URLs")
    result = _run_showing_progress(rctx, _tool_args(rctx, tool, "prefetch"))
    if result.return_code != 0:
        message = "neuron-cache prefetch failed (exit %d) for @%s:\n%s" % (
            result.return_code, rctx.name, _tool_message(result))
        if rctx.attr.strict:
            fail(message)
        print("WARNING: " + message)

# The lockfile format this rule reads (core/neuron_cache/format/lockfile.h in the tool's sources).
_LOCK_FORMAT = 1

# Printable ASCII from 0x20, in order: a character's index here is its code minus 0x20 (Starlark
# has no ord()).
_ASCII = " !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~"
_HEX = "0123456789ABCDEF"
_URL_SAFE = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~"

def _url_encode(text, keep_slash):
    """Percent-encodes as the tool does (format/url.cpp); fails on a non-ASCII character."""
    out = []
    for c in text.elems():
        if c in _URL_SAFE or (keep_slash and c == "/"):
            out.append(c)
            continue
        code = _ASCII.find(c)
        if code < 0:
            fail("neuron_model_artifacts: the lockfile names `%s`, which has a character this " % text +
                 "rule cannot put in a URL")
        code += 0x20
        out.append("%" + _HEX[code // 16] + _HEX[code % 16])
    return "".join(out)

def _locked_urls(rctx, lock, path):
    """Where a plain downloader reads a locked file: the Hub's resolve URL at the locked commit,
    then at main (a squashed history forgets the locked commit; the sha256 still decides), or a
    shared folder's file:// URL; an S3 store has none (its requests must be signed)."""
    store = lock["store"]
    if store.startswith("hf://"):
        return ["%s/%s/resolve/%s/%s" % (_hub_endpoint(rctx), store[len("hf://"):],
                                         _url_encode(revision, False), _url_encode(path, True))
                for revision in [lock["revision"], "main"]]
    if store.startswith("file://"):
        return ["file://" + _url_encode(store[len("file://"):] + "/" + path, True)]
    fail(("neuron_model_artifacts: %s was locked against %s, which gives no plain URL: lock a Hub " +
          "repo or a shared folder (a mirror) for Bazel") % (rctx.attr.lockfile, store))

def _rows_from_lock(rctx):
    """The configurations of the lockfile as the plan's rows (name, entry text, files with URLs):
    no tool run, no store read. Fails on another format or a configuration the lock lacks."""
    lock = json.decode(rctx.read(rctx.path(rctx.attr.lockfile)))
    if lock.get("format_version") != _LOCK_FORMAT:
        fail("neuron_model_artifacts: %s is a lockfile of format %s; this rule reads format %d" %
             (rctx.attr.lockfile, lock.get("format_version"), _LOCK_FORMAT))
    by_name = {item["name"]: item for item in lock["configurations"]}
    names = rctx.attr.configs or [item["name"] for item in lock["configurations"]]
    rows = []
    for name in names:
        if name not in by_name:
            fail("neuron_model_artifacts: %s does not lock `%s`: run `neuron-cache lock`" %
                 (rctx.attr.lockfile, name))
        entry = by_name[name]["entry"]
        folder = "neuronxcc-" + entry["inputs"]["compiler"]["version"]
        files = []
        for module in entry["modules"]:
            for record in module["files"]:
                path = folder + "/" + module["name"] + "/" + record["name"]
                urls = _locked_urls(rctx, lock, path)
                files.append({"path": path, "size": record["size"], "sha256": record["sha256"],
                              "source": "hub" if lock["store"].startswith("hf://") else "folder",
                              "url": urls[0], "fallback_urls": urls[1:]})
        rows.append({"name": name, "entry": json.encode_indent(entry, indent = "  "),
                     "files": files})
    return rows

def _neuron_model_artifacts_impl(rctx):
    if rctx.attr.lockfile:
        # Every download is known from the lockfile with its sha256: Bazel's repository cache
        # serves a fetch again with the store down, and no tool runs unless a Hub token has it
        # fetch what the repository cache lacks.
        rows = _rows_from_lock(rctx)
        _generate(rctx, rows, None, None)
        return
    tool = _check_tool(rctx)
    result, report = _run_plan(rctx, tool)
    if report != None and _needs_prefetch(report):
        # Then every file it fetched is complete locally: the second plan gives file:// URLs.
        _prefetch(rctx, tool)
        result, report = _run_plan(rctx, tool)
    if report != None:
        rctx.file("report.json", result.stdout, executable = False)
        configurations = report.get("configurations", [])
    else:
        configurations = [{"name": name} for name in rctx.attr.configs]
    _generate(rctx, configurations, result, report)

def _generate(rctx, configurations, result, report):
    """Downloads every configuration's files and writes the BUILD file; `result` and `report`
    are the plan's (None with a lockfile)."""
    through_tool = _has_hf_token(rctx)
    taken = {name: True for name in _RESERVED}
    groups = []  # (name, target, files, entry target)
    problems = {}  # name -> why its filegroup is empty
    pending = []  # (name, record, output): Hub files left to the tool
    for item in configurations:
        name = item["name"]
        target = _unique(_sanitize(name), taken)
        if target != name:
            print("neuron-cache (@%s): configuration `%s` is the target :%s" % (rctx.name, name, target))
        entry_target = _unique(target + "_entry", taken)
        files, problem, left = [], None, []
        if "files" in item:
            rctx.report_progress("downloading %d files of %s" % (len(item["files"]), name))
            files, problem, left = _download_configuration(rctx, item, target, through_tool)
        else:
            problem = item.get("reason") or item.get("status") or "not fetched"
        if problem:
            problems[name] = problem
        pending += [(name, record, output) for (record, output) in left]
        groups.append((name, target, files or [], entry_target))
    if pending:
        names = {name: True for (name, _, _) in pending}.keys()
        _fetch_through_tool(rctx, names, problems, pending)
    groups = [(target, [] if name in problems else files, entry_target)
              for (name, target, files, entry_target) in groups]
    missing = ["%s (%s)" % (name, problems[name]) for name in problems]

    if missing and rctx.attr.strict:
        fail("neuron-cache: not in the cache for @%s: %s" % (rctx.name, ", ".join(missing)))
    if missing and (result == None or result.return_code == 0):
        print(("WARNING: neuron-cache: not in the cache, so their filegroups in @%s are empty: %s. " +
               "Fill the cache (neuron-cache ci), then `bazel sync --only=%s`.") %
              (rctx.name, "; ".join(missing), rctx.name))

    lines = [
        "# Generated by neuron_model_artifacts (neuron_cache.bzl) from %s. Do not edit." %
        rctx.attr.manifest,
        'package(default_visibility = ["//visibility:public"])',
        "",
    ]
    exported = ["report.json"] if report != None else []
    exported += [files[0] for (_, files, _) in groups if files]
    lines.append("exports_files(%s)" % _bzl_list(exported, 0))
    for (target, files, entry_target) in groups:
        lines.append("")
        lines.append("filegroup(\n    name = %s,\n    srcs = %s,\n)" %
                     (repr(target), _bzl_list(files, 4)))
        lines.append("filegroup(\n    name = %s,\n    srcs = %s,\n)" %
                     (repr(entry_target), _bzl_list(files[:1], 4)))
    lines.append("")
    lines.append("filegroup(\n    name = \"all\",\n    srcs = %s,\n)" %
                 _bzl_list([":" + target for (target, _, _) in groups], 4))
    rctx.file("BUILD.bazel", "\n".join(lines) + "\n", executable = False)
    rctx.file("WORKSPACE", "workspace(name = %s)\n" % repr(rctx.name), executable = False)

_ATTRS = {
    "manifest": attr.label(
        mandatory = True,
        allow_single_file = True,
        doc = "The manifest declaring the model configurations: a `neuron-cache.yaml`, or an " +
              "optimum-neuron `inference-cache-config` JSON file. Read through its label, so " +
              "editing it fetches the repository again.",
    ),
    "configs": attr.string_list(
        doc = "The configurations to fetch, by name. Empty: every configuration of the manifest.",
    ),
    "cache_repo": attr.string(
        doc = "The cache store: a Hub repo such as `my-org/neuron-cache`, `s3://bucket/prefix` " +
              "(credentials from the `AWS_*` environment or `~/.aws`; the tool downloads into " +
              "`cache_dir` first, as S3 gives no plain URL) or `file:///shared/folder`. Empty: " +
              "`CUSTOM_CACHE_REPO`, then the manifest's `cache_repo`, then the saved default.",
    ),
    "cache_dir": attr.string(
        doc = "The local Neuron compile cache (an absolute path) whose complete MODULE_ folders " +
              "are copied instead of downloaded; it is only read. Empty: " +
              "`NEURON_COMPILE_CACHE_URL`, then `/var/tmp/neuron-compile-cache`.",
    ),
    "strict": attr.bool(
        default = False,
        doc = "Fail the fetch when a configuration is not in the cache, a download fails or the " +
              "Hub cannot be used. By default such a configuration gets an empty filegroup and " +
              "a warning.",
    ),
    "offline": attr.bool(
        default = False,
        doc = "Ask no store anything (`NEURON_CACHE_OFFLINE=1` for the plan): only configurations " +
              "complete in the local cache are available (or already in Bazel's repository " +
              "cache once planned).",
    ),
    "trusted_keys": attr.string_list(
        doc = "Public keys (`NAME:<base64>`, `neuron-cache key public`) whose signatures make a " +
              "cache entry trusted; replaces the manifest's `trusted_keys`. An entry a trusted " +
              "key signed over other bytes is never fetched.",
    ),
    "require_signatures": attr.bool(
        default = False,
        doc = "Fetch only cache entries a trusted key signed (the manifest's " +
              "`require_signatures: true` does too); the others are reported missing with the " +
              "reason. With `lockfile`, the lock is the anchor: `neuron-cache lock` refused " +
              "untrusted entries when it was written, and each file's sha256 decides.",
    ),
    "lockfile": attr.label(
        allow_single_file = True,
        doc = "A `neuron-cache.lock` (`neuron-cache lock MANIFEST`): the exact files to fetch, " +
              "each with its sha256. Then no store is asked what it holds and, without a Hub " +
              "token, no tool runs: every file is a `repository_ctx.download` from the locked " +
              "Hub commit, then from " +
              "main if the commit is gone (`gc --squash`; the sha256 still decides), or from " +
              "the locked shared folder, so Bazel's repository cache serves a fetch again with the " +
              "Hub down. With a Hub token, the files the repository cache lacks are fetched by " +
              "`neuron-cache prefetch --locked` and copied from the local cache. " +
              "The lock of an S3 store is refused (no plain URL). `manifest` stays " +
              "mandatory; keep the lock in step with it (`neuron-cache lock --check` in CI).",
    ),
    "tool": attr.label(
        allow_single_file = True,
        doc = "The `neuron-cache` executable as a label (a file of this workspace or of another " +
              "repository, such as a downloaded release): Bazel refetches when it changes. " +
              "`--repo_env=NEURON_CACHE_TOOL=...` overrides it. Empty: `tool_path`.",
    ),
    "tool_path": attr.string(
        doc = "The `neuron-cache` executable: an absolute path or a command on `PATH`, used when " +
              "`tool` is empty. Empty: `neuron-cache` on `PATH`. Whichever is used must answer " +
              "`--version` as neuron-cache and write the report format this rule reads.",
    ),
    "timeout": attr.int(
        default = 3600,
        doc = "Seconds the plan may take before Bazel stops it.",
    ),
}

neuron_model_artifacts = repository_rule(
    implementation = _neuron_model_artifacts_impl,
    attrs = _ATTRS,
    environ = NEURON_CACHE_ENVIRON,
    doc = """Fetches the compiled artifacts (NEFF files) of declared model configurations from a
neuron-cache / optimum-neuron cache and exposes one `filegroup` per configuration.

Runs `neuron-cache plan MANIFEST --json --files` (which reads the Hub's index, downloads nothing),
then `repository_ctx.download(url, output, sha256)` for each file of each cached configuration:
the files are regular files of this repository, verified by Bazel, kept in Bazel's repository
cache (shared by every workspace that uses the same `--repository_cache`). The token is never an
attribute: give a token file with `--repo_env=HF_TOKEN_PATH=/path/to/token` (or `HF_HOME`'s
`token` file, or `HF_TOKEN` in Bazel's environment). With a token, the Hub files the repository
cache lacks are fetched by the tool (`neuron-cache prefetch`) and copied from the local cache, as
Bazel's downloader would not carry the token across the Hub's redirects.
""",
)

# The attributes, for the module extension's tag class.
NEURON_MODEL_ARTIFACTS_ATTRS = _ATTRS
