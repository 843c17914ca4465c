// One-commit uploads: preupload -> LFS batch -> PUT or multipart -> NDJSON commit.
#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <thread>

#include "neuron_cache/format/digest.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/format/pyjson.h"
#include "neuron_cache/format/url.h"
#include "neuron_cache/hub/client.h"
#include "neuron_cache/log/log.h"
#include "neuron_cache/net/answer.h"
#include "neuron_cache/net/in_transit.h"
#include "neuron_cache/net/meter.h"
#include "neuron_cache/net/retry.h"
#include "neuron_cache/sys/fd.h"

namespace neuron_cache::hub {
namespace {

using nlohmann::json;

constexpr size_t kPreuploadBatch = 256;  // the Hub's limit per preupload call
constexpr size_t kLfsBatch = 256;
constexpr size_t kSampleBytes = 512;

struct LocalFile {
  std::string path_in_repo;
  std::filesystem::path local;
  uint64_t size = 0;
  std::string sha256;
  std::string git_oid;
  std::string sample;
  std::string mode;  // "regular" or "lfs", as the Hub decides
};

std::string base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

sys::UniqueFd open_local(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw operational_error("cannot read " + path.string() + " to upload it");
  return sys::UniqueFd(fd);
}

// Reads the file once: size, sha256 (LFS oid), git blob id (regular oid) and the 512-byte sample.
LocalFile describe(const CommitOperation& op) {
  LocalFile file;
  file.path_in_repo = op.path_in_repo;
  file.local = op.local;
  sys::UniqueFd fd = open_local(op.local);
  file.size = static_cast<uint64_t>(lseek(fd.get(), 0, SEEK_END));
  Hasher sha256(HashAlgorithm::Sha256);
  Hasher git(HashAlgorithm::Sha1);
  git.update(git_blob_header(file.size));
  std::string buffer(1 << 20, '\0');
  uint64_t offset = 0;
  while (true) {
    ssize_t n = pread(fd.get(), buffer.data(), buffer.size(), static_cast<off_t>(offset));
    if (n < 0) throw operational_error("cannot read " + op.local.string());
    if (n == 0) break;
    std::string_view chunk(buffer.data(), static_cast<size_t>(n));
    if (file.sample.size() < kSampleBytes) {
      file.sample += chunk.substr(0, kSampleBytes - file.sample.size());
    }
    sha256.update(chunk);
    git.update(chunk);
    offset += static_cast<uint64_t>(n);
  }
  file.sha256 = sha256.hex_digest();
  file.git_oid = git.hex_digest();
  return file;
}

// PUT of a whole file, or of one part of a multipart upload, to a presigned URL (no token).
class PutExchange : public net::Exchange {
 public:
  PutExchange(std::string url, int fd, uint64_t offset, uint64_t length,
              const net::RetryPolicy& policy)
      : url_(std::move(url)), fd_(fd), offset_(offset), length_(length), policy_(policy) {}
  net::HttpRequest request() override {
    net::HttpRequest r{"PUT", url_};
    r.send_token = false;  // the URL is signed; storage refuses (or logs) a second credential
    r.upload_fd = fd_;
    r.upload_offset = offset_;
    r.upload_length = length_;
    return r;
  }
  std::optional<std::chrono::milliseconds> on_complete(const net::HttpResponse& response) override {
    response_ = response;
    return net::retry_delay(response, ++attempts_, policy_);
  }
  net::HttpResponse response_;

