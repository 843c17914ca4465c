#include "neuron_cache/storage/s3_store.h"

#include <set>

#include "neuron_cache/format/store_name.h"

#include <fcntl.h>
#include <unistd.h>

#include <memory>

#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/format/timestamp.h"
#include "neuron_cache/format/url.h"
#include "neuron_cache/net/pages.h"
#include "neuron_cache/net/retry.h"
#include "neuron_cache/storage/s3_internal.h"
#include "neuron_cache/storage/s3_xml.h"

namespace neuron_cache::storage {
namespace {

using net::HttpRequest;
using net::HttpResponse;

// A listing bigger than this is not a compile cache (each entry costs ~200 bytes of memory).
constexpr size_t kMaxListedEntries = 2000000;
// A listing may take this many times the timeout in all (net::PageBudget).
constexpr int kListingTimeFactor = 120;
// S3 bucket names: 3 to 63 characters of [a-z0-9.-].

// Whether `path` is a clean relative path ("a/b/c"): keys such as "../x", "a//b", "./a" or
// "folder/" (a console's folder marker) are never turned into local paths.
bool clean_relative(std::string_view path) {
  if (path.empty() || path.size() > s3xml::kMaxTextBytes) return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == ".." || part.find('\0') != std::string_view::npos) {
      return false;
    }
    start = end + 1;
  }
  return true;
}

// The entries one level below `path` of a recursive listing: its files, and its folders once.
std::vector<RemoteEntry> one_level(const std::vector<RemoteEntry>& all, const std::string& path) {
  const std::string base = path.empty() ? "" : path + "/";
  std::vector<RemoteEntry> out;
  std::set<std::string> folders;
  for (const auto& entry : all) {
    if (entry.path.rfind(base, 0) != 0) continue;
    size_t slash = entry.path.find('/', base.size());
    if (slash == std::string::npos) {
      out.push_back(entry);
    } else if (folders.insert(entry.path.substr(0, slash)).second) {
      out.push_back({entry.path.substr(0, slash), true, 0, "", "", ""});
    }
  }
  return out;
}

std::string advice(long status, const std::string& code, const config::AwsAccess& access) {
  if (access.anonymous() && (status == 403 || status == 401)) {
    return "the bucket does not allow unsigned reads: unset AWS_NO_SIGN_REQUEST and give "
           "credentials";
  }
  if (code == "NoSuchBucket") return "the bucket does not exist: check the s3:// URL";
  if (code == "PermanentRedirect" || code == "AuthorizationHeaderMalformed" || status == 301) {
    return "the bucket is in another region: set AWS_REGION to the bucket's region";
  }
  if (status == 403 || code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch") {
    return "check the AWS credentials (from " + access.credentials_origin +
           "; `neuron-cache config show --repo s3://...` says more) and the bucket's policy";
  }
  if (status == 0) return "check the network and AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL";
  if (status == 503 || code == "SlowDown") return "S3 asked to slow down: retry later";
  if (status >= 500) return "the S3 store is failing: retry later";
  return "";
}

std::vector<RemoteEntry> list_objects(S3Store& store, const std::string& key_prefix,
                                      bool recursive);

net::HttpOptions http_options(const std::string& base_url, const S3Options& options) {
  // The base URL's origin decides when the store is unreachable.
  return net::timed_options(base_url, options.timeout);
}

std::string base_url_of(const S3Location& where, const config::AwsAccess& access, bool path_style) {
  if (path_style) return access.endpoint + "/" + where.bucket;
  size_t host = access.endpoint.find("://") + 3;
  return access.endpoint.substr(0, host) + where.bucket + "." + access.endpoint.substr(host);
}

}  // namespace

S3Location parse_s3_url(const std::string& url) {
  if (url.rfind("s3://", 0) != 0) throw input_error(url + " is not an s3://bucket/prefix URL");
  store_name::StoreName name = store_name::parse_store_name(url);  // the one rule of names
  return {name.bucket, name.prefix};
}

namespace {

S3Address address_of(const std::string& url, const config::AwsAccess& access) {
  S3Location where = parse_s3_url(url);
  bool path_style = config::aws_path_style(access, where.bucket);
  std::string base_url = base_url_of(where, access, path_style);
  return S3Address(std::move(where), std::move(base_url), path_style);
}

}  // namespace

S3Address::S3Address(S3Location where, std::string base_url, bool path_style)
    : where_(std::move(where)), base_url_(std::move(base_url)), path_style_(path_style) {}

