// huggingface_hub's file cache (HF_HUB_CACHE, default $HF_HOME/hub), read only to spare a second
// download of what optimum-neuron's hub proxy fetched there. A repo's folder is
// models--<org>--<name>/: blobs/<id> holds each file's content once, named by its LFS sha256 (its
// git blob id when it is not LFS), and snapshots/<commit>/<path in repo> is a relative symlink to
// its blob. The proxy puts a symlink to the snapshot path where libneuronxla asked for the file
// (format spec 2.5).
//
// Nothing here is trusted: the links were written by the command, and the blob is only a
// candidate that the caller verifies against the store's listing before using it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "neuron_cache/sys/fd.h"
#include "neuron_cache/sys/safe_dir.h"

namespace neuron_cache::local {

struct HfBlob {
  sys::UniqueFd fd;  // open for reading: a regular file
  std::string id;    // its name in blobs/: the LFS sha256, or a regular file's git blob id
  uint64_t size = 0;
};

// The blob that the symlink `name` in `dir` leads to through the one chain the proxy makes:
// the link names <hub_cache>/models--<...>/snapshots/<commit>/<path>, itself a symlink to
// blobs/<id> of the same repo folder (a link straight to blobs/<id> is taken too). Each hop is
// read with readlinkat and resolved lexically, never by the kernel; every folder below
// `hub_cache` is opened without following symlinks and the blob with O_NOFOLLOW. Nothing when
// the chain has another shape, leaves `hub_cache`, or ends at anything but a regular file (a
// symlink, a FIFO, a folder). `hub_cache` itself may be reached through symlinks: the user chose
// it. Never throws for what the links hold.
std::optional<HfBlob> open_hf_blob(const std::filesystem::path& hub_cache, const sys::SafeDir& dir,
                                   const std::string& name);

}  // namespace neuron_cache::local
