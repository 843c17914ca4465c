// The grammar of the names users give that end up in Hub URLs, cache keys, folder names and
// command lines: Hub repo ids, version strings, model types and tasks. Each rule lives here once;
// the manifest reader, the settings and the Hub client all check with these functions.
//
//   repo id:  "namespace/name" or a bare "name" (legacy canonical models). Each part has only
//             letters, digits, '.', '_' and '-', neither starts nor ends with '.' or '-', has no
//             "--" or "..", and is at most 96 characters; the name does not end in ".git".
//             (huggingface_hub's validate_repo_id.)
//   version:  a digit, then letters, digits, '.', '+', '_' and '-'; at most 100 characters
//             ("2.21.33363.0+82129205", "0.4.6.dev4").
//   revision: a branch, tag or commit: printable ASCII without space or ~^:?*[\{}, not starting
//             with '-' or '/', no "..", at most 255 characters (git's ref rules, plus no template
//             braces and no option look-alikes).
//   type/task: lower-case letters, digits, '_' and '-', starting with a letter or digit; at most
//             100 characters ("llama", "text-generation").
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace neuron_cache::hub_names {

inline constexpr size_t kMaxRepoPart = 96;
inline constexpr size_t kMaxVersion = 100;
inline constexpr size_t kMaxIdentifier = 100;

// One-line descriptions of each grammar, for messages.
inline constexpr std::string_view kRepoIdRule =
    "namespace/name of letters, digits, '.', '_', '-', no leading or trailing '.' or '-', no "
    "'--' or '..', at most 96 characters each";
inline constexpr std::string_view kVersionRule =
    "a digit, then letters, digits, '.', '+', '_', '-', at most 100 characters, e.g. "
    "2.21.33363.0+82129205";
inline constexpr std::string_view kRevisionRule =
    "a branch, tag or commit: no spaces, no ~^:?*[\\{}, not starting with '-' or '/', no '..'";
inline constexpr std::string_view kIdentifierRule =
    "lower-case letters, digits, '_' and '-', e.g. text-generation";

bool is_repo_id(std::string_view id);
bool is_version(std::string_view version);
bool is_identifier(std::string_view identifier);
bool is_revision(std::string_view revision);

// Throws an input Error unless `repo` is a Hub repo id: "<what> "<repo>" is not a Hub repo id
// (<rule>): <fix>". Called before any request is built with it.
void require_repo_id(std::string_view repo, std::string_view what, std::string_view fix);

}  // namespace neuron_cache::hub_names
