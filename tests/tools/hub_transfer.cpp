// hub-transfer: neuron-cache's Hub client as a tiny command, so the JS cross-check can prove
// that the official client and ours read each other's uploads byte for byte.
//   HF_ENDPOINT=... HF_TOKEN=... hub-transfer upload REPO DIR       (every file of DIR, one commit)
//   HF_ENDPOINT=... HF_TOKEN=... hub-transfer download REPO PATH OUT
// The token comes from the environment only, never from the command line.
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "neuron_cache/config/settings.h"
#include "neuron_cache/hub/client.h"
#include "neuron_cache/sys/safe_dir.h"

namespace {

using namespace neuron_cache;

int upload(hub::HubClient& client, const std::string& repo, const std::filesystem::path& dir) {
  std::vector<hub::CommitOperation> operations;
  for (const auto& item : std::filesystem::recursive_directory_iterator(dir)) {
    if (!item.is_regular_file()) continue;
    operations.push_back({hub::CommitOperation::Kind::Add,
                          std::filesystem::relative(item.path(), dir).generic_string(),
                          item.path()});
  }
  hub::CommitResult result =
      client.commit(repo, operations, "Upload from neuron-cache", std::nullopt);
  std::cout << "committed " << result.commit_oid << ": " << result.regular_files << " regular, "
            << result.lfs_uploaded << " LFS\n";
  return result.committed ? 0 : 1;
}

int download(hub::HubClient& client, const std::string& repo, const std::string& path,
             const std::string& out) {
  std::vector<hub::TreeEntry> info = client.paths_info(repo, {path});
  if (info.empty()) {
    std::cerr << path << " is not in " << repo << "\n";
    return 1;
  }
  int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::cerr << "cannot write " << out << "\n";
    return 1;
  }
  sys::UniqueFd guard(fd);
  std::vector<hub::DownloadRequest> requests{{path, fd, info[0]}};
  hub::DownloadResult result = client.download(repo, "main", requests)[0];
  if (!result.ok) std::cerr << result.error << "\n";
  return result.ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    config::Settings settings = config::Settings::resolve(config::Environment::from_process(), {});
    hub::HubClient client(hub::HubClient::options_from(settings));
    if (args.size() == 3 && args[0] == "upload") return upload(client, args[1], args[2]);
    if (args.size() == 4 && args[0] == "download") {
      return download(client, args[1], args[2], args[3]);
    }
    std::cerr << "usage: hub-transfer upload REPO DIR | hub-transfer download REPO PATH OUT\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "hub-transfer: " << error.what() << "\n";
    return 1;
  }
}
