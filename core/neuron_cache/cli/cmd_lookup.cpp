// `neuron-cache lookup MODEL_ID`: the cached configurations of a model in the Hub cache repo.
#include <cstdio>
#include <functional>
#include <iostream>

#include "neuron_cache/cli/context.h"
#include "neuron_cache/cli/output.h"
#include "neuron_cache/error.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/remote/lookup.h"
#include "neuron_cache/storage/models.h"

namespace neuron_cache::cli {
namespace {

struct Options {
  remote::LookupQuery query;
  std::string revision = "main";  // of the model, whose config.json gives its architecture
  bool json = false;
  std::string architecture_problem;  // why the model's architecture is unknown, or empty
};

// A value the entry may not store: null when it does not, so scripts tell "" from missing.
nlohmann::json or_null(const std::string& text) {
  return text.empty() ? nlohmann::json() : nlohmann::json(text);
}

nlohmann::json row_json(const remote::LookupRow& r) {
  return {{"task", or_null(r.task)},
          {"mode", r.mode},
          {"batch_size", r.batch_size},
          {"sequence_length", r.sequence_length},
          {"tensor_parallel", r.tensor_parallel},
          {"dtype", or_null(r.dtype)},
          {"instance_type", or_null(r.instance_type)},
          {"compiler_version", or_null(r.compiler_version)},
          {"optimum_neuron_version", or_null(r.optimum_version)},
          {"checkpoint_revision", or_null(r.checkpoint_revision)},
          {"same_architecture_as", or_null(r.same_architecture_as)},
          {"path", r.path}};
}

// A table cell: numbers as digits, missing values blank.
std::string cell(const nlohmann::json& value) {
  if (value.is_null()) return "";
  return value.is_string() ? value.get<std::string>() : value.dump();
}

using Column = std::pair<std::string, std::function<std::string(const remote::LookupRow&)>>;

// Training entries (0.0.19-0.1.x) describe a parallel layout, not a served shape: no batch size,
// sequence length or instance type.
std::vector<Column> columns_for(const std::string& mode, bool same_architecture) {
  using Row = remote::LookupRow;
  std::vector<Column> columns;
  if (mode == "all") columns.push_back({"mode", [](const Row& r) { return r.mode; }});
  columns.push_back({"task", [](const Row& r) { return r.task; }});
  if (mode != "training") {
    columns.push_back({"batch size", [](const Row& r) { return cell(r.batch_size); }});
    columns.push_back({"sequence length", [](const Row& r) { return cell(r.sequence_length); }});
  }
  columns.push_back({"tensor parallel", [](const Row& r) { return cell(r.tensor_parallel); }});
  columns.push_back({"dtype", [](const Row& r) { return r.dtype; }});
  if (mode != "training") {
    columns.push_back({"instance type", [](const Row& r) { return r.instance_type; }});
  }
  columns.push_back({"compiler version", [](const Row& r) { return r.compiler_version; }});
  columns.push_back({"optimum-neuron", [](const Row& r) { return r.optimum_version; }});
  columns.push_back({"checkpoint revision", [](const Row& r) { return r.checkpoint_revision; }});
  if (same_architecture) {
    columns.push_back(
        {"same architecture as", [](const Row& r) { return r.same_architecture_as; }});
  }
  return columns;
}

void print_table(const std::vector<remote::LookupRow>& rows, const std::string& mode,
                 bool same_architecture) {
  std::vector<Column> columns = columns_for(mode, same_architecture);
  std::vector<std::vector<std::string>> table(1);
  for (const auto& column : columns) table[0].push_back(column.first);
  for (const auto& r : rows) {
    table.emplace_back();
    for (const auto& column : columns) table.back().push_back(column.second(r));
  }
  std::vector<size_t> widths(columns.size(), 0);
  for (const auto& row : table) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : table) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i] + std::string(widths[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::cout << line << "\n";
  }
}

void print_text(const remote::LookupResult& result, const Options& options,
                const std::string& repo) {
  const remote::LookupQuery& q = options.query;
  if (!result.has_registry) {
    std::cout << "No registry entries in " << repo
              << (q.compiler_version.empty() ? "" : " for neuronx-cc " + q.compiler_version)
              << ".\n";
  } else if (result.rows.empty()) {
    std::cout << "No cached entries found for " << q.model_id << " in " << repo << ".\n";
  } else {
    std::cout << "Cached entries for " << q.model_id << " in " << repo << ":\n\n";
    print_table(result.rows, q.mode, result.same_architecture_rows > 0);
  }
  if (result.same_architecture_rows > 0) {
    std::cout << "\n"
              << result.same_architecture_rows << " of these entries were made for another model "
              << "with the same architecture (optimum-neuron reuses them too: the NEFFs hold no "
                 "weights).\n";
  }
  if (result.other_architecture_rows > 0) {
    std::cout << "\n"
              << result.other_architecture_rows << " more entries of " << q.model_id
              << " were made from another config.json than its " << options.revision
              << " one: optimum-neuron does not reuse them.\n";
  }
  if (result.normalised_instance_rows > 0) {
    std::cout << "\n"
              << result.normalised_instance_rows << " more entries target trn1, which serves "
              << *q.instance_type
              << " (optimum-neuron stores inf2 and trn1n as trn1): pass --instance-type trn1.\n";
  }
  if (result.other_mode_rows > 0) {
    std::cout << "\n"
              << result.other_mode_rows << " more entries of another mode: pass --mode "
              << (q.mode == "inference" ? "training" : "inference") << " or --mode all.\n";
  }
  if (!options.architecture_problem.empty()) {
    std::cout << "\nThe architecture digest of " << q.model_id
              << " was not computed: " << options.architecture_problem
              << ". Entries of its digest folders that no alias of it links may be missing; "
                 "check the model id, --revision and the token's access to the model.\n";
  }
  std::cout << "\nAn entry is not a guaranteed cache hit: the exact configuration (compiler and "
               "optimum-neuron versions, compiler flags) must match to reuse the NEFFs.\n";
  if (q.compiler_version.empty()) {
    std::cout << "Searched every compiler version: pass --compiler-version to narrow it.\n";
  }
}

// The model's architecture as optimum-neuron computes it from its config.json (a digest per
// transformers release), for --task or every task it exports; none when config.json cannot be
// read (architecture_problem says why): then its own aliases link its folders.
std::map<std::string, remote::TaskArchitecture> architectures(Context& context, Options& options) {
  const remote::LookupQuery& q = options.query;
  std::optional<std::string> text;
  std::string why;
  try {
    storage::ModelSource& models = *context.remotes().models;
    if (models.offline()) {
      why = "its config.json was not read: the Hub is offline (HF_HUB_OFFLINE)";
    } else {
      text = models.read_file(q.model_id, "config.json", options.revision);
      if (!text) why = "the model has no config.json";
    }
  } catch (const Error& error) {
    why = error.what();
  }
  std::optional<registry::Json> config;
  if (text) config = pyjson::parse_or_nothing(*text, pyjson::kApiAnswer);
  if (text && (!config || !config->is_object())) why = "its config.json is not a JSON object";
  std::map<std::string, remote::TaskArchitecture> found;
  if (!config || !config->is_object()) {
    options.architecture_problem = why;
    return found;
  }
  std::vector<std::string> tasks =
      q.task ? std::vector<std::string>{*q.task} : remote::known_tasks();
  for (const auto& task : tasks) {
    remote::TaskArchitecture architecture = remote::architecture_of(*config, task);
    if (!architecture.note.empty()) options.architecture_problem = architecture.note;
    found[task] = std::move(architecture);
  }
  return found;
}

void lookup(Context& context, Options& options) {
  const config::Settings& settings = context.settings_with_compiler();
  storage::Store& store = context.store();
  std::string repo = store.name();
  if (options.query.compiler_version.empty()) {
    options.query.compiler_version = settings.compiler_version.value;
  }
  options.query.architectures = architectures(context, options);
  remote::LookupResult result = remote::lookup(store, options.query);
  for (const auto& problem : result.problems) warn("unreadable registry entry " + problem);
  if (!options.json) {
    print_text(result, options, repo);
    return;
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : result.rows) rows.push_back(row_json(r));
  print_json({{"model_id", options.query.model_id},
              {"repo", repo},
              {"mode", options.query.mode},
              {"optimum_neuron_version", options.query.optimum_version
                                             ? nlohmann::json(*options.query.optimum_version)
                                             : nlohmann::json()},
              {"compiler_dirs", result.compiler_dirs},
              {"has_registry", result.has_registry},
              {"entries", rows},
              {"other_mode_entries", result.other_mode_rows},
              {"other_architecture_entries", result.other_architecture_rows},
              {"same_architecture_entries", result.same_architecture_rows},
              {"architecture_problem", or_null(options.architecture_problem)},
              {"listing_requests", result.listing_requests}});
}

}  // namespace

