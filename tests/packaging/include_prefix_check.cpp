// ctest include_prefix: built against the library's public include folders like any consumer.
// It compiles only when <error.h> is still glibc's (error() declared) with our headers reachable
// as "neuron_cache/...": a header of ours without the prefix would shadow the system one.
#include <error.h>

#include "neuron_cache/error.h"
#include "neuron_cache/version.h"

int main() {
  void (*system_error)(int, int, const char*, ...) = &error;
  return system_error != nullptr && neuron_cache::kVersion[0] != '\0' ? 0 : 1;
}
