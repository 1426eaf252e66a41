// What every host of the service is, whether it runs its cameras itself (Service) or in a worker
// process per GPU (Supervisor): its config, its cameras' placement on its GPUs, its HTTP
// endpoint, its status on MQTT, its uptime and its shutdown's state. Runs on the main loop.
#pragma once

#include <glib.h>

#include <functional>
#include <set>
#include <string>
#include <utility>

#include "config.h"
#include "metrics.h"
#include "placement.h"
#include "status.h"

namespace cudanms::service {

class Host : protected MetricsServer::Owner {
 public:
  Host(const Host &) = delete;
  Host &operator=(const Host &) = delete;

 protected:
  explicit Host(ServiceConfig config)
      : config_(std::move(config)),
        placement_(config_.gpus),
        metrics_(this),
        started_us_(g_get_monotonic_time()) {}
  ~Host() = default;

  double uptime_s() const { return (g_get_monotonic_time() - started_us_) / 1e6; }

  ServiceConfig config_;
  Placement placement_;
  MetricsServer metrics_;
  ServiceStatus status_;
  std::set<std::string> on_cpu_;  // cameras whose GPU failed, run on the CPU
  bool shutting_down_ = false;
  std::function<void()> shut_down_;  // what runs once all is stopped

 private:
  const gint64 started_us_;
};

}  // namespace cudanms::service
