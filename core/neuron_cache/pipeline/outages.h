// One warning per outage. When a host the run depends on (the store's, the models' Hub) stops
// answering, the engine remembers why (HttpEngine::unreachable: "https://h could not be reached
// (why)") and sends it nothing more. The run says so once, in full, with what it does instead
// and what to check; every later message whose cause is that outage names it in a few words
// instead of repeating the whole failure (rows, notes, the plan's summary).
#pragma once

#include <string>
#include <vector>

namespace neuron_cache::pipeline {

class Outages {
 public:
  // `why` is a source's unreachable() (empty: nothing to say). The first time it is seen, the
  // warning to print: why, what the run does instead (`fallback`) and what to check (`advice`);
  // afterwards, and for an empty `why`, "". `leases_ask_again`: the run takes compile leases in
  // that store, which keep asking it (waiting, renewing, ending them).
  std::string announce(const std::string& why, const std::string& fallback,
                       const std::string& advice, bool leases_ask_again = false);
  // Whether `detail` (an error's text) comes from an announced outage: it quotes the outage's
  // text ("... was not tried: <why> earlier in this run"), is the failed request that began it
  // ("... failed: no answer (<reason>)"), or already names it briefly.
  bool caused(const std::string& detail) const;
  // `detail`, or the outage's few words ("https://h could not be reached (see the warning
  // above)") when caused() says it comes from one.
  std::string brief(const std::string& detail) const;

 private:
  struct Outage {
    std::string why;     // as announced
    std::string host;    // the part before " could not be reached" / " kept failing"
    std::string reason;  // the first "(...)" of why: the transport's error
  };
  const Outage* find(const std::string& detail) const;
  static std::string brief_of(const Outage& outage);
  std::vector<Outage> announced_;
};

}  // namespace neuron_cache::pipeline
