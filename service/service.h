// The camera service: its cameras, their GPUs (placement.h), the watchdog's tick, the HTTP
// endpoint, the service's own MQTT status, a reload (SIGHUP) that touches only the cameras whose
// settings changed, and a shutdown (SIGTERM, SIGINT) that finalises every output. A GPU that
// fails (an element's CUDA failure) takes no other GPU's camera with it: its own cameras restart
// on the least loaded GPU left, or on the CPU (gpu-failure). Runs on the main loop.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "camera.h"
#include "config.h"
#include "cuda_contexts.h"
#include "metrics.h"
#include "placement.h"
#ifdef CUDANMS_HAVE_MQTT
#include "mqttpublisher.h"
#endif

namespace cudanms::service {

class Service {
 public:
  // `config_path`: re-read on reload; "" for a service from the command line (no reload).
  Service(std::string config_path, ServiceConfig config);
  ~Service();
  Service(const Service &) = delete;
  Service &operator=(const Service &) = delete;

  // The HTTP endpoint, then every camera; false with the reason when the endpoint cannot listen.
  bool start(std::string *error);
  // Reads the config again: added cameras start, removed ones stop (their outputs finalised),
  // changed ones restart, the others are not touched. A camera whose lines or zones alone
  // changed takes them while it runs. A config with errors changes nothing. Counts of unchanged
  // lines go on, and track ids are never given twice, across restarts as across reconnections.
  void reload();
  // Every camera stopped and finalised, then `done`.
  void shutdown(std::function<void()> done);
  std::vector<CameraSnapshot> snapshots() const;

 private:
  // `counted`: what the camera counted before a restart, to go on from.
  void start_camera(const CameraConfig &config, CountingState counted = {});
  void stop_camera(const std::string &name, const std::string &reason, std::function<void()> then);
  void apply_service_settings(const ServiceConfig &config);
  void finish_shutdown();  // once the last camera stopped
  // The config of `config`'s camera as it runs: on its GPU (gpu-id), or on the CPU.
  CameraConfig placed(const CameraConfig &config);
  void gpu_failed(const std::string &camera, const std::string &reason);

  std::string config_path_;
  ServiceConfig config_;
  CudaContexts cuda_contexts_;  // declared before the cameras: destroyed after them
  Placement placement_;
  std::set<std::string> on_cpu_;  // cameras whose GPU failed, run on the CPU
  std::map<std::string, std::unique_ptr<Camera>> cameras_;
  std::vector<std::unique_ptr<Camera>> stopping_;  // removed, finalising
  MetricsServer metrics_;
  guint tick_timer_ = 0;
  bool shutting_down_ = false;
  std::function<void()> shut_down_;  // what runs once all is stopped
#ifdef CUDANMS_HAVE_MQTT
  std::unique_ptr<MqttPublisher> status_;  // PREFIX/status: online, and the will "offline"
#endif
};

}  // namespace cudanms::service
