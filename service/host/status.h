// The service's own state on MQTT: PREFIX/status "online" (retained) while it runs, and
// "offline" when it stops, or as the broker's will when it dies. Held by the process that
// speaks for the service: the service itself, or the supervisor of its workers.
#pragma once

#include <memory>
#include <string>

#include "config.h"
#ifdef CUDANMS_HAVE_MQTT
#include "mqttpublisher.h"
#endif

namespace cudanms::service {

class ServiceStatus {
 public:
  ServiceStatus() = default;
  ~ServiceStatus() { offline(); }
  ServiceStatus(const ServiceStatus &) = delete;
  ServiceStatus &operator=(const ServiceStatus &) = delete;

  // Publishes to `config`'s broker and prefix; reconnects only when they changed.
  void apply(const ServiceConfig &config);
  // "offline", then disconnects.
  void offline();

 private:
  std::string address_, prefix_;
#ifdef CUDANMS_HAVE_MQTT
  std::unique_ptr<MqttPublisher> publisher_;
#endif
};

}  // namespace cudanms::service
