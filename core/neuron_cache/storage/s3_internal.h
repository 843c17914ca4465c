// Pieces the S3 store's files share (s3_store.cpp, s3_download.cpp, s3_commit.cpp); not part of
// the library's interface.
#pragma once

#include <string>

#include "neuron_cache/net/http.h"
#include "neuron_cache/storage/store.h"

namespace neuron_cache::storage::s3 {

// sha256 of nothing: the x-amz-content-sha256 of requests without a body.
inline constexpr const char* kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
// What streamed bodies (multipart parts) sign instead of their sha256.
inline constexpr const char* kUnsignedPayload = "UNSIGNED-PAYLOAD";
// The user metadata every upload carries: the content's sha256, which ETags do not give for
// multipart objects.
inline constexpr const char* kShaMetaHeader = "x-amz-meta-sha256";

// An entry from a HEAD answer: size, ETag, and the sha256 metadata when the object has it.
RemoteEntry entry_of(const std::string& path, const net::Headers& headers);

}  // namespace neuron_cache::storage::s3
