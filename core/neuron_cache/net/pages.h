// THE bound of a paged listing (the Hub's Link headers, S3 continuation tokens): a server whose
// pages never end (always "more follow", a fresh token, nothing on the page) is cut off with a
// message after a number of pages, a run of empty pages or a time, so no listing loops forever.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "neuron_cache/error.h"

namespace neuron_cache::net {

class PageBudget {
 public:
  // `what`: the listing, in messages ("listing s3://bucket/prefix").
  PageBudget(std::string what, size_t max_pages, std::chrono::milliseconds max_time)
      : what_(std::move(what)),
        max_pages_(max_pages),
        max_time_(max_time),
        start_(std::chrono::steady_clock::now()) {}

  // Called with each page's item count when the page says more follow: throws an operational
  // Error when the next page would go beyond the budget.
  void more_after(size_t items_on_page) {
    ++pages_;
    empty_run_ = items_on_page == 0 ? empty_run_ + 1 : 0;
    if (empty_run_ >= kMaxEmptyPages) {
      spent(std::to_string(empty_run_) + " pages in a row held nothing but said more follow");
    }
    if (pages_ >= max_pages_) spent("it went on for " + std::to_string(pages_) + " pages");
    if (std::chrono::steady_clock::now() - start_ > max_time_) {
      spent("it went on for more than " +
            std::to_string(std::chrono::duration_cast<std::chrono::seconds>(max_time_).count()) +
            " s");
    }
  }

 private:
  static constexpr size_t kMaxEmptyPages = 10;

  [[noreturn]] void spent(const std::string& why) const {
    throw operational_error(what_ + " was stopped: " + why +
                            ", more than a cache's listing takes; the server's pages do not end, "
                            "check the endpoint and that it is the store you meant");
  }

  std::string what_;
  size_t max_pages_;
  std::chrono::milliseconds max_time_;
  std::chrono::steady_clock::time_point start_;
  size_t pages_ = 0;
  size_t empty_run_ = 0;
};

}  // namespace neuron_cache::net
