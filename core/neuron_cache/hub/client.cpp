#include "neuron_cache/hub/client.h"

#include "neuron_cache/format/hub_names.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/format/timestamp.h"
#include "neuron_cache/format/url.h"
#include "neuron_cache/net/answer.h"
#include "neuron_cache/net/pages.h"
#include "neuron_cache/net/retry.h"

namespace neuron_cache::hub {
namespace {

using nlohmann::json;

bool ok(const net::HttpResponse& r) {
  return r.status >= 200 && r.status < 300;
}

// The next page of a listing: `Link: <URL>; rel="next"`.
std::optional<std::string> next_link(const net::HttpResponse& response) {
  auto link = response.headers.get("Link");
  if (!link) return std::nullopt;
  size_t rel = link->find("rel=\"next\"");
  if (rel == std::string::npos) return std::nullopt;
  size_t open = link->rfind('<', rel);
  size_t close = link->find('>', open);
  if (open == std::string::npos || close == std::string::npos) return std::nullopt;
  return link->substr(open + 1, close - open - 1);
}

}  // namespace

TreeEntry parse_entry(const json& item) {
  net::object_in(item, "an entry");
  TreeEntry entry;
  entry.path = net::text_in(item, "path");
  entry.is_directory = net::text_in(item, "type", "file") == "directory";
  entry.size = net::size_in(item, "size", 0);
  entry.oid = net::text_in(item, "oid");
  if (const json* lfs = net::member(item, "lfs")) {
    net::object_in(*lfs, "\"lfs\"");
    entry.lfs_sha256 = net::text_in(*lfs, "oid");
    entry.size = net::size_in(*lfs, "size", entry.size);
  }
  if (const json* last = net::member(item, "lastCommit"); last != nullptr && last->is_object()) {
    // A date that does not parse is no date: the entry's age stays unknown.
    entry.last_commit_time = parse_utc_timestamp(net::text_in(*last, "date", "")).value_or(0);
  }
  return entry;
}

namespace {

std::vector<TreeEntry> parse_entries(const json& list) {
  std::vector<TreeEntry> entries;
  for (const auto& item : net::array_in(list, "the answer")) entries.push_back(parse_entry(item));
  return entries;
}

net::HttpOptions http_options(const ClientOptions& options) {
  net::HttpOptions http = net::timed_options(options.endpoint, options.hub_timeout);
  http.token = options.token;
  return http;
}

}  // namespace

HubClient::HubClient(ClientOptions options)
    : options_(std::move(options)), http_(http_options(options_)) {}

ClientOptions HubClient::options_from(const config::Settings& settings) {
  ClientOptions options;
  options.endpoint = settings.endpoint.value;
  options.token = settings.token.value;
  options.offline = settings.offline;
  options.retry = net::retry_policy(settings, 6);
  options.hub_timeout = settings.timeout();
  options.audience = audience_named(settings.front_end);
  return options;
}

void HubClient::check_online(const std::string& what) const {
  if (options_.offline) {
    throw operational_error(what +
                            " needs the Hub, but HF_HUB_OFFLINE is set: no request was "
                            "made; unset HF_HUB_OFFLINE to go online");
  }
}

void HubClient::check_repo(const std::string& repo) {
  hub_names::require_repo_id(
      repo, "the repo",
      "no request was made; check --repo, the manifest's cache_repo or "
      "model_id, CUSTOM_CACHE_REPO, or the repo saved by `neuron-cache set`");
}

std::string HubClient::api(const std::string& path) const {
  return options_.endpoint + path;
}

net::HttpResponse HubClient::call(net::HttpRequest request, const std::string& what) {
  return call(std::move(request), what, options_.retry);
}

net::HttpResponse HubClient::call(net::HttpRequest request, const std::string& what,
                                  const net::RetryPolicy& retry) {
  check_online(what);
  if (!unreachable().empty()) {
    throw operational_error(what + " was not tried: " + unreachable() +
                            " earlier in this run, so no further request is made; check the "
                            "network and HF_ENDPOINT");
  }
  net::RetryingExchange exchange(std::move(request), retry);
  http_.run({&exchange}, 1);
  return exchange.response_;
}

const WhoAmI& HubClient::whoami() {
  {
    std::lock_guard lock(whoami_mutex_);
    if (whoami_) return *whoami_;
  }
  if (options_.token.empty()) throw input_error(no_token(options_.audience));
  net::HttpRequest request{"GET", api("/api/whoami-v2")};
  net::HttpResponse response = call(request, "asking the Hub who you are");
  if (!ok(response)) throw hub_error(response, "asking the Hub who you are (whoami)", "", advice());
  WhoAmI answer =
      net::read_answer(response, net::request_name(request), "an account", [](const json& body) {
        net::object_in(body, "the answer");
        WhoAmI who;
        who.name = net::text_in(body, "name");
        who.type = net::text_in(body, "type", "user");
        if (const json* orgs = net::member(body, "orgs")) {
          for (const auto& org : net::array_in(*orgs, "\"orgs\""))
            who.orgs.push_back(net::text_in(net::object_in(org, "an org"), "name"));
        }
        const json* auth = net::member(body, "auth");
        const json* token =
            auth ? net::member(net::object_in(*auth, "\"auth\""), "accessToken") : nullptr;
        if (token) {
          net::object_in(*token, "\"accessToken\"");
          who.token_name = net::text_in(*token, "displayName");
          who.role = net::text_in(*token, "role");
        }
        return who;
      });
  std::lock_guard lock(whoami_mutex_);
  if (!whoami_) whoami_ = std::move(answer);  // set once: the reference stays valid
  return *whoami_;
}

AdviceContext HubClient::advice() const {
  AdviceContext context{!options_.token.empty(), options_.audience, std::nullopt};
  std::lock_guard lock(whoami_mutex_);
  if (whoami_) {
    context.namespaces = whoami_->orgs;
    context.namespaces->insert(context.namespaces->begin(), whoami_->name);
  }
  return context;
}

void HubClient::require_write_token(const std::string& what) {
  const WhoAmI& who = whoami();
  if (who.role != "read") return;
  throw operational_error(what + " needs a token with write access, but the token \"" +
                          who.token_name +
                          "\" is read-only (role read): nothing was sent to the Hub; " +
                          give_token(options_.audience, "a token with write access"));
}

std::string HubClient::create_repo(const std::string& name, const std::string& namespace_,
                                   bool is_private) {
  require_write_token("creating a repo");
  std::string owner = namespace_.empty() ? whoami().name : namespace_;
  json body = {{"name", name},
               {"organization", owner},
               {"type", "model"},
               {"visibility", is_private ? "private" : "public"},
               {"private", is_private}};
  std::string repo = owner + "/" + name;
  check_repo(repo);
  net::HttpRequest request{
      "POST", api("/api/repos/create"), {"Content-Type: application/json"}, body.dump()};
  net::HttpResponse response = call(request, "creating " + repo);
  if (response.status == 409) {
    throw operational_error("creating " + repo +
                            " failed: the repo already exists; use "
                            "`neuron-cache set " +
                            repo + "` to use it as your cache");
  }
  if (!ok(response)) throw hub_error(response, "creating " + repo, repo, advice());
  return repo;
}

// A 404 without the Hub's RepoNotFound, for a repo that can be read: the server has no such
// route (a mirror, an older or self-hosted Hub), which "the repo does not exist" would misname.
void HubClient::refuse_missing_route(const std::string& repo, const std::string& what) {
  try {
    repo_info(repo);
  } catch (const Error&) {
    return;  // the repo itself cannot be read: the usual message says why
  }
  throw operational_error(what + " failed: HTTP 404: " + options_.endpoint +
                          " has no super-squash route (a mirror, or a Hub server without it), "
                          "though " +
                          repo +
                          " exists; nothing was squashed, so the storage of deleted files is not "
                          "freed yet: squash the repo's history on huggingface.co itself (its "
                          "settings page, or huggingface_hub's super_squash_history)");
}

std::string HubClient::super_squash(const std::string& repo, const std::string& branch,
                                    const std::string& message) {
  require_write_token("squashing a repo's history");
  check_repo(repo);
  std::string what = "squashing the history of " + repo;
  net::HttpRequest request{
      "POST",
      api("/api/models/" + repo + "/super-squash/" + url::url_encode(branch, false)),
      {"Content-Type: application/json"},
      json{{"message", message}}.dump()};
  net::HttpResponse response = call(request, what);
  if (response.status == 404 && !response.headers.get("X-Error-Code"))
    refuse_missing_route(repo, what);
  if (!ok(response)) throw hub_error(response, what, repo, advice());
  json answer = json::parse(response.body, nullptr, false);
  if (!answer.is_object() || !answer.contains("commitId") || !answer["commitId"].is_string())
    throw operational_error(what + ": the Hub's answer names no commitId");
  return printable(answer["commitId"].get<std::string>(), 80);
}

RepoInfo HubClient::repo_info(const std::string& repo, const std::string& revision,
                              std::optional<std::chrono::milliseconds> answer_wait) {
  check_repo(repo);
  // Only what RepoInfo holds: without `expand` the Hub also sends the repo's whole file list
  // (siblings), 818 KB for an 8,000-file cache repo. huggingface_hub repeats `expand` this way.
  std::string path = "/api/models/" + repo + "/revision/" +
                     url::url_encode(revision.empty() ? "main" : revision, false) +
                     "?expand=sha&expand=private";
  net::HttpRequest request{"GET", api(path)};
  request.answer_timeout = answer_wait;
  net::RetryPolicy once = options_.retry;
  if (answer_wait) once.max_attempts = 1;
  net::HttpResponse response = call(request, "reading " + repo, once);
  if (!ok(response)) throw hub_error(response, "reading repo " + repo, repo, advice());
  return net::read_answer(response, net::request_name(request), "a repo", [&](const json& body) {
    net::object_in(body, "the answer");
    return RepoInfo{net::text_in(body, "id", repo), net::text_in(body, "sha"),
                    net::flag_in(body, "private", false)};
  });
}

bool HubClient::revision_exists(const std::string& repo, const std::string& revision) {
  check_repo(repo);
  std::string path =
      "/api/models/" + repo + "/revision/" + url::url_encode(revision, false) + "?expand=sha";
  net::HttpRequest request{"GET", api(path)};
  net::HttpResponse response = call(request, "reading revision " + revision + " of " + repo);
  if (ok(response)) return true;
  if (response.status == 404 && response.headers.get("X-Error-Code") == "RevisionNotFound")
    return false;
  throw hub_error(response, "reading revision " + revision + " of " + repo, repo, advice());
}

std::optional<std::string> HubClient::read_file(const std::string& repo, const std::string& path,
                                                const std::string& revision, uint64_t max_bytes) {
  check_repo(repo);
  net::HttpRequest request{"GET", resolve_url(repo, revision, path)};
  request.may_leave_origin = true;  // an LFS file comes from the CDN the Hub redirects to
  request.max_answer_bytes = max_bytes;
  net::HttpResponse response = call(request, "reading " + path + " from " + repo);
  if (response.too_large) {
    throw operational_error("reading " + path + " from " + repo + " failed: " + response.error +
                            "; it is not a file neuron-cache wrote: remove it from the repo");
  }
  if (ok(response)) return response.body;
  std::string code = response.headers.get("X-Error-Code").value_or("");
  if (response.status == 404 && code == "EntryNotFound") return std::nullopt;
  throw hub_error(response, "reading " + path + " from " + repo, repo, advice());
}

std::string HubClient::resolve_url(const std::string& repo, const std::string& revision,
                                   const std::string& path_in_repo) const {
  check_repo(repo);
  return options_.endpoint + "/" + repo + "/resolve/" + url::url_encode(revision, false) + "/" +
         url::url_encode(path_in_repo, true);
}

bool HubClient::repo_exists(const std::string& repo) {
  check_repo(repo);
  // One small property, not the file list (as the JS client's repoExists does).
  net::HttpResponse response =
      call({"GET", api("/api/models/" + repo + "?expand=private")}, "checking " + repo);
  if (ok(response)) return true;
  std::string code = response.headers.get("X-Error-Code").value_or("");
  if (response.status == 404 || code == "RepoNotFound") return false;
  if (response.status == 401 &&
      server_message(response).find("Invalid credentials") == std::string::npos) {
    return false;  // private repos look missing to those without access
  }
  throw hub_error(response, "checking repo " + repo, repo, advice());
}

std::vector<TreeEntry> HubClient::list_tree(const std::string& repo, const std::string& path,
                                            bool recursive, const std::string& revision) {
  check_repo(repo);
  std::string url = api("/api/models/" + repo + "/tree/" + url::url_encode(revision, false));
  if (!path.empty()) url += "/" + url::url_encode(path, true);
  url += std::string("?recursive=") + (recursive ? "true" : "false") + "&expand=false";
  std::vector<TreeEntry> entries;
  // The Hub's pages hold 1,000 entries: 5,000 pages is five million files.
  net::PageBudget budget("listing " + repo, 5000, options_.hub_timeout * 120);
  for (std::optional<std::string> next = url; next;) {
    net::HttpRequest request{"GET", *next};
    net::HttpResponse response = call(request, "listing " + repo);
    if (response.status == 404 &&
        response.headers.get("X-Error-Code").value_or("") == "EntryNotFound") {
      return entries;
    }
    if (!ok(response)) throw hub_error(response, "listing files of " + repo, repo, advice());
    auto page =
        net::read_answer(response, net::request_name(request), "a list of files", parse_entries);
    for (auto& entry : page) entries.push_back(std::move(entry));
    next = next_link(response);
    if (next) budget.more_after(page.size());
  }
  return entries;
}

std::vector<TreeEntry> HubClient::paths_info(const std::string& repo,
                                             const std::vector<std::string>& paths,
                                             const std::string& revision, bool expand) {
  check_repo(repo);
  std::vector<TreeEntry> entries;
  // The Hub answers 413 above about 1000 paths; expanded, it pages its tree by 50.
  const size_t batch = expand ? 50 : 500;
  for (size_t start = 0; start < paths.size(); start += batch) {
    json body = {
        {"paths", std::vector<std::string>(
                      paths.begin() + static_cast<long>(start),
                      paths.begin() + static_cast<long>(std::min(paths.size(), start + batch)))},
        {"expand", expand}};
    net::HttpRequest request{
        "POST",
        api("/api/models/" + repo + "/paths-info/" + url::url_encode(revision, false)),
        {"Content-Type: application/json"},
        body.dump()};
    net::HttpResponse response = call(request, "reading paths of " + repo);
    if (!ok(response))
      throw hub_error(response, "reading file information of " + repo, repo, advice());
    for (auto& entry :
         net::read_answer(response, net::request_name(request), "a list of files", parse_entries))
      entries.push_back(std::move(entry));
  }
  return entries;
}

}  // namespace neuron_cache::hub
