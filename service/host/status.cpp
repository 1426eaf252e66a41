#include "status.h"

#include <unistd.h>

#include <chrono>

#include "log.h"

namespace cudanms::service {

void ServiceStatus::apply(const ServiceConfig &config) {
#ifdef CUDANMS_HAVE_MQTT
  if (publisher_ && config.mqtt_address == address_ && config.mqtt_prefix == prefix_) return;
  offline();
  if (config.mqtt_address.empty()) return;
  MqttOptions options;
  options.address = config.mqtt_address;
  options.topic = config.mqtt_prefix + "/status";
  options.client_id =
      std::string("cudanms-") + g_get_host_name() + "-" + std::to_string(getpid()) + "-service";
  options.will_topic = options.topic;
  options.will_message = "offline";
  publisher_ = std::make_unique<MqttPublisher>(options, nullptr);
  std::string error;
  if (!publisher_->start(&error)) {
    log_line("cannot publish the service's status to %s: %s", config.mqtt_address.c_str(),
             error.c_str());
    publisher_.reset();
    return;
  }
  address_ = config.mqtt_address;
  prefix_ = config.mqtt_prefix;
  publisher_->set_status(options.topic, "online");
#else
  (void)config;
#endif
}

void ServiceStatus::offline() {
#ifdef CUDANMS_HAVE_MQTT
  if (!publisher_) return;
  publisher_->set_status(prefix_ + "/status", "offline");
  publisher_->stop(std::chrono::milliseconds(1000));
  publisher_.reset();
  address_.clear();
  prefix_.clear();
#endif
}

}  // namespace cudanms::service
