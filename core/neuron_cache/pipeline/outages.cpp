#include "neuron_cache/pipeline/outages.h"

namespace neuron_cache::pipeline {
namespace {

std::string host_of(const std::string& why) {
  for (const char* tail : {" could not be reached", " kept failing"}) {
    if (auto at = why.find(tail); at != std::string::npos) return why.substr(0, at);
  }
  return why;
}

std::string reason_of(const std::string& why) {
  auto open = why.find('(');
  auto close = why.find(')', open == std::string::npos ? 0 : open);
  if (open == std::string::npos || close == std::string::npos) return "";
  return why.substr(open, close - open + 1);
}

}  // namespace

std::string Outages::brief_of(const Outage& outage) {
  return outage.host + " could not be reached (see the warning above)";
}

std::string Outages::announce(const std::string& why, const std::string& fallback,
                              const std::string& advice, bool leases_ask_again) {
  if (why.empty()) return "";
  for (const auto& outage : announced_) {
    if (outage.why == why) return "";
  }
  announced_.push_back({why, host_of(why), reason_of(why)});
  // Compile leases ask again (fleet.md): other machines wait for what this one holds or pushes.
  std::string asked = leases_ask_again
                          ? "it is asked again in this run only for the compile leases and the "
                            "push other machines wait for"
                          : "nothing more is asked of it in this run";
  return why + ": " + asked + "; " + fallback + "; " + advice;
}

const Outages::Outage* Outages::find(const std::string& detail) const {
  for (const auto& outage : announced_) {
    if (detail.find(outage.why) != std::string::npos) return &outage;
    if (detail.find(brief_of(outage)) != std::string::npos) return &outage;
    if (!outage.reason.empty() && detail.find("no answer " + outage.reason) != std::string::npos)
      return &outage;
  }
  return nullptr;
}

bool Outages::caused(const std::string& detail) const {
  return find(detail) != nullptr;
}

std::string Outages::brief(const std::string& detail) const {
  const Outage* outage = find(detail);
  return outage ? brief_of(*outage) : detail;
}

}  // namespace neuron_cache::pipeline
