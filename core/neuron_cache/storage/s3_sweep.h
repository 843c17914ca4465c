// Multipart uploads a killed writer left behind under the S3 store's prefix, aborted by a later
// push once per run (s3_sweep.cpp says when an upload counts as abandoned).
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "neuron_cache/storage/s3_xml.h"
#include "neuron_cache/storage/store.h"

namespace neuron_cache::storage {

class S3Store;

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
