// One camera of the service: its states, its connections (sessions) and their failures, the
// reconnect back-off and the stall watchdog. Everything here runs on the main loop; a camera's
// failure is handled here, reported as a state change, and touches no other camera.
//
//   starting --first frame--> streaming --error, end, stall--> reconnecting --back-off--> ...
//   reconnecting --reconnect-attempts spent--> failed;   stop() or enabled=false --> stopped
#pragma once

#include <glib.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "config.h"
#include "outputs.h"
#include "session.h"

namespace cudanms::service {

enum class CameraState { kStarting, kStreaming, kReconnecting, kStopped, kFailed };
const char *state_name(CameraState state);
constexpr CameraState kAllStates[] = {CameraState::kStarting, CameraState::kStreaming,
                                      CameraState::kReconnecting, CameraState::kStopped,
                                      CameraState::kFailed};

// What the metrics and the health endpoint show of a camera.
struct CameraSnapshot {
  std::string name;
  bool enabled = true;
  CameraState state = CameraState::kStopped;
  std::string last_error;
  double state_seconds = 0;  // in this state since
  FrameCounts counts;
  CountingState counting;
  double frames_per_second = 0;    // over the last few seconds
  double seconds_since_frame = 0;  // since the last frame, or since the camera started
  guint64 reconnects = 0;
  int gpu = -1;  // the GPU it is placed on; -1: the CPU
  // Where its detector runs, as the detector says ("cuda:1 (NVIDIA H100 80GB HBM3)", "cpu"):
  // the placement seen from the pipeline. Empty before it starts, or from a detector that does
  // not say.
  std::string device;
  // What the camera costs its GPU: seconds of the detector's and cudanms's work per second (its
  // frames/s times their time per frame), over the last few seconds.
  double load = 0;
  guint64 queued_bytes = 0;         // frames waiting in its connection's queues
  std::vector<RecentEvent> events;  // the newest first
  guint64 snapshot_number = 0;      // of its latest picture (web.h); 0: none yet
  std::string lines, zones;         // as the config gives them (boxcount's)
  bool normalized = false;          // their coordinates in [0, 1] of the picture
};

class Camera {
 public:
  // `run`: what the service decided for it (the CPU, where its counts are kept). `contexts`: the
  // service's CUDA contexts, which put the camera on its GPU (cuda_contexts.h).
  // `gpu_failed`: an element of the camera gave up on its GPU (on the main loop). `counted`: what
  // the camera counted before (a restart's), to go on from.
  Camera(CameraConfig config, CameraRun run, CudaContexts *contexts,
         std::function<void(const std::string &reason)> gpu_failed = nullptr,
         CountingState counted = {});
  ~Camera();
  Camera(const Camera &) = delete;
  Camera &operator=(const Camera &) = delete;

  const CameraConfig &config() const { return config_; }
  // Opens the outputs and connects; a disabled camera stays stopped.
  void start();
  // The recording finalised, the outputs closed, every connection closed (its pipeline
  // stopped), the camera stopped for `reason`: then `done`. The camera lives until then.
  void stop(const std::string &reason, std::function<void()> done);
  // Each second: the stall watchdog, and the frame rate's samples.
  void tick(gint64 now_us);
  CameraSnapshot snapshot(gint64 now_us) const;
  // What it counted so far.
  CountingState counting() const { return outputs_->counting(); }
  // Its latest annotated picture (web.h); the next ones are made while they are asked for.
  Snapshot picture() {
    outputs_->want_pictures();
    return outputs_->snapshot();
  }
  // New lines and zones (`next` differs from the camera's config in them alone), applied to the
  // running connection without a reconnection: the unchanged ones keep their counts.
  void apply_counting(const CameraConfig &next);
  // The snapshot's gpu and load alone (the placement asks each tick).
  int gpu() const;
  double load() const;

 private:
  void connect();
  void fail(const std::string &reason);
  void set_state(CameraState state, const std::string &reason, const std::string &detail = "");
  void end_session();  // stops the current session, if any
  void finished_stopping();
  void tell_stopped();  // `stopped_`, once the outputs and every connection are closed

  CameraConfig config_;
  const CameraRun run_;
  CudaContexts *const contexts_;  // null (a test's): the elements find their own, on device 0
  std::function<void(const std::string &reason)> gpu_failed_;
  std::shared_ptr<CameraOutputs> outputs_;
  std::shared_ptr<Recording> recording_;
  std::shared_ptr<Session> session_;
  CameraState state_ = CameraState::kStopped;
  gint64 state_since_us_;
  gint64 started_us_;
  std::string last_error_;
  long failures_ = 0;  // in a row, since the last frame
  guint64 reconnects_ = 0;
  guint retry_timer_ = 0;
  int finalising_ = 0;  // sessions whose outputs are not final yet
  int closing_ = 0;     // sessions whose pipelines have not stopped yet
  bool outputs_closed_ = false;
  bool stopping_ = false;
  std::string stop_reason_;
  std::function<void()> stopped_;
  struct Sample {
    gint64 time_us;
    guint64 frames;
    double chain_s;
  };
  std::deque<Sample> frame_samples_;  // the last seconds
};

}  // namespace cudanms::service
