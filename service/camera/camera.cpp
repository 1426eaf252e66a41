#include "camera.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <thread>

#include "log.h"
#include "main_loop.h"

namespace cudanms::service {
namespace {

constexpr gint64 kRateWindowUs = 5 * G_USEC_PER_SEC;  // frames/s over the last 5 s
constexpr guint kFlushMs = 2000;  // what MQTT messages still queued get at a stop

}  // namespace

const char *state_name(CameraState state) {
  switch (state) {
    case CameraState::kStarting:
      return "starting";
    case CameraState::kStreaming:
      return "streaming";
    case CameraState::kReconnecting:
      return "reconnecting";
    case CameraState::kStopped:
      return "stopped";
    case CameraState::kFailed:
      return "failed";
  }
  return "?";
}

Camera::Camera(CameraConfig config, CameraRun run, CudaContexts *contexts,
               std::function<void(const std::string &reason)> gpu_failed, CountingState counted)
    : config_(std::move(config)),
      run_(std::move(run)),
      contexts_(contexts),
      gpu_failed_(std::move(gpu_failed)),
      outputs_(std::make_shared<CameraOutputs>(config_, run_, std::move(counted))),
      state_since_us_(g_get_monotonic_time()),
      started_us_(state_since_us_) {}

Camera::~Camera() {
  if (retry_timer_) g_source_remove(retry_timer_);
}

void Camera::set_state(CameraState state, const std::string &reason, const std::string &detail) {
  const CameraState previous = state_;
  state_ = state;
  state_since_us_ = g_get_monotonic_time();
  log_line("camera %s: %s -> %s: %s%s", config_.name.c_str(), state_name(previous),
           state_name(state), reason.c_str(), detail.empty() ? "" : (" (" + detail + ")").c_str());
  outputs_->on_state(state_name(state), state_name(previous), reason, failures_);
}

void Camera::start() {
  started_us_ = g_get_monotonic_time();
  std::string error;
  if (!config_.record_dir.empty()) {
    if (g_mkdir_with_parents(config_.record_dir.c_str(), 0755) != 0)
      error = "cannot make " + config_.record_dir + ": " + g_strerror(errno);
    recording_ = std::make_shared<Recording>(config_.record_dir, config_.name);
  }
  if (!error.empty() || !outputs_->open(&error)) {
    last_error_ = error;
    set_state(CameraState::kFailed, error);
    return;
  }
  if (!config_.enabled) {
    set_state(CameraState::kStopped, "disabled in the config");
    return;
  }
  connect();
}

void Camera::connect() {
  if (stopping_) return;
  if (failures_ > 0) reconnects_++;
  if (failures_ == 0) set_state(CameraState::kStarting, "connecting");
  Session::Events events;
  events.first_frame = [this] {
    failures_ = 0;
    set_state(CameraState::kStreaming, "frames arrive");
  };
  events.failed = [this](const std::string &reason) { fail(reason); };
  events.gpu_failed = [this](const std::string &reason) {
    if (gpu_failed_) gpu_failed_(reason);
  };
  std::string error;
  session_ =
      Session::start(config_, run_, outputs_, recording_, contexts_, std::move(events), &error);
  if (!session_) fail(error);
}

void Camera::apply_counting(const CameraConfig &next) {
  const std::optional<unsigned> gpu_id = config_.gpu_id;  // as placed
  config_ = next;
  config_.gpu_id = gpu_id;
  log_line("camera %s: new lines and zones, counting on without a reconnection",
           config_.name.c_str());
  if (session_) session_->set_counting(config_.elements);
  outputs_->set_line_shapes(config_.line_shapes);
}

void Camera::end_session() {
  if (!session_) return;
  finalising_++;
  closing_++;
  std::shared_ptr<Session> ending = std::move(session_);
  ending->stop(
      [this] {
        finalising_--;
        if (finalising_ > 0) return;
        if (stopping_) {
          finished_stopping();
        } else if (state_ == CameraState::kReconnecting && retry_timer_ == 0) {
          connect();  // the back-off ran out while the last connection was finalising
        }
      },
      [this] {
        closing_--;
        tell_stopped();
      });
}

void Camera::fail(const std::string &reason) {
  if (stopping_) return;
  last_error_ = reason;
  end_session();
  failures_++;
  if (config_.reconnect_attempts >= 0 && failures_ > config_.reconnect_attempts) {
    set_state(CameraState::kFailed, reason,
              config_.reconnect_attempts == 0
                  ? "reconnect-attempts is 0"
                  : "gave up after " + std::to_string(config_.reconnect_attempts) + " attempts");
    return;
  }
  const double delay =
      std::min(config_.reconnect_initial_s * std::pow(2.0, failures_ - 1), config_.reconnect_max_s);
  set_state(CameraState::kReconnecting, reason,
            "attempt " + std::to_string(failures_) + ", next in " + seconds_text(delay));
  if (retry_timer_) g_source_remove(retry_timer_);
  retry_timer_ = g_timeout_add(
      static_cast<guint>(delay * 1000),
      [](gpointer data) -> gboolean {
        auto *camera = static_cast<Camera *>(data);
        camera->retry_timer_ = 0;
        if (camera->finalising_ == 0) camera->connect();
        return G_SOURCE_REMOVE;
      },
      this);
}

void Camera::stop(const std::string &reason, std::function<void()> done) {
  stopping_ = true;
  stop_reason_ = reason;
  stopped_ = std::move(done);
  if (retry_timer_) {
    g_source_remove(retry_timer_);
    retry_timer_ = 0;
  }
  end_session();
  if (finalising_ == 0) finished_stopping();
}

void Camera::finished_stopping() {
  if (state_ != CameraState::kStopped) set_state(CameraState::kStopped, stop_reason_);
  // Off the main loop: a broker that is away holds the MQTT flush for up to its timeout, and the
  // cameras stopping at once should wait for it side by side, not one after another.
  std::thread([this, outputs = outputs_] {
    outputs->close(kFlushMs);
    on_main_loop([this] {
      outputs_closed_ = true;
      tell_stopped();
    });
  }).detach();
}

void Camera::tell_stopped() {
  // Stopped means its outputs are final and no connection of it is open any more (a fleet lets
  // another host have the camera then: never two clients at the camera).
  if (!stopping_ || !outputs_closed_ || closing_ > 0 || !stopped_) return;
  std::function<void()> done = std::move(stopped_);
  stopped_ = nullptr;
  done();
}

void Camera::tick(gint64 now_us) {
  if (outputs_->not_owner() && session_ && !stopping_) {
    // A fleet's camera that etcd gave to another host meanwhile: it is that host's to run.
    if (retry_timer_) g_source_remove(retry_timer_);
    retry_timer_ = 0;
    end_session();
    last_error_ = "another host owns this camera now";
    set_state(CameraState::kStopped, last_error_);
    return;
  }
  outputs_->sweep_pictures(gint64{3600} * G_USEC_PER_SEC);
  const FrameCounts counts = outputs_->counts();
  frame_samples_.push_back({now_us, counts.frames, counts.chain_sum_s});
  while (frame_samples_.size() > 2 && now_us - frame_samples_[1].time_us >= kRateWindowUs)
    frame_samples_.pop_front();
  // The watchdog: a connection that delivers nothing for stall-timeout, whether it never did
  // (a camera that accepts the connection and then says nothing) or stopped (a stalled one).
  if (!session_ || stopping_) return;
  const gint64 last = std::max(session_->started_us(), counts.last_frame_us);
  const double silent = (now_us - last) / 1e6;
  if (silent < config_.stall_timeout_s) return;
  fail(state_ == CameraState::kStreaming
           ? "stalled: no frame for " + seconds_text(silent)
           : "no frame within " + seconds_text(silent) + " of connecting");
}

CameraSnapshot Camera::snapshot(gint64 now_us) const {
  CameraSnapshot s;
  s.name = config_.name;
  s.enabled = config_.enabled;
  s.state = state_;
  s.last_error = last_error_;
  s.state_seconds = (now_us - state_since_us_) / 1e6;
  s.counts = outputs_->counts();
  s.counting = outputs_->counting();
  s.events = outputs_->recent_events();
  s.snapshot_number = outputs_->snapshot().number;
  const auto setting = [this](const char *key) {
    const auto found = config_.elements.find(key);
    return found == config_.elements.end() ? std::string() : found->second;
  };
  s.lines = setting("lines");
  s.zones = setting("zones");
  s.normalized = setting("normalized") == "true";
  s.reconnects = reconnects_;
  s.seconds_since_frame =
      (now_us - (s.counts.last_frame_us ? s.counts.last_frame_us : started_us_)) / 1e6;
  if (frame_samples_.size() >= 2) {
    const Sample &first = frame_samples_.front(), &last = frame_samples_.back();
    const double seconds = (last.time_us - first.time_us) / 1e6;
    if (seconds > 0) s.frames_per_second = (last.frames - first.frames) / seconds;
  }
  s.load = load();
  s.gpu = gpu();
  if (session_) {
    s.queued_bytes = session_->queued_bytes();
    s.device = session_->detector_device();
  }
  return s;
}

int Camera::gpu() const {
  return run_.on_cpu || !config_.gpu_id ? -1 : static_cast<int>(*config_.gpu_id);
}

double Camera::load() const {
  if (frame_samples_.size() < 2) return 0;
  const Sample &first = frame_samples_.front(), &last = frame_samples_.back();
  const double seconds = (last.time_us - first.time_us) / 1e6;
  return seconds > 0 ? (last.chain_s - first.chain_s) / seconds : 0;
}

}  // namespace cudanms::service
