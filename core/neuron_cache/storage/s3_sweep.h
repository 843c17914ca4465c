// Multipart uploads a killed writer left behind under the S3 store's prefix, aborted by a later
// push once per run (s3_sweep.cpp says when an upload counts as abandoned).
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neuron_cache/storage/s3_xml.h"
#include "neuron_cache/storage/store.h"

namespace neuron_cache::storage {

class S3Store;

// A record of each multipart upload in progress, written when it starts and deleted when it is
// completed or aborted, so that gc finds what a killed writer left on a server without
// ListMultipartUploads. Under neuron-cache's own top folder (as neuron-cache-index/ and
// neuron-cache-leases/), never in a compiler folder optimum-neuron or libneuronxla read.
inline constexpr std::string_view kUploadRecordDir = "neuron-cache-uploads";
// A record is a few hundred bytes: anything larger is not read.
inline constexpr uint64_t kMaxUploadRecordBytes = 4096;

struct UploadRecord {
  std::string path;  // what the upload writes, relative to the store's root
  std::string upload_id;
};
// "neuron-cache-uploads/<16 random hex>.json"
std::string new_upload_record_path();
// Whether `path` has the shape new_upload_record_path() gives.
bool is_upload_record_path(std::string_view path);
std::string upload_record_text(const UploadRecord& record);
// The record `text` holds. Store text, so hostile: nothing (and `why`) unless it is small, JSON
// of this format, its path plain (no "..", no empty part, printable, outside kUploadRecordDir)
// and its id of S3's characters.
std::optional<UploadRecord> parse_upload_record(std::string_view text, std::string& why);

class S3UploadSweep {
 public:
  explicit S3UploadSweep(S3Store& store) : store_(store) {}

  // Aborts the uploads begun more than a day ago and never finished; the first call only.
  // Failures are warnings in `result`: housekeeping never fails a publication.
  void abort_abandoned_uploads(CommitResult& result);

 private:
  // The uploads under the prefix begun more than a day ago, as far as the page budget reaches
  // (`stopped` then says why it stopped).
  std::vector<s3xml::PendingUpload> abandoned_uploads(std::string& stopped);

  S3Store& store_;
  std::mutex mutex_;
  bool swept_ = false;  // under mutex_
};

}  // namespace neuron_cache::storage
