#include "neuron_cache/net/meter.h"

namespace neuron_cache::net {

MeterReading TransferMeter::read() const {
  return {bytes_.load(std::memory_order_relaxed), bytes_total_.load(std::memory_order_relaxed),
          files_.load(std::memory_order_relaxed), files_total_.load(std::memory_order_relaxed)};
}

void TransferMeter::observe(MeterObserver* observer) {
  std::lock_guard lock(phase_mutex_);
  observer_ = observer;
}

void TransferMeter::begin(const std::string& label) {
  std::lock_guard lock(phase_mutex_);
  if (depth_++ > 0) return;
  bytes_ = 0;
  bytes_total_ = 0;
  files_ = 0;
  files_total_ = 0;
  if (observer_ != nullptr) observer_->phase_started(label);
}

void TransferMeter::end() {
  std::lock_guard lock(phase_mutex_);
  if (--depth_ > 0) return;
  if (observer_ != nullptr) observer_->phase_ended();
}

TransferMeter& meter() {
  static TransferMeter instance;
  return instance;
}

}  // namespace neuron_cache::net
