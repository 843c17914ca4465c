// `neuron-cache lookup MODEL_ID`: the cached configurations of a model in the Hub cache repo.
#include <cstdio>
#include <iostream>

#include "cli/context.h"
#include "cli/output.h"
#include "remote/lookup.h"

namespace neuron_cache::cli {
namespace {

struct Options {
  remote::LookupQuery query;
  std::optional<std::string> repo;
  bool json = false;
};

nlohmann::json row_json(const remote::LookupRow& r) {
  return {{"task", r.task},
          {"batch_size", r.batch_size},
          {"sequence_length", r.sequence_length},
          {"tensor_parallel", r.tensor_parallel},
          {"dtype", r.dtype},
          {"instance_type", r.instance_type},
          {"compiler_version", r.compiler_version},
          {"optimum_neuron_version", r.optimum_version},
          {"checkpoint_revision", r.checkpoint_revision},
          {"path", r.path}};
}

// A table cell: numbers as digits, missing values blank.
std::string cell(const nlohmann::json& value) {
  if (value.is_null()) return "";
  return value.is_string() ? value.get<std::string>() : value.dump();
}

void print_table(const std::vector<remote::LookupRow>& rows) {
  std::vector<std::vector<std::string>> table = {{"task", "batch size", "sequence length",
                                                  "tensor parallel", "dtype", "instance type",
                                                  "compiler version", "checkpoint revision"}};
  for (const auto& r : rows) {
    table.push_back({r.task, cell(r.batch_size), cell(r.sequence_length), cell(r.tensor_parallel),
                     r.dtype, r.instance_type, r.compiler_version, r.checkpoint_revision});
  }
  std::vector<size_t> widths(table[0].size(), 0);
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

void lookup(Context& context, Options& options) {
  const Settings& settings = context.settings();
  std::string repo = options.repo.value_or(settings.cache_repo.value);
  if (repo.empty()) throw input_error("no cache repo: pass --repo or run `neuron-cache set REPO`");
  if (options.query.compiler_version.empty()) {
    options.query.compiler_version = settings.compiler_version.value;
  }
  remote::LookupResult result = remote::lookup(context.client(), repo, options.query);
  for (const auto& problem : result.problems) warn("unreadable registry entry " + problem);
  const std::string& model = options.query.model_id;
  if (options.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : result.rows) rows.push_back(row_json(r));
    print_json({{"model_id", model},
                {"repo", repo},
                {"compiler_dirs", result.compiler_dirs},
                {"entries", rows},
                {"listing_requests", result.listing_requests}});
    return;
  }
  if (result.rows.empty()) {
    std::cout << "No cached entries found for " << model << " in " << repo << ".\n";
  } else {
    std::cout << "Cached entries for " << model << " in " << repo << ":\n\n";
    print_table(result.rows);
  }
  std::cout << "\nAn entry is not a guaranteed cache hit: the exact configuration (compiler and "
               "optimum-neuron versions, compiler flags) must match to reuse the NEFFs.\n";
  if (settings.compiler_version.value.empty() && options.query.compiler_version.empty()) {
    std::cout << "Searched every compiler version: pass --compiler-version to narrow it.\n";
  }
}

}  // namespace

void register_lookup(CLI::App& app, Context& context) {
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "lookup", "List the cached configurations of MODEL_ID in the Hub cache repo");
  auto& q = options->query;
  cmd->add_option("model_id", q.model_id, "Hub model id, e.g. meta-llama/Llama-3.1-8B")->required();
  cmd->add_option_function<std::string>(
      "--task", [options](const std::string& v) { options->query.task = v; },
      "Task, e.g. text-generation");
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
  cmd->add_option_function<std::string>(
      "--repo,--repo_id", [options](const std::string& v) { options->repo = v; },
      "Hub cache repo (default: the configured one)");
  cmd->add_flag("--json", options->json, "Print JSON for scripts");
  cmd->callback([&context, options] { lookup(context, *options); });
}

}  // namespace neuron_cache::cli
