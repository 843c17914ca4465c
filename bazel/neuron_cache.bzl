"""Compiled AWS Neuron models as a Bazel external repository.

`neuron_model_artifacts` runs `neuron-cache prefetch` on a manifest (the declared model
configurations, see the project README) and turns the result into an external repository with one
`filegroup` per configuration. Nothing is compiled here: configurations the cache does not have
are reported (or fail the fetch with `strict = True`), and `neuron-cache ci` is what fills the
cache.

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
  `<configuration>/neuronxcc-<version>/MODULE_*/<files>` (symlinks into the local cache) and
  `<configuration>/neuron-cache-entry.json`. The folder holding the entry file is what a program
  takes as `NEURON_COMPILE_CACHE_URL`. Characters Bazel labels forbid (`:`) become `_`, and a name
  taken by another target gets a `_2`, `_3`... suffix (printed when it happens).
- `:<configuration>_entry` and the exported file `:<configuration>/neuron-cache-entry.json`: the
  artifact index entry (key, inputs, modules with sizes and sha256).
- `:all`: the files of every configuration. `:report.json`: the tool's JSON report.

A configuration the cache does not have gives an empty filegroup and a warning (or a failed fetch
with `strict = True`).

Credentials and settings come from the environment, never from attributes: the tool reads
`HF_TOKEN_PATH` (a file holding the token; recommended), `HF_HOME` (its `token` file), or
`HF_TOKEN`, and `HF_ENDPOINT`, `HF_HUB_OFFLINE`, `CUSTOM_CACHE_REPO`, `NEURON_COMPILE_CACHE_URL`,
`NEURON_CC_FLAGS`, `NEURON_CACHE_TOOL`. Pass them with `--repo_env=NAME=value`; a change of any
of them except `HF_TOKEN` refetches. `HF_TOKEN` is deliberately not watched: Bazel writes the values
of watched variables in clear into the output base (`external/@<name>.marker`). Note that Bazel
also logs its whole client environment in `java.log` under the output base, which is why a token
file is recommended over `HF_TOKEN` in Bazel's environment.

The repository is fetched again only when the manifest's content, an attribute, one of the variables
above or this file changes. A configuration that was missing at the last fetch stays empty until
then: `bazel sync --only=<name>` fetches again after the cache was filled.
"""

# Variables that change what the fetch produces; Bazel refetches when one of them changes. Their
# values are written in clear in the repository's marker file, so HF_TOKEN is not among them (the
# tool still sees it: repository rules get Bazel's whole client environment).
NEURON_CACHE_ENVIRON = [
    "CUSTOM_CACHE_REPO",
    "HF_ENDPOINT",
    "HF_HOME",
    "HF_HUB_OFFLINE",
    "HF_TOKEN_PATH",
    "NEURON_CACHE_TOOL",
    "NEURON_CC_FLAGS",
    "NEURON_COMPILE_CACHE_URL",
]

# The tool's exit code for usage and input errors (an unknown configuration, a bad manifest): a
# mistake in the declaration, never a cache problem, so it fails the fetch even without `strict`.
_EXIT_USAGE = 2

# Target names the generated BUILD file uses itself, and file names it cannot share with a folder.
_RESERVED = ["all", "report.json", "BUILD", "BUILD.bazel", "WORKSPACE", "WORKSPACE.bazel",
             "MODULE.bazel", "REPO.bazel", "_exports"]

_LABEL_SAFE = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-+@"

_EXPORTS = "_exports"
_ENTRY_FILE = "neuron-cache-entry.json"

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

