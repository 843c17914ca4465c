// `neuron-cache whoami`, `create` and `set`: the identity behind the token and the default Hub
// cache repo, stored where optimum-neuron keeps it so both tools use the same one.
#include <fstream>
#include <iostream>
#include <sstream>

#include "neuron_cache/cli/context.h"
#include "neuron_cache/cli/output.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/storage/folder_store.h"

namespace neuron_cache::cli {
namespace {

std::string read_saved_repo(const config::Settings& settings) {
  std::ifstream file(settings.custom_cache_file.value);
  std::stringstream content;
  content << file.rdbuf();
  std::string value = content.str();
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.pop_back();
  return value;
}

void save(Context& context, const std::string& repo) {
  const config::Settings& settings = context.settings();
  std::string previous = read_saved_repo(settings);
  if (!previous.empty() && previous != repo) {
    warn("A custom cache repo was already registered: " + previous +
         ". It will be overwritten to " + repo + ".");
  }
  std::string file = config::save_custom_cache_repo(settings, repo);
  std::cout << "Neuron cache name set locally to " << repo << " in " << file << ".\n";
  if (auto env = context.env().get("CUSTOM_CACHE_REPO"); env && *env != repo) {
    warn("CUSTOM_CACHE_REPO=" + *env + " is set and takes precedence over the saved repo");
  }
}

void whoami(Context& context, bool json) {
  const hub::WhoAmI& who = context.client().whoami();
  if (json) {
    print_json({{"name", who.name},
                {"type", who.type},
                {"orgs", who.orgs},
                {"token_name", who.token_name},
                {"role", who.role},
                {"endpoint", context.settings().endpoint.value}});
    return;
  }
  // The Hub's words, escaped as every answer printed as text.
  std::cout << printable(who.name) << "\n";
  if (!who.orgs.empty()) {
    std::string orgs;
    for (const auto& org : who.orgs) orgs += (orgs.empty() ? "" : ", ") + printable(org);
    std::cout << "orgs: " << orgs << "\n";
  }
  if (!who.role.empty())
    std::cout << "token: " << printable(who.token_name) << " (" << printable(who.role) << ")\n";
}

// A shared folder is made a store by the marker file; it is not saved as the default, because
// optimum-neuron reads that file as a Hub repo name.
void create_folder(const std::string& name) {
  std::filesystem::path root = storage::folder_root_from_url(name);
  bool made = storage::create_folder_store(root);
  std::cout << "Neuron cache " << (made ? "created in" : "already in") << " the shared folder "
            << root.string() << " (" << storage::kFolderStoreMarker << " marks it).\n"
            << "Give it as --repo " << name
            << ", cache_repo in a manifest or CUSTOM_CACHE_REPO (not saved as the default, "
               "which optimum-neuron reads as a Hub repo).\n";
}

void create(Context& context, const std::string& name, bool is_public) {
  if (name.starts_with("file://")) return create_folder(name);
  if (name.starts_with("s3://")) {
    throw input_error(
        "create makes Hub repos and shared folders: create the bucket with your "
        "cloud's tools (aws s3 mb " +
        name + "); any bucket neuron-cache can write is a store");
  }
  std::string owner, short_name = name;
  if (size_t slash = name.find('/'); slash != std::string::npos) {
    owner = name.substr(0, slash);
    short_name = name.substr(slash + 1);
  }
  std::string repo = context.client().create_repo(short_name, owner, !is_public);
  std::cout << "Neuron cache created on the Hugging Face Hub: " << repo << " ["
            << (is_public ? "public" : "private") << "].\n";
  save(context, repo);
}

void set(Context& context, const std::string& repo) {
  if (!context.client().repo_exists(repo)) {
    throw operational_error("Could not save the custom Neuron cache repo to be " + repo +
                            " because it does not exist or is private to you: check the name "
                            "and run `neuron-cache whoami`");
  }
  save(context, repo);
}

}  // namespace

void register_repo_commands(CLI::App& app, Context& context) {
  auto json = std::make_shared<bool>(false);
  CLI::App* who = app.add_subcommand("whoami", "Show the Hub user behind the token (HF_TOKEN)");
  who->add_flag("--json", *json, "Print JSON for scripts");
  who->callback([&context, json] { whoami(context, *json); });

  auto name = std::make_shared<std::string>("optimum-neuron-cache");
  auto is_public = std::make_shared<bool>(false);
  CLI::App* create_cmd = app.add_subcommand(
      "create",
      "Create a Hub cache repo (private unless --public) and make it the default, or make a "
      "shared folder (-n file:///path) a store");
  create_cmd->add_option("-n,--name", *name, "Repo name, ORG/NAME, or file:///path")
      ->capture_default_str();
  create_cmd->add_flag("--public", *is_public, "Make the repo public");
  create_cmd->callback([&context, name, is_public] { create(context, *name, *is_public); });

  auto repo = std::make_shared<std::string>();
  CLI::App* set_cmd = app.add_subcommand(
      "set", "Make REPO the default Hub cache repo (checks that it exists and is accessible)");
  set_cmd->add_option("repo", *repo, "Hub repo id, e.g. my-org/optimum-neuron-cache")->required();
  set_cmd->callback([&context, repo] { set(context, *repo); });
}

}  // namespace neuron_cache::cli
