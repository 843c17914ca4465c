#include "neuron_cache/format/store_name.h"

#include <cctype>

#include "neuron_cache/error.h"
#include "neuron_cache/format/hub_names.h"
#include "neuron_cache/format/layout.h"

namespace neuron_cache::store_name {
namespace {

constexpr std::string_view kForms =
    "a Hub repo id (org/name or hf://org/name), s3://bucket/prefix or file:///absolute/path";

// Bucket names as S3 allows them: 3-63 of a-z, 0-9, '.', '-', starting and ending with a letter
// or digit. Anything else could change the host or the path of a request.
bool valid_bucket(std::string_view bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  for (char ch : bucket) {
    if (!(std::islower(static_cast<unsigned char>(ch)) ||
          std::isdigit(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-'))
      return false;
  }
  return std::isalnum(static_cast<unsigned char>(bucket.front())) &&
         std::isalnum(static_cast<unsigned char>(bucket.back()));
}

// A prefix made of plain path segments: no empty, "." or ".." segment, no control character.
bool valid_prefix(std::string_view prefix) {
  if (prefix.size() > 512) return false;
  for (const std::string& part : layout::split_path(std::string(prefix))) {
    if (part.empty() || part == "." || part == "..") return false;
    for (char ch : part) {
      if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f || ch == '\\') return false;
    }
  }
  return true;
}

StoreName parse_s3(const std::string& name) {
  std::string rest = name.substr(5);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  size_t slash = rest.find('/');
  StoreName out;
  out.kind = StoreKind::S3;
  out.bucket = rest.substr(0, slash);
  out.prefix = slash == std::string::npos ? "" : rest.substr(slash + 1);
  if (!valid_bucket(out.bucket)) {
    throw input_error("\"" + name + "\": \"" + out.bucket +
                      "\" is not an S3 bucket name (3-63 characters of a-z, 0-9, '.' and '-')");
  }
  if (!out.prefix.empty() && !valid_prefix(out.prefix)) {
    throw input_error("\"" + name + "\": the prefix \"" + out.prefix +
                      "\" must be plain '/'-separated names (no empty, '.' or '..' part)");
  }
  return out;
}

// "%2B" -> "+": file URLs are percent-encoded (url::file_url writes them so).
std::string percent_decode(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() &&
        std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(text.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

StoreName parse_folder(const std::string& name) {
  std::string_view rest = std::string_view(name).substr(7);
  if (rest.starts_with("localhost/")) rest.remove_prefix(9);
  std::string path = percent_decode(rest);
  if (path.empty() || path.front() != '/') {
    throw input_error("\"" + name +
                      "\": a folder store is file:///absolute/path (no host; mount the share and "
                      "name its local path)");
  }
  for (char ch : path) {
    if (static_cast<unsigned char>(ch) < 0x20) {
      throw input_error("\"" + name + "\": a folder path has no control characters");
    }
  }
  StoreName out;
  out.kind = StoreKind::Folder;
  out.folder = std::filesystem::path(path).lexically_normal();
  return out;
}

}  // namespace

StoreName parse_store_name(const std::string& name, const std::string& what) {
  if (name.starts_with("s3://")) return parse_s3(name);
  if (name.starts_with("file://")) return parse_folder(name);
  std::string repo = name.starts_with("hf://") ? name.substr(5) : name;
  if (repo.find("://") != std::string::npos) {
    throw input_error(what + " \"" + name + "\" is not a cache store this tool knows: use " +
                      std::string(kForms));
  }
  hub_names::require_repo_id(repo, what,
                             "check the name (other stores: s3://bucket/prefix, file:///folder)");
  StoreName out;
  out.hub_repo = repo;
  return out;
}

bool is_store_name(const std::string& name) {
  try {
    parse_store_name(name);
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace neuron_cache::store_name
