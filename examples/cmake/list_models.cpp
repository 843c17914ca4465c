// Prints the folder of each linked model configuration and how many compiled graphs (model.neff)
// it holds: the folder is what NEURON_COMPILE_CACHE_URL would point at to run the model.
#include <cstdio>
#include <filesystem>

namespace fs = std::filesystem;

static void show(const char* name, const char* dir) {
  int graphs = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    if (it->path().filename() == "model.neff") ++graphs;
  }
  std::printf("%s: %s (%d model.neff)\n", name, dir, graphs);
}

int main() {
#ifdef NEURON_CACHE_ARTIFACTS_LLAMA3_8B_CHAT
  show("llama3-8b-chat", NEURON_CACHE_ARTIFACTS_LLAMA3_8B_CHAT);
#endif
#ifdef NEURON_CACHE_ARTIFACTS_QWEN2_5_7B_TRN2
  show("qwen2.5-7b-trn2", NEURON_CACHE_ARTIFACTS_QWEN2_5_7B_TRN2);
#endif
  return 0;
}
