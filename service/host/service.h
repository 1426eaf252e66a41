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
#include "host.h"
#include "metrics.h"

namespace cudanms::service {

class Service : public Host {
 public:
  // What a reload reads: true with the config, or false with every error.
  using ConfigSource = std::function<bool(ServiceConfig *, std::vector<std::string> *)>;
  // `source`: read again at a reload, `source_name` in the log (the file); an empty source for a
  // service from the command line (no reload).
  Service(ConfigSource source, std::string source_name, ServiceConfig config);
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
  // The config file the operator's page saves its changes to (config_edit.h); none by default
  // (a worker's config is its supervisor's to change).
  void edit_file(std::string path) { config_file_ = std::move(path); }
  // Every camera stopped and finalised, then `done`.
  void shutdown(std::function<void()> done);
  std::vector<CameraSnapshot> snapshots() const;
  // Called on the main loop when a GPU fails, after its cameras have been moved (a worker tells
  // its supervisor).
  void on_gpu_failed(std::function<void(unsigned gpu)> told) { gpu_failed_told_ = std::move(told); }
  // Called on the main loop once a camera has stopped, its outputs final and its connection
  // closed (a fleet's worker tells its supervisor, which may then let another host have it).
  void on_camera_stopped(std::function<void(const std::string &camera)> told) {
    camera_stopped_told_ = std::move(told);
  }
  // Called on the main loop once a config has been taken (at the start, at each reload), with
  // its generation (ServiceConfig::generation) and the cameras that run or are stopping now:
  // one that is not among them has stopped, or never ran here.
  void on_loaded(std::function<void(guint64, const std::vector<std::string> &)> told) {
    loaded_told_ = std::move(told);
  }
  // A fleet host's lease is not sure to be alive (fence.h): every camera stops and none starts
  // until it is again; then the cameras of the config, as it is then, start.
  void set_fenced(bool fenced);

 private:
  // `counted`: what the camera counted before a restart, to go on from.
  void start_camera(const CameraConfig &config, CountingState counted = {});
  void stop_camera(const std::string &name, const std::string &reason, std::function<void()> then);
  void finish_shutdown();  // once the last camera stopped
  // The camera of `config` placed: on its GPU (`config`'s gpu-id, set here), or on the CPU.
  CameraRun place(CameraConfig *config);
  // What the supervisor's assignment says of a worker's camera (its counts file, its fleet
  // store); nothing for a service without workers.
  CameraRun run_of(const std::string &camera) const;
  void gpu_failed(const std::string &camera, const std::string &reason);

  void serve(const std::string &path, MetricsServer::Respond respond) override;
  // The page's POST (config_edit.h): into the config file, then reloaded.
  void change(const std::string &path, const std::string &body, const std::string &authorization,
              MetricsServer::Respond respond) override;

  ConfigSource source_;
  std::string config_file_;
  std::string source_name_;
  CudaContexts cuda_contexts_;             // declared before the cameras: destroyed after them
  std::shared_ptr<EventHistory> history_;  // the cameras' events, kept (nullptr: not)
  std::map<std::string, std::unique_ptr<Camera>> cameras_;
  std::vector<std::unique_ptr<Camera>> stopping_;  // removed, finalising
  guint tick_timer_ = 0;
  std::function<void(unsigned)> gpu_failed_told_;
  std::function<void(const std::string &)> camera_stopped_told_;
  std::function<void(guint64, const std::vector<std::string> &)> loaded_told_;
  void tell_loaded();
  bool started_ = false;
  bool fenced_ = false;
};

}  // namespace cudanms::service