void register_lookup(CLI::App& app, Context& context) {
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "lookup", "List the cached configurations of MODEL_ID in the Hub cache repo");
  auto& q = options->query;
  cmd->add_option("model_id", q.model_id, "Hub model id, e.g. meta-llama/Llama-3.1-8B")->required();
  cmd->add_option("--revision", options->revision,
                  "Model revision whose config.json gives the architecture optimum-neuron "
                  "matches entries by (default: main)");
  cmd->add_option_function<std::string>(
      "--task", [options](const std::string& v) { options->query.task = v; },
      "Task, e.g. text-generation");
  cmd->add_option("--mode", q.mode,
                  "Entries to list: inference (default), training (optimum-neuron 0.0.19-0.1.x "
                  "training runs) or all")
      ->check(CLI::IsMember({"inference", "training", "all"}));
  cmd->add_option_function<std::string>(
      "--optimum-neuron-version,--optimum_neuron_version",
      [options](const std::string& v) { options->query.optimum_version = v; },
      "Only entries written by this optimum-neuron version (exact, e.g. 0.4.5; default: all)");
  cmd->add_option_function<std::string>(
      "--instance-type,--instance_type",
      [options](const std::string& v) { options->query.instance_type = v; },
      "Instance type the entry targets (trn1, trn2, inf2, trn1n)");
  cmd->add_option_function<std::string>(
      "--dtype", [options](const std::string& v) { options->query.dtype = v; },
      "Precision: bfloat16 (bf16), float16 (fp16), float32");
  cmd->add_option_function<long>(
      "--tensor-parallel-size,--tensor_parallel_size",
      [options](long v) { options->query.tensor_parallel_size = v; }, "Tensor parallel degree");
  cmd->add_option_function<long>(
      "--batch-size,--batch_size", [options](long v) { options->query.batch_size = v; },
      "Batch size");
  cmd->add_option_function<long>(
      "--sequence-length,--sequence_length",
      [options](long v) { options->query.sequence_length = v; }, "Sequence length");
  add_repo_option(cmd, context, "the configured one");
  cmd->add_flag("--json", options->json, "Print JSON for scripts");
  cmd->callback([&context, options] { lookup(context, *options); });
}

}  // namespace neuron_cache::cli