def _find_tool(rctx):
    tool = rctx.os.environ.get("NEURON_CACHE_TOOL", "") or rctx.attr.tool
    if not tool:
        found = rctx.which("neuron-cache")
        if not found:
            fail("neuron-cache is not on PATH: install it, or give its path with the `tool` " +
                 "attribute or --repo_env=NEURON_CACHE_TOOL=/path/to/neuron-cache")
        return found
    if "/" not in tool:
        found = rctx.which(tool)
        if not found:
            fail("neuron_model_artifacts: `%s` is not on PATH" % tool)
        return found
    if not tool.startswith("/"):
        fail("neuron_model_artifacts: the tool must be an absolute path or a command on PATH, " +
             "not `%s`" % tool)
    path = rctx.path(tool)
    if not path.exists:
        fail("neuron_model_artifacts: the tool `%s` does not exist" % tool)
    return path

def _tool_message(result):
    text = (result.stderr or result.stdout).strip()
    return text if text else "(no output)"

# The report format this rule reads (core/report/report.schema.json in the tool's sources).
_REPORT_FORMAT = 1

def _decode_report(result, tool):
    text = result.stdout.strip()
    if not text.startswith("{"):
        return None
    report = json.decode(text)
    version = report.get("format_version")
    if version != _REPORT_FORMAT:
        fail(("%s writes JSON reports of format %s; this rule reads format %d: use the " +
              "neuron-cache of the same release as this rule (the `tool` attribute)") %
             (tool, version, _REPORT_FORMAT))
    return report

def _bzl_list(items, indent):
    if not items:
        return "[]"
    pad = " " * indent
    return "[\n" + "".join([pad + "    %s,\n" % repr(item) for item in items]) + pad + "]"

def _link_configuration(rctx, export_dir, folder):
    """Lays the exported configuration out as `<folder>/...`; returns its files, entry first."""
    entry_text = rctx.read(export_dir.get_child(_ENTRY_FILE))
    entry = json.decode(entry_text)
    rctx.file(folder + "/" + _ENTRY_FILE, entry_text, executable = False)
    files = [folder + "/" + _ENTRY_FILE]
    compiler_dir = "neuronxcc-" + entry["inputs"]["compiler"]["version"]
    for module in entry.get("modules", []):
        for record in module.get("files", []):
            relative = "%s/%s/%s" % (compiler_dir, module["name"], record["name"])
            exported = export_dir.get_child(compiler_dir).get_child(module["name"])
            exported = exported.get_child(record["name"])
            if not exported.exists:
                fail("neuron-cache exported %s without %s" % (export_dir, relative))

            # One hop to the file in the local cache (the export holds a symlink to it).
            rctx.symlink(exported.realpath, folder + "/" + relative)
            files.append(folder + "/" + relative)
    return files

