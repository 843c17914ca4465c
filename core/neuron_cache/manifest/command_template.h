// The compile command of a manifest: a template rendered into an argv vector, never a shell
// line, so a value from the manifest (a model id, a name) cannot split into several arguments or
// inject a command.
//
// Rendering is two steps, in this order:
// 1. The template is split into words on whitespace, with simple shell-like grouping: '...'
//    keeps everything up to the next ' literally, "..." keeps everything up to the next
//    unescaped " (inside it, \" and \\ are a quote and a backslash), and outside quotes a
//    backslash keeps the next character. Quotes are removed; '' or "" is an empty argument.
//    No other shell syntax exists: ; | & $ ` > < are ordinary characters.
// 2. In each word, placeholders are replaced by values: {model_id}, {revision} (the pipeline
//    passes the commit the revision resolved to; "main" when a configuration has none), {task},
//    {batch_size}, {sequence_length}, {num_cores}, {tensor_parallel_size} (the same value),
//    {precision}, {instance_type}, {name} and {output} (given by the caller). {{ and }} are a
//    literal { and
//    }. Placeholders are replaced inside quotes too; quoting only groups.
// Because words are split before values are put in, a value with spaces, quotes or ; stays
// inside the one argument its placeholder was in.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "neuron_cache/manifest/manifest.h"

namespace neuron_cache::manifest {

// Throws an input Error (without a position) when the template cannot be split, is empty, or
// has an unknown or unterminated placeholder or a lone }.
void check_command_template(std::string_view command);

// The argv of `command` for one configuration. Throws like check_command_template.
std::vector<std::string> render_command(std::string_view command,
                                        const Configuration& configuration,
                                        const std::string& output);

}  // namespace neuron_cache::manifest
