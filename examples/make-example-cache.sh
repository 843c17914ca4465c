#!/usr/bin/env bash
# Lays out an example local Neuron cache exactly as libneuronxla and optimum-neuron write it:
# entries in every state, a legacy entry, a traced export, registry files with their alias.
# Usage: make-example-cache.sh CACHE_ROOT NEURON_CACHE_BINARY
set -euo pipefail
root=$1
tool=$2
here=$(cd "$(dirname "$0")" && pwd)
cc=neuronxcc-2.21.33363.0+82129205
old=neuronxcc-2.15.128.0+56dc5a86
optimum=0.4.6.dev4

entry() {  # entry DIR FILE=CONTENT...
  local dir="$root/$1"
  shift
  mkdir -p "$dir"
  for spec in "$@"; do printf '%s' "${spec#*=}" > "$dir/${spec%%=*}"; done
}

flags='["--model-type=transformer", "--auto-cast=none"]'
key=$("$tool" inspect --json --flags "$flags" | sed -n 's/.*"flags_key": "\(.*\)".*/\1/p')
entry "$cc/MODULE_9993940051196728623+$key" model.hlo_module.pb=hlo "compile_flags.json=$flags" \
  model.neff=NEFF-bytes-of-a-training-graph model.done=
entry "$cc/MODULE_26254ca2c7a3ba18d3e1+$key" model.hlo_module.pb=hlo "compile_flags.json=$flags" \
  "model.log=ERROR: neuronx-cc terminated abnormally"
entry "$cc/MODULE_56f0d314fda2b6e1e336+$key" model.hlo_module.pb=hlo model.hlo_module.pb.lock=
entry "$cc/MODULE_617f6939aa11bb22cc33+$key" model.hlo_module.pb=hlo
entry "$old/MODULE_198775565831884870+2c2d707e" model.hlo.pb=hlo \
  "compile_flags.txt=--model-type=transformer --auto-cast=none" model.neff=old-NEFF model.done=

# A decoder registry entry: primary file named by its hash in its arch-digest folder, plus the
# absolute symlink alias under <model_type>/<model_id>/.
registry="$root/$cc/0_REGISTRY/$optimum"
text=$("$tool" inspect --canonical "$here/data/llama-tiny.entry.json")
hash=$(printf '%s' "$text" | sha512sum | cut -c1-20)
digest=$("$tool" inspect --json "$here/data/llama-tiny.entry.json" |
  sed -n 's/.*"arch_digest": "\(.*\)".*/\1/p')
mkdir -p "$registry/$digest" "$registry/llama/llamafactory/tiny-random-Llama-3"
printf '%s' "$text" > "$registry/$digest/$hash.json"
ln -sfn "$registry/$digest/$hash.json" "$registry/llama/llamafactory/tiny-random-Llama-3/$hash.json"

# A traced encoder export: the folder is named after its registry entry hash, with no flags key.
traced=$("$tool" inspect --canonical "$here/data/bert-traced.entry.json" | sha512sum | cut -c1-20)
entry "$cc/MODULE_$traced" model.neuron=traced-bert 'config.json={"model_type": "bert"}'