S3Store::S3Store(const std::string& url, config::AwsAccess access, S3Options options)
    : access_(std::move(access)),
      address_(address_of(url, access_)),
      credentials_(std::make_unique<aws::CredentialProvider>(access_)),
      options_(std::move(options)),
      http_(http_options(address_.base_url(), options_)) {
  options_.part_size = std::max(options_.part_size, S3Options::kMinPartSize);
  options_.parallel = std::max<size_t>(options_.parallel, 1);
}

std::unique_ptr<S3Store> S3Store::open(const std::string& url, const config::Settings& settings) {
  S3Options options;
  options.offline = settings.store_offline;
  options.retry = net::retry_policy(settings, 6);
  options.timeout = settings.timeout();
  options.recheck = settings.s3_recheck();
  options.sse = settings.s3_sse.value;
  options.sse_kms_key_id = settings.s3_sse_kms_key_id.value;
  if (!options.sse.empty() && options.sse != "AES256" && options.sse != "aws:kms") {
    throw input_error("NEURON_CACHE_S3_SSE=" + printable(options.sse) +
                      " is not AES256 or aws:kms: set one of them, or unset it for the bucket's "
                      "default encryption");
  }
  if (!options.sse_kms_key_id.empty() && options.sse != "aws:kms") {
    throw input_error("NEURON_CACHE_S3_SSE_KMS_KEY_ID needs NEURON_CACHE_S3_SSE=aws:kms");
  }
  config::AwsAccess access = config::resolve_aws_access(settings.environment);
  if (!options.offline && access.region_from) {
    // The instance's region decides the default endpoint: asked before the store is made.
    try {
      if (auto region = aws::instance_region(*access.region_from, {})) {
        access.region = *region;
        access.region_origin = "the instance's metadata";
        if (!access.custom_endpoint) access.endpoint = "https://s3." + *region + ".amazonaws.com";
      }
    } catch (const Error&) {
      // No metadata service (off EC2): the default region stands, unless the credentials were
      // to come from it too.
      if (access.source && access.source->kind == config::AwsSourceKind::InstanceRole) throw;
    }
  }
  auto store = std::make_unique<S3Store>(url, std::move(access), options);
  // Fetched now, once: a run without credentials says so before anything is planned.
  if (!options.offline && !store->access_.anonymous()) store->credentials_->current();
  return store;
}

void S3Store::sign_again(net::HttpRequest& request) const {
  if (!request.aws_sigv4) return;
  aws::Credentials credentials = credentials_->current();
  request.aws_sigv4->key_id = credentials.access_key_id;
  request.aws_sigv4->secret = credentials.secret_access_key;
  std::erase_if(request.headers, [](const std::string& header) {
    return header.starts_with("x-amz-security-token:");
  });
  if (!credentials.session_token.empty())
    request.headers.push_back("x-amz-security-token: " + credentials.session_token);
}

void S3Store::add_encryption(net::HttpRequest& request) const {
  if (options_.sse.empty()) return;
  request.headers.push_back("x-amz-server-side-encryption: " + options_.sse);
  if (!options_.sse_kms_key_id.empty()) {
    request.headers.push_back("x-amz-server-side-encryption-aws-kms-key-id: " +
                              options_.sse_kms_key_id);
  }
}

std::string S3Store::why_not_writable() {
  if (!access_.anonymous()) return "";
  return "AWS_NO_SIGN_REQUEST is set: unsigned requests may read a public bucket but never "
         "write; unset it and give credentials to push";
}

std::string S3Store::describe_access() {
  std::string text = access_.describe();
  if (access_.source && !access_.anonymous() && !options_.offline) {
    credentials_->current();
    text = "credentials: " + credentials_->describe() + "\n" + text.substr(text.find('\n') + 1);
  }
  return text;
}

std::string S3Store::location() const {
  return address_.location();
}

std::string S3Address::location() const {
  return "s3://" + where_.bucket + (where_.prefix.empty() ? "" : "/" + where_.prefix);
}

std::string S3Address::key_of(const std::string& path) const {
  if (where_.prefix.empty()) return path;
  return path.empty() ? where_.prefix : where_.prefix + "/" + path;
}

std::string S3Address::key_root() const {
  return where_.prefix.empty() ? "" : where_.prefix + "/";
}

