#include "neuron_cache/format/url.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "neuron_cache/error.h"

namespace neuron_cache::url {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Query parameters that carry no credential: the Hub's tree and paths-info listings, S3's
// ListObjectsV2 and multipart uploads. Any other value is masked in logs.
bool harmless_parameter(std::string_view name) {
  static constexpr std::string_view kNames[] = {
      "recursive",   "expand",      "limit",      "cursor",           "revision",
      "list-type",   "prefix",      "delimiter",  "max-keys",         "start-after",
      "partNumber",  "uploadId",    "uploads",    "versionId",        "encoding-type",
      "fetch-owner", "max-uploads", "key-marker", "upload-id-marker", "continuation-token"};
  for (std::string_view known : kNames) {
    if (name == known) return true;
  }
  return false;
}

std::string loggable_query(std::string_view query) {
  std::string out;
  while (!query.empty()) {
    std::string_view item = query.substr(0, query.find('&'));
    query.remove_prefix(std::min(query.size(), item.size() + 1));
    size_t eq = item.find('=');
    std::string_view name = item.substr(0, eq);
    if (!out.empty()) out += '&';
    out += name;
    if (eq == std::string_view::npos) continue;
    out += harmless_parameter(name) ? std::string(item.substr(eq)) : std::string("=***");
  }
  return out;
}

}  // namespace

std::string loggable(std::string_view url) {
  url = url.substr(0, url.find('#'));
  size_t scheme_end = url.find("://");
  size_t host = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  size_t path = std::min(url.find_first_of("/?", host), url.size());
  std::string_view authority = url.substr(host, path - host);
  std::string out(url.substr(0, host));
  out += authority.substr(
      authority.rfind('@') == std::string_view::npos ? 0 : authority.rfind('@') + 1);
  size_t query = url.find('?', path);
  out += url.substr(path, std::min(query, url.size()) - path);
  if (query != std::string_view::npos) out += "?" + loggable_query(url.substr(query + 1));
  return out;
}

std::string origin_of(std::string_view url) {
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return "";
  size_t host_end = url.find_first_of("/?#", scheme_end + 3);
  std::string origin = lower(url.substr(0, host_end));
  // http://host:80 and http://host are the same origin.
  if (origin.starts_with("http://") && origin.ends_with(":80")) origin.resize(origin.size() - 3);
  if (origin.starts_with("https://") && origin.ends_with(":443")) origin.resize(origin.size() - 4);
  return origin;
}

std::string resolve_location(std::string_view base, std::string_view location) {
  if (location.find("://") != std::string_view::npos) return std::string(location);
  std::string origin = origin_of(base);
  if (location.starts_with("//"))
    return origin.substr(0, origin.find("://") + 1) + std::string(location);
  if (location.starts_with("/")) return origin + std::string(location);
  std::string_view path = base.substr(0, base.find_first_of("?#"));
  return std::string(path.substr(0, path.rfind('/') + 1)) + std::string(location);
}

std::string url_encode(std::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

void refuse_userinfo(std::string_view url, const std::string& origin) {
  size_t scheme_end = url.find("://");
  size_t host = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  std::string_view authority = url.substr(host, url.find_first_of("/?#", host) - host);
  if (authority.find('@') == std::string_view::npos) return;
  throw input_error(origin +
                    " holds credentials before its host (scheme://user:...@host), which "
                    "neuron-cache never sends nor prints: give the URL without them, and the "
                    "credentials in their own variables (HF_TOKEN for the Hub, AWS_ACCESS_KEY_ID "
                    "and AWS_SECRET_ACCESS_KEY for S3)");
}

std::string file_url(const std::filesystem::path& path) {
  return "file://" + url_encode(std::filesystem::absolute(path).lexically_normal().string(), true);
}

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoded `text`; nothing when an escape is malformed or decodes to NUL (no path holds
// one).
std::optional<std::string> percent_decode(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    int high = hex_value(text[i + 1]);
    int low = hex_value(text[i + 2]);
    if (high < 0 || low < 0 || (high == 0 && low == 0)) return std::nullopt;
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

}  // namespace

std::string local_path_of(const std::string& location, const std::string& origin) {
  if (lower(location.substr(0, 5)) != "file:") return location;
  std::string_view rest = std::string_view(location).substr(5);
  // file:///p and file://localhost/p name the local /p; file:/p is RFC 8089's minimal form.
  if (rest.starts_with("//")) {
    size_t path_start = rest.find('/', 2);
    std::string host = lower(rest.substr(
        2, path_start == std::string_view::npos ? std::string_view::npos : path_start - 2));
    if (!host.empty() && host != "localhost") {
      throw input_error(origin + " is the file URL " + location + " of the host \"" + host +
                        "\", but the compile cache must be a local folder: set it to a local path "
                        "(file:///path or /path), and mount a shared folder there first");
    }
    rest = path_start == std::string_view::npos ? std::string_view() : rest.substr(path_start);
  }
  std::optional<std::string> path = percent_decode(rest.substr(0, rest.find_first_of("?#")));
  if (!path || !path->starts_with("/")) {
    throw input_error(origin + " is the file URL " + location +
                      ", which names no absolute path (malformed %-escape or a relative path): "
                      "set it to file:///absolute/path or to /absolute/path");
  }
  return *path;
}

}  // namespace neuron_cache::url
