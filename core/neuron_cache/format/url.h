// URLs: percent-encoding, origins, redirect targets and file:// URLs, the same rule for every
// store and for the URLs handed to build systems.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace neuron_cache::url {

// scheme://host[:port] of a URL, lowercased; empty when it has none (a relative URL).
std::string origin_of(std::string_view url);
// The absolute URL of a redirect `location` received from `base`.
std::string resolve_location(std::string_view base, std::string_view location);
// Percent-encodes everything but unreserved characters (and '/' when keep_slash).
std::string url_encode(std::string_view text, bool keep_slash);
// Throws an input Error when `url`, given by `origin` (a variable), names a user or password before
// its host (scheme://user:password@host): they would go wherever the URL goes and be printed
// wherever it is named (messages, reports, `config show`, Bazel's marker files). Every endpoint
// of a store passes here; the message never quotes the URL.
void refuse_userinfo(std::string_view url, const std::string& origin);
// The file:// URL of `path` made absolute and normal, percent-encoded (what Bazel's downloader
// and curl read).
std::string file_url(const std::filesystem::path& path);
// The local path a file: URL (RFC 8089) names, percent-decoded, or `location` itself when it is
// not a file: URL. Public scripts set NEURON_COMPILE_CACHE_URL=file:///path, which read as a path
// would be a relative folder named "file:". Throws an input Error naming `origin` for a URL of
// another host (the cache must be a local folder) or one that does not name an absolute path.
std::string local_path_of(const std::string& location, const std::string& origin);
// `url` as a log may show it: the value of every query parameter not known to be harmless (a
// presigned URL's signature, credential, policy, token) replaced by "***", userinfo and fragment
// dropped. Known: the Hub's listing parameters and S3's listing and multipart ones.
std::string loggable(std::string_view url);

}  // namespace neuron_cache::url