std::string S3Address::object_url(const std::string& path, const std::string& query) const {
  std::string url = base_url_ + "/" + url::url_encode(key_of(path), true);
  return query.empty() ? url : url + "?" + query;
}

std::string S3Address::bucket_url(const std::string& query) const {
  return base_url_ + (path_style_ ? "?" : "/?") + query;
}

net::HttpRequest S3Store::signed_request(const std::string& method, const std::string& url,
                                         const std::string& payload_sha256) const {
  net::HttpRequest request{method, url};
  request.send_token = false;  // the Hub token never goes to S3
  request.headers.push_back("x-amz-content-sha256: " + payload_sha256);
  if (access_.anonymous()) {
    if (method != "GET" && method != "HEAD") {
      throw input_error(method + " to " + location() +
                        " refused: AWS_NO_SIGN_REQUEST is set, and unsigned requests only read");
    }
    return request;
  }
  aws::Credentials credentials = credentials_->current();
  request.aws_sigv4 =
      net::HttpRequest::AwsSigV4{"aws:amz:" + access_.region + ":s3", credentials.access_key_id,
                                 credentials.secret_access_key};
  if (!credentials.session_token.empty()) {
    request.headers.push_back("x-amz-security-token: " + credentials.session_token);
  }
  return request;
}

void S3Store::check_online(const std::string& what) const {
  if (options_.offline) {
    throw operational_error(what +
                            " needs the S3 store, but NEURON_CACHE_OFFLINE is set: no request was "
                            "made; unset NEURON_CACHE_OFFLINE to go online");
  }
}

net::HttpResponse S3Store::call(net::HttpRequest request) {
  net::RetryingExchange exchange(std::move(request), options_.retry);
  http_.run({&exchange}, 1);
  return exchange.response_;
}

Error S3Store::failure(const net::HttpResponse& response, const std::string& what) const {
  s3xml::ErrorAnswer answer = s3xml::parse_error(response.body);
  std::string why = response.status == 0 ? "no answer (" + response.error + ")"
                                         : "HTTP " + std::to_string(response.status);
  if (!answer.code.empty()) why += " " + answer.code;
  if (!answer.message.empty()) why += ": " + answer.message;
  std::string text = what + " in " + location() + " failed: " + why;
  std::string todo = advice(response.status, answer.code, access_);
  bool write = what.starts_with("uploading") || what.starts_with("starting the upload") ||
               what.starts_with("writing");
  if (write && response.status == 403 && options_.sse.empty()) {
    todo +=
        "; a bucket policy that requires server-side encryption refuses unencrypted PUTs: set "
        "NEURON_CACHE_S3_SSE to AES256 or aws:kms (and NEURON_CACHE_S3_SSE_KMS_KEY_ID)";
  }
  if (!todo.empty()) text += "; " + todo;
  return operational_error(text);
}

std::vector<RemoteEntry> S3Store::list(const std::string& path, bool recursive,
                                       const std::string& /*revision*/) {
  check_online("listing " + location());
  std::string key_prefix = address_.key_of(path);
  if (!key_prefix.empty()) key_prefix += "/";
  std::vector<RemoteEntry> entries = list_objects(*this, key_prefix, recursive);
  if (recursive || !entries.empty()) return entries;
  // An empty delimiter listing is confirmed by a recursive one, whose first page is all an
  // empty folder costs: some S3-compatible servers (s3rver 3.7.1) give no CommonPrefixes for
  // keys three or more levels below the prefix, and a cache folder would look empty.
  return one_level(list_objects(*this, key_prefix, true), path);
}

