#include "neuron_cache/compile/work_area.h"

#include <climits>
#include <cstdlib>
#include <random>

#include "neuron_cache/format/layout.h"

namespace neuron_cache::compile {

bool is_compiler_dir(const sys::DirEntry& item) {
  return item.type == sys::NodeType::Directory &&
         layout::compiler_version_of(item.name).has_value();
}

}  // namespace neuron_cache::compile
