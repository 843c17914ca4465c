#include "neuron_cache/storage/store.h"

namespace neuron_cache::storage {

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::Hub:
      return "hub";
    case Kind::S3:
      return "s3";
    case Kind::Folder:
      return "folder";
  }
  return "unknown";
}

}  // namespace neuron_cache::storage