namespace {

// Every object below `key_prefix` (one level of it unless `recursive`), following every page.
std::vector<RemoteEntry> list_objects(S3Store& store, const std::string& key_prefix,
                                      bool recursive) {
  std::string root = store.address().key_root();
  std::vector<RemoteEntry> entries;
  std::string token;
  net::PageBudget budget("listing " + store.location(), kMaxListedEntries / 1000 + 10,
                         store.options().timeout * kListingTimeFactor);
  do {
    // Parameters in the sorted order of SigV4's canonical query, encoded as it encodes them.
    std::string query;
    if (!token.empty()) query += "continuation-token=" + url::url_encode(token, false) + "&";
    if (!recursive) query += "delimiter=%2F&";
    query += "list-type=2&max-keys=1000&prefix=" + url::url_encode(key_prefix, false);
    net::HttpResponse response = store.call(
        store.signed_request("GET", store.address().bucket_url(query), s3::kEmptySha256));
    if (response.status != 200) throw store.failure(response, "listing " + key_prefix);
    s3xml::ListPage page = s3xml::parse_list_page(response.body);
    for (const auto& object : page.objects) {
      if (object.key.rfind(key_prefix, 0) != 0) {
        throw operational_error("the S3 store listed " + object.key.substr(0, 200) + " under " +
                                key_prefix + ", which it was not asked for");
      }
      std::string relative = object.key.substr(root.size());
      if (!clean_relative(relative)) continue;  // not a file of the layout
      entries.push_back({relative, false, object.size, object.etag, "", "", object.modified});
    }
    for (const auto& prefix : page.common_prefixes) {
      if (prefix.rfind(key_prefix, 0) != 0 || prefix.size() <= root.size() + 1) continue;
      std::string relative = prefix.substr(root.size(), prefix.size() - root.size() - 1);
      if (!clean_relative(relative)) continue;
      entries.push_back({relative, true, 0, "", "", ""});
    }
    if (entries.size() > kMaxListedEntries) {
      throw operational_error("listing " + store.location() + " gave more than " +
                              std::to_string(kMaxListedEntries) +
                              " entries: that is not a compile cache; check the s3:// URL");
    }
    if (page.truncated && page.next_token == token) {
      throw operational_error("listing " + store.location() +
                              " did not advance (the same continuation token twice)");
    }
    if (page.truncated) budget.more_after(page.objects.size() + page.common_prefixes.size());
    token = page.truncated ? page.next_token : "";
  } while (!token.empty());
  return entries;
}

}  // namespace

std::vector<RemoteEntry> S3Store::stat(const std::vector<std::string>& paths,
                                       const std::string& /*revision*/) {
  check_online("reading " + location());
  std::vector<std::unique_ptr<net::RetryingExchange>> exchanges;
  std::vector<net::Exchange*> pointers;
  for (const auto& path : paths) {
    exchanges.push_back(std::make_unique<net::RetryingExchange>(
        signed_request("HEAD", address_.object_url(path), s3::kEmptySha256), options_.retry));
    pointers.push_back(exchanges.back().get());
  }
  http_.run(pointers, options_.parallel);
  std::vector<RemoteEntry> entries;
  for (size_t i = 0; i < paths.size(); ++i) {
    const net::HttpResponse& response = exchanges[i]->response_;
    if (response.status == 404) continue;
    if (response.status != 200) throw failure(response, "reading the metadata of " + paths[i]);
    entries.push_back(s3::entry_of(paths[i], response.headers));
  }
  return entries;
}

// The version is the object's ETag, which conditional writes name (s3_conditional.h).
SmallFile S3Store::read_versioned(const std::string& path, const std::string& /*revision*/,
                                  uint64_t max_bytes) {
  check_online("reading " + path + " from " + location());
  net::RetryingExchange get(signed_request("GET", address_.object_url(path), s3::kEmptySha256),
                            options_.retry, max_bytes);
  http_.run({&get}, 1);
  const net::HttpResponse& response = get.response_;
  if (get.too_large()) {
    throw operational_error(path + " in " + location() + " is larger than the " +
                            std::to_string(max_bytes) +
                            " bytes allowed for it: it is not a file neuron-cache wrote; "
                            "remove or fix it");
  }
  if (response.status == 404) return {};
  if (response.status != 200) throw failure(response, "reading " + path);
  SmallFile file{response.body, s3xml::unquote_etag(response.headers.get("ETag").value_or(""))};
  // Both on the server's clock: their difference is the object's age, whatever this machine's
  // clock says (compile leases, fleet/lease_watch.h). A server without them gives no times.
  auto written = parse_http_date(response.headers.get("Last-Modified").value_or(""));
  auto now = parse_http_date(response.headers.get("Date").value_or(""));
  if (written && now) file.times = StoreTimes{*written, *now};
  return file;
}

bool S3Store::content_matches(const RemoteEntry& entry, std::string_view content) const {
  if (!entry.listed_sha256.empty()) return sha256_hex(content) == entry.listed_sha256;
  if (!entry.content_sha256.empty()) return sha256_hex(content) == entry.content_sha256;
  if (s3xml::is_plain_md5(entry.oid)) return md5_hex(content) == entry.oid;
  return true;
}

}  // namespace neuron_cache::storage
