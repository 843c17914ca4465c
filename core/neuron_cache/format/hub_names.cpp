#include "neuron_cache/format/hub_names.h"

#include <algorithm>

#include "neuron_cache/error.h"

namespace neuron_cache::hub_names {
namespace {

bool is_ascii_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool is_repo_part(std::string_view part) {
  if (part.empty() || part.size() > kMaxRepoPart) return false;
  auto allowed = [](char c) { return is_ascii_alnum(c) || c == '.' || c == '_' || c == '-'; };
  if (!std::all_of(part.begin(), part.end(), allowed)) return false;
  auto edge = [](char c) { return c == '.' || c == '-'; };
  if (edge(part.front()) || edge(part.back())) return false;
  return part.find("--") == std::string_view::npos && part.find("..") == std::string_view::npos;
}

// Cut so that a hostile value cannot make a message huge.
std::string shown(std::string_view text) {
  constexpr size_t kMax = 120;
  if (text.size() > kMax) return std::string(text.substr(0, kMax)) + "...";
  return std::string(text);
}

}  // namespace

bool is_repo_id(std::string_view id) {
  size_t slash = id.find('/');
  std::string_view name = slash == std::string_view::npos ? id : id.substr(slash + 1);
  if (slash != std::string_view::npos && !is_repo_part(id.substr(0, slash))) return false;
  return is_repo_part(name) && !name.ends_with(".git");
}

bool is_version(std::string_view version) {
  if (version.empty() || version.size() > kMaxVersion) return false;
  if (version.front() < '0' || version.front() > '9') return false;
  return std::all_of(version.begin(), version.end(), [](char c) {
    return is_ascii_alnum(c) || c == '.' || c == '+' || c == '_' || c == '-';
  });
}

bool is_identifier(std::string_view identifier) {
  if (identifier.empty() || identifier.size() > kMaxIdentifier) return false;
  auto lower_alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lower_alnum(identifier.front())) return false;
  return std::all_of(identifier.begin(), identifier.end(),
                     [&](char c) { return lower_alnum(c) || c == '_' || c == '-'; });
}

bool is_revision(std::string_view revision) {
  constexpr size_t kMaxRevision = 255;
  if (revision.empty() || revision.size() > kMaxRevision) return false;
  if (revision.front() == '-' || revision.front() == '/') return false;
  if (revision.find("..") != std::string_view::npos) return false;
  return std::all_of(revision.begin(), revision.end(), [](char c) {
    return c > ' ' && c < 0x7f && std::string_view("~^:?*[\\{}").find(c) == std::string_view::npos;
  });
}

void require_repo_id(std::string_view repo, std::string_view what, std::string_view fix) {
  if (is_repo_id(repo)) return;
  throw input_error(std::string(what) + " \"" + shown(repo) + "\" is not a Hub repo id (" +
                    std::string(kRepoIdRule) + "): " + std::string(fix));
}

}  // namespace neuron_cache::hub_names
