"""Bzlmod module extension for neuron-cache's compiled model artifacts (Bazel >= 6).

UNTESTED: the tests run Debian's Bazel 4.2, which has no Bzlmod. Kept minimal on purpose: each
tag declares one `neuron_model_artifacts` repository, nothing more.

MODULE.bazel:

```python
bazel_dep(name = "neuron_cache", version = "0.1.0")
# Not in the Bazel Central Registry: use local_path_override, git_override or archive_override.
git_override(module_name = "neuron_cache", remote = "https://github.com/...", commit = "...")

neuron_cache = use_extension("@neuron_cache//bazel:extensions.bzl", "neuron_cache")
neuron_cache.artifacts(
    name = "neuron_models",
    manifest = "//:neuron-cache.yaml",
    configs = ["llama3-8b-chat"],
)
use_repo(neuron_cache, "neuron_models")
```

Each `artifacts` tag declares one `neuron_model_artifacts` repository with the same attributes. A
name may be declared once across all modules.
"""

load("//bazel:neuron_cache.bzl", "NEURON_MODEL_ARTIFACTS_ATTRS", "neuron_model_artifacts")

_ARTIFACTS_ATTRS = dict(NEURON_MODEL_ARTIFACTS_ATTRS)
_ARTIFACTS_ATTRS["name"] = attr.string(
    mandatory = True,
    doc = "The repository's name, to bring into scope with `use_repo`.",
)

_artifacts = tag_class(
    attrs = _ARTIFACTS_ATTRS,
    doc = "The compiled artifacts of a manifest's configurations, as the repository `name` " +
          "(see `neuron_model_artifacts` in neuron_cache.bzl for the attributes).",
)

def _neuron_cache_impl(module_ctx):
    declared = {}
    for module in module_ctx.modules:
        for tag in module.tags.artifacts:
            if tag.name in declared:
                fail("neuron_cache.artifacts: `%s` is declared by %s and by %s" %
                     (tag.name, declared[tag.name], module.name))
            declared[tag.name] = module.name
            neuron_model_artifacts(
                name = tag.name,
                manifest = tag.manifest,
                configs = tag.configs,
                cache_repo = tag.cache_repo,
                cache_dir = tag.cache_dir,
                strict = tag.strict,
                offline = tag.offline,
                tool = tag.tool,
                tool_path = tag.tool_path,
                timeout = tag.timeout,
            )

neuron_cache = module_extension(
    implementation = _neuron_cache_impl,
    tag_classes = {"artifacts": _artifacts},
    doc = "Declares `neuron_model_artifacts` repositories from `artifacts` tags.",
)
