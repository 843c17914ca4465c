// The names of the local cache tree shared with libneuronxla and optimum-neuron, and the rule
// that classifies a MODULE_ entry. Every path rule of the on-disk format lives here.
//
//   <root>/lock
//   <root>/neuronxcc-<full compiler version>/MODULE_<graph key>+<flags key>/{model.neff, ...}
//   <root>/neuronxcc-<version>/MODULE_<entry hash>/...           (traced export, no flags key)
//   <root>/neuronxcc-<version>/0_REGISTRY/<optimum version>/...  (see registry.h)
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace neuron_cache::layout {

inline constexpr std::string_view kDefaultCacheRoot = "/var/tmp/neuron-compile-cache";
inline constexpr std::string_view kCompilerDirPrefix = "neuronxcc-";
inline constexpr std::string_view kModulePrefix = "MODULE_";
inline constexpr std::string_view kRegistryDir = "0_REGISTRY";
inline constexpr std::string_view kRootLock = "lock";

inline constexpr std::string_view kNeff = "model.neff";
inline constexpr std::string_view kDone = "model.done";
inline constexpr std::string_view kLog = "model.log";
inline constexpr std::string_view kHlo = "model.hlo_module.pb";
inline constexpr std::string_view kLegacyHlo = "model.hlo.pb";
inline constexpr std::string_view kFlagsJson = "compile_flags.json";
inline constexpr std::string_view kLegacyFlagsTxt = "compile_flags.txt";
inline constexpr std::string_view kEntryLock = "model.hlo_module.pb.lock";
inline constexpr std::string_view kWrappedNeff = "wrapped_neff.hlo";

// A traced export (encoders, sentence-transformers, diffusion: format spec 2.3 kind 3, 5.3) is the
// exported model folder copied whole to MODULE_<registry entry hash>: config.json (one model) or
// model_index.json (diffusion, whose component sub-folders hold their own config.json), and the
// compiled *.neuron files. It has no model.neff nor model.done.
inline constexpr std::string_view kTracedConfig = "config.json";
inline constexpr std::string_view kTracedModelIndex = "model_index.json";
inline constexpr std::string_view kNeuronSuffix = ".neuron";
inline constexpr size_t kEntryHashLength = 20;  // sha512 hex[:20] (format spec 4.3)

// Private work area of this tool inside the root. Python's upload_folder skips any
// ".cache/huggingface" path, so a staging leftover is never published by optimum-cli synchronize,
// and it sits on the same filesystem as the entries, so renames out of it are atomic.
inline constexpr std::string_view kStagingDir = ".cache/huggingface/neuron-cache-staging";
// Flocked by a prefetch for its run (PrefetchLock); beside the staging area, never inside it.
inline constexpr std::string_view kWorkAreaDir = ".cache/huggingface";
inline constexpr std::string_view kPrefetchLock = "neuron-cache-prefetch.lock";
// When each complete entry was last used (local/use_record.h): <dir>/<compiler dir>/<MODULE_ name>,
// an empty file whose mtime is the time. Outside the entries, so their files stay the compiler's.
inline constexpr std::string_view kUseRecordDir = ".cache/huggingface/neuron-cache-used";
// One file per live run naming the entries it uses (local/in_use.h), locked while the run lives.
inline constexpr std::string_view kInUseDir = ".cache/huggingface/neuron-cache-in-use";
// Inside a staging folder: the journals of its partly downloaded files (local/download_journal.h).
// Never installed with the entry, so never synchronized nor pushed.
inline constexpr std::string_view kDownloadJournalDir = ".neuron-cache-journal";

std::string compiler_dir_name(std::string_view compiler_version);
// The version part of "neuronxcc-<version>", or nothing for other names.
std::optional<std::string> compiler_version_of(std::string_view dir_name);
// The compiler version a file below the store folder `dir` belongs to, from its path:
// "<dir>/neuronxcc-<version>.json" or "<dir>/neuronxcc-<version>/...". Nothing for other paths.
std::optional<std::string> compiler_version_below(std::string_view path, std::string_view dir);

// optimum-neuron marks a compiler folder current when its name starts with
// "neuronxcc-<installed version>", so a short version like 2.21.33363.0
// matches 2.21.33363.0+82129205.
bool is_current_compiler_dir(std::string_view dir_name, std::string_view installed_version);

// The full versions ("2.21.33363.0+82129205") that `dir_names` hold for a version written
// without its build suffix ("2.21.33363.0"), when none is that version exactly: libneuronxla names
// folders by the full version, so a short one in a manifest matches no cached folder.
std::vector<std::string> full_versions_of(std::string_view short_version,
                                          const std::vector<std::string>& dir_names);

struct ModuleName {
  std::string graph_key;  // opaque: decimal, 20 hex, or a registry entry hash
  std::string flags_key;  // 8 hex; empty for traced exports ("MODULE_<entry hash>")
  std::string dir_name() const;
};
std::optional<ModuleName> parse_module_name(std::string_view dir_name);

// "MODULE_" + 20 lowercase hex and no '+': the folder of a traced export. (An NxD graph key has 20
// hex digits too, but its folder always carries "+<flags key>".)
bool is_traced_module_name(std::string_view dir_name);
// The registry entry hash a traced export folder is named after (its registry files are
// 0_REGISTRY/<optimum version>/<arch digest>/<hash>.json and the alias
// 0_REGISTRY/<optimum version>/<model_type>/<model id>/<hash>.json); nothing for other names.
std::optional<std::string> traced_entry_hash(std::string_view dir_name);

bool is_lock_file(std::string_view file_name);

// A file a writer is still filling in before renaming it to its real name: a dot-file
// (".<name>.<random>.tmp" of neuron-cache, ".<hash>.json.<pid>-<random>.tmp" of other writers) or
// any "*.tmp". libneuronxla and optimum-neuron never give a cache file such a name, so one is
// never published (synchronize, push) and cleanup removes it once its writer is surely gone.
bool is_temporary_file(std::string_view file_name);

// Whether `path` is an entry's completion mark (model.done). libneuronxla and optimum-neuron take
// a MODULE folder holding it as whole and read its model.neff at once, so a store that publishes
// file by file (a shared folder, S3) writes every mark last, after every other file of the
// commit is durable: a writer killed midway leaves an entry without its mark, never a mark
// beside a missing or partial NEFF. The Hub's commit lands whole and needs no order.
bool is_completion_mark(std::string_view path);

// Traced is neuron-cache's own state, listed last so the first four keep optimum-neuron's order.
enum class EntryState { Success, Failed, Locked, Empty, Traced };

// What classification looks at in one MODULE_ folder.
struct EntryFiles {
  bool has_neff = false;
  bool has_done = false;
  bool has_log = false;
  std::vector<std::string> lock_files;  // '/'-paths; below the top only for traced names
  bool traced_name = false;             // is_traced_module_name
  bool has_traced_config = false;       // config.json or model_index.json at the top
  size_t neuron_files = 0;              // *.neuron files at any depth
};

// Notes one present file of a traced export folder ('/'-path relative to the folder): the rule
// of which files make a traced export complete lives here.
void note_traced_file(EntryFiles& files, std::string_view relative_path);

// optimum-neuron's _classify_entry, in its order: SUCCESS (neff and done), FAILED (log without
// neff), LOCKED (any *.lock), else EMPTY. neuron-cache adds one class before EMPTY: TRACED, a
// traced export folder with its config and at least one *.neuron file (optimum-neuron calls it
// EMPTY, and its `cache cleanup --all` deletes it: format spec 2.4). Whether the command writing
// it has finished is the caller's business: a traced folder has no marker written last.
EntryState classify(const EntryFiles& files);
// The state a folder named `module_name` would have if it held exactly these regular files
// ('/'-paths relative to it): an index record or a store's listing is judged by the rule a
// folder on disk is, so nothing a store lists as less than complete is ever installed as such.
EntryState classify_listed(std::string_view module_name, const std::vector<std::string>& paths);
// The states whose folder is usable as it is: SUCCESS and TRACED.
bool is_complete(EntryState state);
// "success", "failed", "locked", "empty", "traced"
std::string_view state_name(EntryState state);
// One sentence saying why an entry has its state.
std::string explain(EntryState state, const EntryFiles& files);

// The '/'-separated components of a relative path, empty ones kept ("a//b" has three), so that a
// caller checking each component also refuses the empty ones.
std::vector<std::string> split_path(std::string_view path);

}  // namespace neuron_cache::layout
