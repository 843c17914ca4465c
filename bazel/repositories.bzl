"""WORKSPACE macro for neuron-cache's compiled model artifacts.

```python
local_repository(name = "neuron_cache", path = "/path/to/neuron-cache")  # or http_archive
load("@neuron_cache//bazel:repositories.bzl", "neuron_cache_repositories")
neuron_cache_repositories(
    name = "neuron_models",
    manifest = "//:neuron-cache.yaml",
    configs = ["llama3-8b-chat"],
)
```
"""

load("//bazel:neuron_cache.bzl", "neuron_model_artifacts")

def neuron_cache_repositories(name = "neuron_models", manifest = "//:neuron-cache.yaml", **kwargs):
    """Declares `@<name>`, the artifacts of `manifest`'s configurations, unless it exists already.

    A repository of that name declared earlier in the WORKSPACE wins, so a project can override
    what a dependency declares.

    Args:
      name: the external repository's name.
      manifest: label of the manifest (`neuron-cache.yaml` or an inference-cache-config JSON file).
      **kwargs: the other attributes of `neuron_model_artifacts` (`configs`, `cache_repo`,
        `cache_dir`, `strict`, `offline`, `tool`, `tool_path`, `timeout`).
    """
    if native.existing_rule(name):
        return
    neuron_model_artifacts(name = name, manifest = manifest, **kwargs)