def _neuron_model_artifacts_impl(rctx):
    tool = _find_tool(rctx)
    manifest = rctx.path(rctx.attr.manifest)  # through the label: Bazel tracks its content
    if rctx.attr.cache_dir and not rctx.attr.cache_dir.startswith("/"):
        fail("neuron_model_artifacts: cache_dir must be an absolute path, not `%s`" %
             rctx.attr.cache_dir)

    exports = rctx.path(_EXPORTS)
    args = [tool, "prefetch", str(manifest), "--export-dir", str(exports), "--json", "--quiet"]
    for config in rctx.attr.configs:
        args.extend(["--config", config])
    if rctx.attr.cache_repo:
        args.extend(["--repo", rctx.attr.cache_repo])
    if rctx.attr.cache_dir:
        args.extend(["--cache-dir", rctx.attr.cache_dir])
    if rctx.attr.strict:
        args.append("--strict")
    environment = {"HF_HUB_OFFLINE": "1"} if rctx.attr.offline else {}

    what = ", ".join(rctx.attr.configs) if rctx.attr.configs else "every configuration"
    rctx.report_progress("neuron-cache prefetch %s of %s" % (what, rctx.attr.manifest))
    result = rctx.execute(args, environment = environment, timeout = rctx.attr.timeout,
                          quiet = True)

    report = _decode_report(result, tool) if result.return_code == 0 else None
    if result.return_code == _EXIT_USAGE or (result.return_code != 0 and rctx.attr.strict):
        fail("neuron-cache prefetch failed (exit %d) for @%s:\n%s" %
             (result.return_code, rctx.name, _tool_message(result)))
    if result.return_code != 0:
        print("WARNING: neuron-cache prefetch failed (exit %d); every filegroup of @%s is empty:\n%s" %
              (result.return_code, rctx.name, _tool_message(result)))
    elif report == None:
        fail("neuron-cache prefetch printed no JSON report for @%s:\n%s" %
             (rctx.name, _tool_message(result)))
    elif result.stderr.strip():
        print("@%s: %s" % (rctx.name, result.stderr.strip()))

    if report != None:
        rctx.file("report.json", result.stdout, executable = False)
        configurations = report.get("configurations", [])
    else:
        configurations = [{"name": name, "export_dir": None} for name in rctx.attr.configs]

    taken = {name: True for name in _RESERVED}
    groups = []  # (target, files, entry or None)
    missing = []
    for item in configurations:
        name = item["name"]
        target = _unique(_sanitize(name), taken)
        if target != name:
            print("neuron-cache (@%s): configuration `%s` is the target :%s" % (rctx.name, name, target))
        entry_target = _unique(target + "_entry", taken)
        if item.get("export_dir"):
            files = _link_configuration(rctx, rctx.path(item["export_dir"]), target)
            groups.append((target, files, entry_target))
        else:
            groups.append((target, [], entry_target))
            missing.append("%s (%s)" % (name, item.get("reason") or item.get("status") or "not fetched"))

    if missing and rctx.attr.strict:
        fail("neuron-cache: not in the cache for @%s: %s" % (rctx.name, ", ".join(missing)))
    if missing and result.return_code == 0:
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
        doc = "The Hub cache repo, for example `my-org/neuron-cache`. Empty: " +
              "`CUSTOM_CACHE_REPO`, then the manifest's `cache_repo`, then the saved default.",
    ),
    "cache_dir": attr.string(
        doc = "The local Neuron compile cache the artifacts are downloaded into (an absolute " +
              "path). The repository's files are symlinks into it, so it must outlive the build. " +
              "Empty: `NEURON_COMPILE_CACHE_URL`, then `/var/tmp/neuron-compile-cache`.",
    ),
    "strict": attr.bool(
        default = False,
        doc = "Fail the fetch when a configuration is not in the cache or the Hub cannot be " +
              "used. By default such a configuration gets an empty filegroup and a warning.",
    ),
    "offline": attr.bool(
        default = False,
        doc = "Make no Hub request (`HF_HUB_OFFLINE=1`): only configurations already complete " +
              "in the local cache are available.",
    ),
    "tool": attr.string(
        doc = "The `neuron-cache` executable: an absolute path or a command on `PATH`. " +
              "`--repo_env=NEURON_CACHE_TOOL=...` overrides it. Empty: `neuron-cache` on `PATH`.",
    ),
    "timeout": attr.int(
        default = 3600,
        doc = "Seconds the prefetch may take before Bazel stops it.",
    ),
}

neuron_model_artifacts = repository_rule(
    implementation = _neuron_model_artifacts_impl,
    attrs = _ATTRS,
    environ = NEURON_CACHE_ENVIRON,
    doc = """Fetches the compiled artifacts (NEFF files) of declared model configurations from a
neuron-cache / optimum-neuron cache and exposes one `filegroup` per configuration.

Runs `neuron-cache prefetch MANIFEST --export-dir ... --json`: downloads what the Hub cache repo
has into the local Neuron compile cache (verified, atomic), and links each complete configuration
into this repository. The token is never an attribute: give the tool a token file with
`--repo_env=HF_TOKEN_PATH=/path/to/token` (or `HF_HOME`'s `token` file, or `HF_TOKEN` in Bazel's
environment).
""",
)

# The attributes, for the module extension's tag class.
NEURON_MODEL_ARTIFACTS_ATTRS = _ATTRS
