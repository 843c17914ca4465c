// `neuron-cache verify MANIFEST`: audits the store's entries of a manifest's configurations
// under the trust policy (pipeline/verify_step.h): who signed each, what is unsigned, what does
// not verify. Exits 3 when a machine with this policy would not install an entry the store has.
#include <iostream>

#include "neuron_cache/cli/context.h"
#include "neuron_cache/cli/output.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/format/wording.h"
#include "neuron_cache/pipeline/pipeline.h"

namespace neuron_cache::cli {
namespace {

struct VerifyArgs {
  pipeline::Options options;
  bool json = false;
};

std::vector<std::string> printable_all(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& name : names) out.push_back(printable(name));
  return out;
}

// "signed by trusted key acme-ci-1; also signed by other-1 (not trusted)"
std::string signers_text(const trust::Verdict& verdict) {
  std::string text;
  auto add = [&text](const std::string& part) { text += (text.empty() ? "" : "; ") + part; };
  if (!verdict.valid.empty()) add("signed by trusted key " + list_of(printable_all(verdict.valid)));
  if (!verdict.bad.empty())
    add("BAD signature by trusted key " + list_of(printable_all(verdict.bad)) +
        " (the entry changed after it was signed)");
  if (!verdict.unknown.empty())
    add("signed by " + list_of(printable_all(verdict.unknown)) + " (not trusted here)");
  return text.empty() ? "unsigned" : text;
}

nlohmann::json entry_json(const pipeline::VerifiedEntry& e) {
  return {{"name", e.configuration},
          {"key", e.key},
          {"in_store", e.in_store},
          {"absent", e.absent.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.absent)},
          {"signed_by_trusted", e.verdict.valid},
          {"bad_signatures", e.verdict.bad},
          {"signed_by_others", e.verdict.unknown},
          {"installed", e.in_store && e.refused.empty()},
          {"refused", e.refused.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.refused)}};
}

std::string policy_text(const config::TrustPolicy& trust) {
  if (!trust.active()) return "no trusted key: signatures are listed, not checked";
  return std::to_string(trust.keys.size()) + " trusted " +
         (trust.keys.size() == 1 ? "key" : "keys") + " (" + trust.keys_origin + ")" +
         (trust.require ? ", signatures required (" + trust.require_origin + ")"
                        : ", signatures not required");
}

void print_text(const pipeline::VerifyStep& step, const config::TrustPolicy& trust) {
  std::cout << "verify: " << step.entries.size() << " configurations in " << step.store
            << (step.revision.empty() ? "" : " at " + step.revision.substr(0, 12)) << "; "
            << policy_text(trust) << "\n";
  size_t width = 0;
  for (const auto& e : step.entries) width = std::max(width, e.configuration.size());
  size_t absent = 0;
  for (const auto& e : step.entries) {
    std::string line = "  " + e.configuration + std::string(width - e.configuration.size(), ' ');
    if (!e.in_store) {
      ++absent;
      std::cout << line << "  " << e.absent << "\n";
      continue;
    }
    std::cout << line << "  " << signers_text(e.verdict)
              << (e.refused.empty() ? "" : ": not installed") << "\n";
  }
  std::cout << step.entries.size() - absent << " in the store, " << absent << " not; "
            << step.refused() << " would not be installed\n";
}

void verify(Context& context, VerifyArgs& args) {
  auto p = context.open_pipeline(args.options, true);
  p->read_head_when_local(true);
  plan::Plan plan = p->make_plan();
  pipeline::VerifyStep step = p->verify(plan);
  const config::TrustPolicy& trust = p->context().trust;
  if (args.json) {
    nlohmann::json entries = nlohmann::json::array();
    for (const auto& e : step.entries) entries.push_back(entry_json(e));
    print_json({{"store", step.store},
                {"revision", step.revision},
                {"require_signatures", trust.require},
                {"refused", step.refused()},
                {"configurations", entries}});
  } else {
    print_text(step, trust);
  }
  if (size_t refused = step.refused()) {
    throw GateFailed{count_of(refused, "entry", "entries") + " of " + step.store +
                     " would not be installed under this trust policy (see above): push them "
                     "again from a machine with a trusted signing key, or trust their signer"};
  }
}

}  // namespace

void register_verify(CLI::App& app, Context& context) {
  auto args = std::make_shared<VerifyArgs>();
  CLI::App* cmd = app.add_subcommand(
      "verify",
      "Audit the cache store's entries of a manifest's configurations: who signed each, what is "
      "unsigned, what does not verify (exit 3 when one would not be installed)");
  cmd->add_option("manifest", args->options.manifest, "The manifest")->required();
  add_repo_option(cmd, context, "the manifest's cache_repo, CUSTOM_CACHE_REPO, the saved one");
  add_cache_dir_option(cmd, context, kLocalCacheDefaults);
  add_trust_options(cmd, context);
  cmd->add_option("--config", args->options.configs, "Only this configuration (repeatable)")
      ->allow_extra_args(false);
  cmd->add_flag("--json", args->json, "Print JSON for scripts");
  cmd->callback([&context, args] { verify(context, *args); });
}

}  // namespace neuron_cache::cli
