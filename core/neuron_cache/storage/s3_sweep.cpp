// Multipart uploads a killed writer left behind: S3 keeps (and bills) their parts until they are
// aborted. A writer aborts its own failed uploads (s3_commit.cpp); what a killed one left is
// aborted by a later push, once it is old enough that no live writer can own it. The bucket's
// lifecycle rule (AbortIncompleteMultipartUpload) removes what no later run sweeps.
#include <chrono>
#include <memory>

#include "neuron_cache/format/url.h"
#include "neuron_cache/format/wording.h"
#include "neuron_cache/net/pages.h"
#include "neuron_cache/net/retry.h"
#include "neuron_cache/storage/s3_internal.h"
#include "neuron_cache/storage/s3_store.h"
#include "neuron_cache/storage/s3_sweep.h"

namespace neuron_cache::storage {
namespace {

// An upload begun this long ago belongs to a writer that is gone: the largest NEFF goes up in
// minutes, and another machine's upload in progress is always younger.
constexpr std::chrono::hours kAbandonedUploadAge{24};
// Pages of in-progress uploads (1,000 each) read per run at most: the sweep is housekeeping and
// must stay cheap; what is beyond them waits for the next run or the lifecycle rule.
constexpr size_t kMaxUploadPages = 10;
// The listing may take this many times the store's timeout in all.
constexpr int kUploadListingTimeFactor = 4;

}  // namespace

std::vector<s3xml::PendingUpload> S3UploadSweep::abandoned_uploads(std::string& stopped) {
  std::string root = store_.address().key_root();
  int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  int64_t before =
      now - std::chrono::duration_cast<std::chrono::seconds>(kAbandonedUploadAge).count();
  net::PageBudget budget("listing the multipart uploads in " + store_.location(), kMaxUploadPages,
                         store_.options().timeout * kUploadListingTimeFactor);
  std::vector<s3xml::PendingUpload> old;
  std::string key_marker, id_marker;
  while (true) {
    // Parameters in the sorted order of SigV4's canonical query.
    std::string query;
    if (!key_marker.empty()) query += "key-marker=" + url::url_encode(key_marker, false) + "&";
    query += "max-uploads=1000&prefix=" + url::url_encode(root, false) + "&";
    if (!id_marker.empty()) query += "upload-id-marker=" + url::url_encode(id_marker, false) + "&";
    query += "uploads=";
    net::HttpResponse response = store_.call(
        store_.signed_request("GET", store_.address().bucket_url(query), s3::kEmptySha256));
    // A store without the listing (s3rver: 501 NotImplemented) leaves it to its lifecycle rule.
    if (response.status == 501) return {};
    if (response.status != 200) throw store_.failure(response, "listing the multipart uploads");
    s3xml::UploadsPage page = s3xml::parse_uploads_page(response.body);
    for (auto& upload : page.uploads) {
      // Never abort what the listing was not asked for, nor an upload of unknown age.
      if (upload.key.rfind(root, 0) != 0 || !upload.initiated) continue;
      if (*upload.initiated < before) old.push_back(std::move(upload));
    }
    if (!page.truncated) return old;
    if (page.next_key_marker == key_marker && page.next_upload_id_marker == id_marker) {
      throw operational_error("listing the multipart uploads in " + store_.location() +
                              " did not advance (the same markers twice)");
    }
    try {
      budget.more_after(page.uploads.size());
    } catch (const Error& error) {
      stopped = error.what();  // what was found is aborted; a later run reads further
      return old;
    }
    key_marker = page.next_key_marker;
    id_marker = page.next_upload_id_marker;
  }
}

void S3UploadSweep::abort_abandoned_uploads(CommitResult& result) {
  {
    std::lock_guard lock(mutex_);
    if (swept_) return;
    swept_ = true;
  }
  const std::string lifecycle =
      "; they stay until the bucket's lifecycle rule AbortIncompleteMultipartUpload removes them";
  std::vector<s3xml::PendingUpload> old;
  std::string stopped;
  try {
    old = abandoned_uploads(stopped);
  } catch (const Error& error) {
    result.warnings.push_back(
        "could not look for abandoned multipart uploads: " + std::string(error.what()) + lifecycle);
    return;
  }
  if (!stopped.empty()) {
    result.warnings.push_back("looking for abandoned multipart uploads: " + stopped +
                              "; the next push looks further");
  }
  std::string root = store_.address().key_root();
  std::vector<std::unique_ptr<net::RetryingExchange>> aborts;
  std::vector<net::Exchange*> pointers;
  for (const auto& upload : old) {
    std::string url = store_.address().object_url(
        upload.key.substr(root.size()), "uploadId=" + url::url_encode(upload.upload_id, false));
    aborts.push_back(std::make_unique<net::RetryingExchange>(
        store_.signed_request("DELETE", url, s3::kEmptySha256), store_.options().retry));
    pointers.push_back(aborts.back().get());
  }
  store_.http().run(pointers, store_.options().parallel);
  size_t failed = 0;
  std::string why;
  for (const auto& abort : aborts) {
    long status = abort->response_.status;
    // 404 NoSuchUpload: another run aborted or completed it meanwhile.
    if ((status >= 200 && status < 300) || status == 404) {
      ++result.uploads_aborted;
    } else if (failed++ == 0) {
      why = store_.failure(abort->response_, "aborting an abandoned multipart upload").what();
    }
  }
  if (failed > 0) {
    result.warnings.push_back(count_of(failed, "abandoned multipart upload") +
                              " could not be aborted (" + why + ")" + lifecycle);
  }
}

}  // namespace neuron_cache::storage