 private:
  std::string url_;
  int fd_;
  uint64_t offset_, length_;
  net::RetryPolicy policy_;
  int attempts_ = 0;
};

bool ok(const net::HttpResponse& r) {
  return r.status >= 200 && r.status < 300;
}

}  // namespace

namespace {

struct UploadPlan {
  std::vector<LocalFile> files;  // to put in the commit
  std::vector<std::string> deletions;
  size_t unchanged = 0;
};

// The preupload answer's files by path; each checked for the fields the upload reads.
std::map<std::string, json> preupload_answers(const json& answer) {
  const json* files = net::member(net::object_in(answer, "the answer"), "files");
  if (files == nullptr) throw net::BadAnswer("it has no \"files\"");
  std::map<std::string, json> by_path;
  for (const auto& item : net::array_in(*files, "\"files\"")) {
    net::object_in(item, "a file");
    net::flag_in(item, "shouldIgnore", false);
    net::text_in(item, "uploadMode", "regular");
    net::text_in(item, "oid");
    by_path[net::text_in(item, "path")] = item;
  }
  return by_path;
}

json preupload_body(const std::vector<LocalFile>& files, size_t start, size_t end) {
  json list = json::array();
  for (size_t i = start; i < end; ++i) {
    list.push_back({{"path", files[i].path_in_repo},
                    {"size", files[i].size},
                    {"sample", base64(files[i].sample)}});
  }
  return {{"files", list}};
}

}  // namespace

namespace {

json lfs_batch_body(const std::vector<LocalFile*>& files, const std::string& revision) {
  json objects = json::array();
  for (const LocalFile* file : files)
    objects.push_back({{"oid", file->sha256}, {"size", file->size}});
  return {{"operation", "upload"},
          {"transfers", {"basic", "multipart"}},
          {"hash_algo", "sha256"},
          {"ref", {{"name", revision}}},
          {"objects", objects}};
}

// The uploads one LFS object needs: a single PUT, or the parts of a multipart upload.
struct LfsUpload {
  LocalFile* file = nullptr;
  sys::UniqueFd fd;
  std::vector<std::unique_ptr<PutExchange>> puts;
  std::string completion_url;  // multipart only
};

// The part URLs of a multipart upload: the header's numbered keys "1", "2", ...
std::map<long, std::string> part_urls(const json& header) {
  std::map<long, std::string> parts;
  for (const auto& [key, value] : header.items()) {
    if (key.empty() || key.size() > 9 || key.find_first_not_of("0123456789") != std::string::npos)
      continue;
    if (!value.is_string()) throw net::BadAnswer("the URL of part " + key + " is not a string");
    parts[std::stol(key)] = value.get<std::string>();
  }
  return parts;
}

uint64_t chunk_size_of(const json& header) {
  std::string text = net::text_in(header, "chunk_size");
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
    throw net::BadAnswer("\"chunk_size\" is not a number of bytes");
  return std::stoull(text);
}

// Throws BadAnswer when `upload` (an LFS batch "upload" action) is not one.
LfsUpload plan_object(LocalFile* file, const json& upload, const net::RetryPolicy& policy) {
  LfsUpload plan;
  plan.file = file;
  net::object_in(upload, "the upload action of " + file->path_in_repo);
  std::string href = net::text_in(upload, "href");
  if (href.empty())
    throw net::BadAnswer("the upload action of " + file->path_in_repo + " has no href");
  const json* header = net::member(upload, "header");
  if (header) net::object_in(*header, "the upload header of " + file->path_in_repo);
  if (!header || !header->contains("chunk_size")) {
    plan.fd = open_local(file->local);
    plan.puts.push_back(std::make_unique<PutExchange>(href, plan.fd.get(), 0, file->size, policy));
    return plan;
  }
  uint64_t chunk = chunk_size_of(*header);
  std::map<long, std::string> parts = part_urls(*header);
  if (chunk == 0 || parts.size() != (file->size + chunk - 1) / chunk ||
      (!parts.empty() &&
       (parts.begin()->first != 1 || parts.rbegin()->first != static_cast<long>(parts.size())))) {
    throw operational_error("the Hub asked for a multipart upload of " + file->path_in_repo +
                            " with an inconsistent number of parts");
  }
  plan.fd = open_local(file->local);
  for (const auto& [number, url] : parts) {
    uint64_t offset = static_cast<uint64_t>(number - 1) * chunk;
    plan.puts.push_back(std::make_unique<PutExchange>(
        url, plan.fd.get(), offset, std::min(chunk, file->size - offset), policy));
  }
  plan.completion_url = href;
  return plan;
}

// An upload whose bytes storage refused as not those announced (content_refused): sent again.
struct ContentRefused : Error {
  explicit ContentRefused(const Error& error) : Error(error) {}
};

void check_answer(const net::HttpResponse& response, const std::string& what) {
  if (ok(response)) return;
  Error error = hub_error(response, what, "");
  if (content_refused(response)) throw ContentRefused(error);
  throw error;
}

void check_put(const PutExchange& put, const LocalFile& file) {
  check_answer(put.response_, "uploading " + file.path_in_repo + " to LFS storage");
}

void complete_upload(HubClient& client, LfsUpload& upload) {
  const LocalFile& file = *upload.file;
  for (const auto& put : upload.puts) check_put(*put, file);
  if (!upload.completion_url.empty()) {
    json parts = json::array();
    for (size_t i = 0; i < upload.puts.size(); ++i) {
      auto etag = upload.puts[i]->response_.headers.get("ETag");
      if (!etag || etag->empty()) {
        throw operational_error("LFS storage gave no ETag for part " + std::to_string(i + 1) +
                                " of " + file.path_in_repo + ": retry the upload");
      }
      parts.push_back({{"partNumber", i + 1}, {"etag", *etag}});
    }
    net::HttpRequest request{
        "POST",
        upload.completion_url,
        {"Accept: application/vnd.git-lfs+json", "Content-Type: application/vnd.git-lfs+json"},
        json{{"oid", file.sha256}, {"parts", parts}}.dump()};
    request.send_token = false;  // signed like the part URLs, as huggingface_hub sends it
    std::string what = "completing the upload of " + file.path_in_repo;
    check_answer(client.call(request, what), what);
  }
  // The LFS `verify` action is not called (one request per object, as the official JS client
  // also skips it): the commit itself is refused when an lfsFile's object is not stored.
}

// What the LFS batch answer says of one object: nothing to send, or the uploads to make.
void plan_upload(const json& object, std::map<std::string, LocalFile*>& by_oid,
                 const net::RetryPolicy& policy, std::vector<LfsUpload>& uploads,
                 CommitResult& result) {
  auto known = by_oid.find(net::text_in(object, "oid"));
  if (known == by_oid.end()) return;
  LocalFile* file = known->second;
  if (const json* error = net::member(object, "error")) {
    std::string why =
        error->is_object()
            ? printable(net::text_in(*error, "message", "no reason given"), kPrintableMessage)
            : "no reason given";
    throw operational_error("LFS storage refused " + file->path_in_repo + ": " + why);
  }
  const json* actions = net::member(object, "actions");
  const json* upload =
      actions
          ? net::member(net::object_in(*actions, "the actions of " + file->path_in_repo), "upload")
          : nullptr;
  if (upload == nullptr) {
    ++result.lfs_already_stored;  // the Hub has these bytes already: nothing to send
    return;
  }
  uploads.push_back(plan_object(file, *upload, policy));
}

std::vector<LfsUpload> request_lfs_uploads(HubClient& client, const std::string& repo,
                                           const std::string& revision,
                                           std::vector<LocalFile*>& lfs, CommitResult& result) {
  std::vector<LfsUpload> uploads;
  for (size_t start = 0; start < lfs.size(); start += kLfsBatch) {
    std::vector<LocalFile*> batch(
        lfs.begin() + static_cast<long>(start),
        lfs.begin() + static_cast<long>(std::min(lfs.size(), start + kLfsBatch)));
    net::HttpRequest request{
        "POST",
        client.options().endpoint + "/" + repo + ".git/info/lfs/objects/batch",
        {"Accept: application/vnd.git-lfs+json", "Content-Type: application/vnd.git-lfs+json"},
        lfs_batch_body(batch, revision).dump()};
    net::HttpResponse response = client.call(request, "requesting LFS uploads for " + repo);
    if (!ok(response))
      throw hub_error(response, "requesting LFS uploads for " + repo, repo, client.advice());
    std::map<std::string, LocalFile*> by_oid;
    for (LocalFile* file : batch) by_oid[file->sha256] = file;
    net::read_answer(
        response, net::request_name(request), "an LFS batch answer", [&](const json& answer) {
          const json* objects = net::member(net::object_in(answer, "the answer"), "objects");
          if (objects == nullptr) throw net::BadAnswer("it has no \"objects\"");
          for (const auto& object : net::array_in(*objects, "\"objects\"")) {
            plan_upload(net::object_in(object, "an object"), by_oid, client.options().retry,
                        uploads, result);
          }
        });
  }
  return uploads;
}

// What the progress display will see sent: the LFS objects the Hub lacks (streamed by the
// engine) and the regular files, which travel inside the commit request.
void expect_sent(const std::vector<LocalFile>& files, const std::vector<LfsUpload>& uploads) {
  uint64_t bytes = 0, count = uploads.size();
  for (const auto& upload : uploads) bytes += upload.file->size;
  for (const auto& file : files) {
    if (file.mode == "lfs") continue;
    bytes += file.size;
    ++count;
  }
  net::meter().expect(bytes, count);
}

// The regular files went with the commit: the display counts them once it is made.
void count_inline_sent(const std::vector<LocalFile>& files) {
  for (const auto& file : files) {
    if (file.mode == "lfs") continue;
    net::meter().add_bytes(file.size);
    net::meter().add_file();
  }
}

// Sends the uploads' bytes and completes them; returns the files whose content was refused.
std::vector<LocalFile*> send(HubClient& client, std::vector<LfsUpload>& uploads,
                             CommitResult& result, std::string& refusal) {
  std::vector<net::Exchange*> puts;
  for (auto& upload : uploads) {
    for (auto& put : upload.puts) puts.push_back(put.get());
  }
  client.http().run(puts, client.options().parallel);
  std::vector<LocalFile*> refused;
  for (auto& upload : uploads) {
    try {
      complete_upload(client, upload);
    } catch (const ContentRefused& error) {
      refused.push_back(upload.file);
      refusal = error.what();
      continue;
    }
    net::meter().add_file();
    ++result.lfs_uploaded;
    result.bytes_uploaded += upload.file->size;
  }
  return refused;
}

// A file refused as changed in transit is read again before it is sent again: if it changed
// here, the push must not go on with the hashes announced for it.
void require_unchanged(const LocalFile& file) {
  LocalFile now = describe({CommitOperation::Kind::Add, file.path_in_repo, file.local});
  if (now.size == file.size && now.sha256 == file.sha256) return;
  throw operational_error(file.local.string() + " changed while it was being uploaded as " +
                          file.path_in_repo +
                          ": something writes the local cache during the push; push again once "
                          "it is done");
}

void upload_lfs_objects(HubClient& client, const std::string& repo, const std::string& revision,
                        std::vector<LocalFile>& files, CommitResult& result) {
  std::vector<LocalFile*> lfs;
  for (auto& file : files) {
    if (file.mode == "lfs") lfs.push_back(&file);
  }
  std::vector<LfsUpload> uploads = request_lfs_uploads(client, repo, revision, lfs, result);
  expect_sent(files, uploads);
  std::string refusal;
  std::vector<LocalFile*> refused = send(client, uploads, result, refusal);
  if (refused.empty()) return;
  // Bytes hashed here and refused there changed on their way: sent once more, to fresh URLs
  // (net/in_transit.h).
  log::debug("hub", "sending " + std::to_string(refused.size()) +
                        " LFS object(s) again after storage refused their content: " + refusal);
  uint64_t bytes = 0;
  for (LocalFile* file : refused) {
    require_unchanged(*file);
    bytes += file->size;
  }
  net::meter().expect(bytes, refused.size());
  std::vector<LfsUpload> again = request_lfs_uploads(client, repo, revision, refused, result);
  refused = send(client, again, result, refusal);
  if (refused.empty()) return;
  throw operational_error(net::changed_in_transit_twice(refusal));
}

std::string read_whole(const std::filesystem::path& path, uint64_t size) {
  sys::UniqueFd fd = open_local(path);
  std::string content(size, '\0');
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = pread(fd.get(), content.data() + done, size - done, static_cast<off_t>(done));
    if (n <= 0) throw operational_error("cannot read " + path.string() + " (did it change?)");
    done += static_cast<uint64_t>(n);
  }
  return content;
}

std::string commit_payload(const std::vector<LocalFile>& files,
                           const std::vector<std::string>& deletions, const std::string& message,
                           const std::optional<std::string>& parent, CommitResult& result) {
  json header = {{"summary", message}, {"description", ""}};
  if (parent) header["parentCommit"] = *parent;
  std::string ndjson = json{{"key", "header"}, {"value", header}}.dump() + "\n";
  for (const auto& file : files) {
    if (file.mode == "lfs") {
      ndjson += json{{"key", "lfsFile"},
                     {"value",
                      {{"path", file.path_in_repo},
                       {"algo", "sha256"},
                       {"oid", file.sha256},
                       {"size", file.size}}}}
                    .dump() +
                "\n";
      continue;
    }
    ndjson += json{{"key", "file"},
                   {"value",
                    {{"path", file.path_in_repo},
                     {"content", base64(read_whole(file.local, file.size))},
                     {"encoding", "base64"}}}}
                  .dump() +
              "\n";
    ++result.regular_files;
    result.bytes_uploaded += file.size;
  }
  for (const auto& path : deletions) {
    ndjson += json{{"key", "deletedFile"}, {"value", {{"path", path}}}}.dump() + "\n";
    ++result.deleted;
  }
  return ndjson;
}

// Whether the repo at `head` holds every file of the commit as it was sent, and none it deletes.
bool holds_commit(HubClient& client, const std::string& repo, const std::string& head,
                  const std::vector<LocalFile>& files, const std::vector<std::string>& deletions) {
  std::vector<std::string> paths = deletions;
  for (const auto& file : files) paths.push_back(file.path_in_repo);
  std::map<std::string, TreeEntry> there;
  for (auto& entry : client.paths_info(repo, paths, head)) there[entry.path] = std::move(entry);
  for (const auto& path : deletions) {
    if (there.count(path)) return false;
  }
  for (const auto& file : files) {
    auto it = there.find(file.path_in_repo);
    if (it == there.end()) return false;
    bool same =
        file.mode == "lfs" ? it->second.lfs_sha256 == file.sha256 : it->second.oid == file.git_oid;
    if (!same) return false;
  }
  return true;
}

// After a commit whose answer was lost (no answer, 5xx): the head that holds it, or nothing
// with `known` saying whether the head was read (then it surely did not land) or not.
// The Hub may have made the commit anyway (a proxy gave up first), or make it a little later, so
// the head is read for up to the Hub timeout before the commit is called failed.
constexpr int kMaxCommitAttempts = 3;

struct Landing {
  std::optional<std::string> head;
  bool known = false;
};

Landing landed_commit(HubClient& client, const std::string& repo, const std::string& revision,
                      const std::vector<LocalFile>& files,
                      const std::vector<std::string>& deletions,
                      const std::optional<std::string>& parent) {
  auto deadline = std::chrono::steady_clock::now() + client.options().hub_timeout;
  auto pause = std::min<std::chrono::milliseconds>(std::chrono::milliseconds(1000),
                                                   client.options().hub_timeout / 4);
  while (true) {
    try {
      std::string head = client.repo_info(repo, revision).sha;
      bool moved = !parent || head != *parent;
      if (moved && holds_commit(client, repo, head, files, deletions)) return {head, true};
    } catch (const Error&) {
      return {};  // the head cannot be read: whether it landed is unknown
    }
    if (std::chrono::steady_clock::now() + pause >= deadline) return {std::nullopt, true};
    std::this_thread::sleep_for(pause);
  }
}

// Whether `text` is a git commit id: 40 lowercase hex digits.
bool is_commit_id(const std::string& text) {
  return text.size() == 40 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

CommitResult post_commit(HubClient& client, const std::string& repo, const std::string& revision,
                         const std::vector<LocalFile>& files,
                         const std::vector<std::string>& deletions, const std::string& message,
                         const std::optional<std::string>& parent, CommitResult result) {
  std::string rev = url::url_encode(revision, false);
  net::HttpRequest request{"POST",
                           client.api("/api/models/" + repo + "/commit/" + rev),
                           {"Content-Type: application/x-ndjson"},
                           commit_payload(files, deletions, message, parent, result)};
  request.answer_timeout = client.options().hub_timeout * ClientOptions::kCommitAnswerFactor;
  request.tells_reachability = false;  // a slow commit is not a Hub that is down
  // Never retried blindly: a lost answer plus a retry could make a duplicate commit. It is
  // retried (after Retry-After or the backoff) only once the head was read and does not hold it,
  // or on 429, which the Hub answers before doing anything.
  net::HttpResponse response;
  for (int attempt = 1;; ++attempt) {
    response = client.http().perform(request);
    if (response.status == 409 || response.status == 412) {
      throw CommitConflict("committing to " + repo + " failed: " + std::to_string(response.status) +
                           " " + server_message(response) + "; another commit landed meanwhile");
    }
    if (response.status != 0 && response.status < 500 && response.status != 429) break;
    Error failed = hub_error(response, "committing to " + repo, repo, client.advice());
    Landing landing = response.status == 429
                          ? Landing{std::nullopt, true}
                          : landed_commit(client, repo, revision, files, deletions, parent);
    if (landing.head) {
      count_inline_sent(files);
      result.committed = true;
      result.commit_oid = *landing.head;
      result.landed_unanswered = std::string(failed.what()) + "; but the head " +
                                 landing.head->substr(0, 12) +
                                 " holds every file of the commit: it landed";
      return result;
    }
    // Each lost answer costs a read of the head for up to the timeout: three attempts at most.
    // A 429 costs no read (the Hub refused before doing anything): the retry policy bounds those.
    bool may_retry = response.status == 429 || attempt < kMaxCommitAttempts;
    auto delay = landing.known && may_retry
                     ? net::retry_delay(response, attempt, client.options().retry)
                     : std::nullopt;
    if (!delay) {
      throw operational_error(std::string(failed.what()) + " (" + std::to_string(attempt) +
                              (attempt == 1 ? " attempt" : " attempts") + "; read afterwards, " +
                              (landing.known ? "the head of " + repo + " does not hold the commit"
                                             : "the head of " + repo + " could not be read") +
                              ")");
    }
    std::this_thread::sleep_for(*delay);
  }
  if (!ok(response)) throw hub_error(response, "committing to " + repo, repo, client.advice());
  json answer = pyjson::parse_or_nothing(response.body, pyjson::kApiAnswer).value_or(nullptr);
  const json* oid = answer.is_object() ? net::member(answer, "commitOid") : nullptr;
  if (oid == nullptr || !oid->is_string() || oid->get<std::string>().empty()) {
    // Only the Hub's answer with the new commit's id proves the commit was made.
    throw operational_error(net::request_name(request) + " failed: committing to " + repo +
                            " got an answer (HTTP " + std::to_string(response.status) +
                            ") with no commit id, so no commit can be assumed; check HF_ENDPOINT "
                            "points to the Hub and run the command again");
  }
  if (!is_commit_id(oid->get<std::string>())) {
    // A commit id is git's: 40 hex digits. Anything else ("../../x") proves no commit either.
    std::string quoted = oid->dump();  // escaped: the answer is not ours to print raw
    if (quoted.size() > 80) quoted = quoted.substr(0, 77) + "...";
    throw operational_error(net::request_name(request) + " failed: committing to " + repo +
                            " got an answer (HTTP " + std::to_string(response.status) +
                            ") whose commit id " + quoted +
                            " is not 40 hex digits, so no commit can be assumed; check "
                            "HF_ENDPOINT points to the Hub and run the command again");
  }
  result.committed = true;
  result.commit_oid = oid->get<std::string>();
  count_inline_sent(files);
  // The commit was made: a strange URL beside its id is not worth failing for.
  const json* url = net::member(answer, "commitUrl");
  result.commit_url = url && url->is_string() ? url->get<std::string>() : "";
  return result;
}

}  // namespace

CommitResult HubClient::commit(const std::string& repo,
                               const std::vector<CommitOperation>& operations,
                               const std::string& message,
                               const std::optional<std::string>& parent_commit,
                               const std::string& revision) {
  check_repo(repo);
  check_online("uploading to " + repo);
  if (!options_.token.empty()) require_write_token("uploading to " + repo);
  std::string rev = url::url_encode(revision, false);
  UploadPlan plan;
  std::vector<LocalFile> candidates;
  for (const auto& op : operations) {
    if (op.kind == CommitOperation::Kind::Delete) {
      plan.deletions.push_back(op.path_in_repo);
    } else {
      candidates.push_back(describe(op));
    }
  }
  // Preupload: the Hub decides regular or LFS, and tells which files it already has.
  for (size_t start = 0; start < candidates.size(); start += kPreuploadBatch) {
    size_t end = std::min(candidates.size(), start + kPreuploadBatch);
    net::HttpRequest request{"POST",
                             api("/api/models/" + repo + "/preupload/" + rev),
                             {"Content-Type: application/json"},
                             preupload_body(candidates, start, end).dump()};
    net::HttpResponse response = call(request, "preparing the upload to " + repo);
    if (!ok(response)) throw hub_error(response, "preparing the upload to " + repo, repo, advice());
    std::map<std::string, json> answers = net::read_answer(response, net::request_name(request),
                                                           "a preupload answer", preupload_answers);
    for (size_t i = start; i < end; ++i) {
      LocalFile& file = candidates[i];
      const json& answer = answers[file.path_in_repo];
      if (answer.is_object() && net::flag_in(answer, "shouldIgnore", false)) continue;
      file.mode = answer.is_object() ? net::text_in(answer, "uploadMode", "regular") : "regular";
      std::string remote = answer.is_object() ? net::text_in(answer, "oid") : "";
      std::string local = file.mode == "lfs" ? file.sha256 : file.git_oid;
      if (!remote.empty() && remote == local) {
        ++plan.unchanged;
        continue;
      }
      plan.files.push_back(std::move(file));
    }
  }
  CommitResult result;
  result.unchanged = plan.unchanged;
  if (plan.files.empty() && plan.deletions.empty()) return result;
  upload_lfs_objects(*this, repo, revision, plan.files, result);
  return post_commit(*this, repo, revision, plan.files, plan.deletions, message, parent_commit,
                     result);
}

}  // namespace neuron_cache::hub
