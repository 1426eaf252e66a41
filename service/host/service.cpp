#include "service.h"

#include <unistd.h>

#include <algorithm>

#include "config_edit.h"
#include "counting_file.h"
#include "events_api.h"
#include "log.h"
#include "session.h"
#include "web.h"

namespace cudanms::service {
namespace {

constexpr guint kTickMs = 500;  // the watchdog's and the frame rate's clock

// Whether two configs of a camera differ in its lines and zones alone, with a boxcount running
// before and after: boxcount takes those while it runs.
bool only_counting_changed(const CameraConfig &before, const CameraConfig &after) {
  if (!before.tracker || !before.counting() || !after.counting()) return false;
  std::map<std::string, std::string> a = before.settings, b = after.settings;
  for (const char *key : {"lines", "zones"}) {
    a.erase(key);
    b.erase(key);
  }
  return a == b;
}

// The names whose shapes are the same in both.
std::map<std::string, std::string> unchanged(const std::map<std::string, std::string> &before,
                                             const std::map<std::string, std::string> &after) {
  std::map<std::string, std::string> out;
  for (const auto &[name, shape] : after) {
    const auto found = before.find(name);
    if (found != before.end() && found->second == shape) out[name] = shape;
  }
  return out;
}

// What a worker kept of the camera's counts before it died (counting_file.h), for the lines whose
// shapes are still the config's; nothing without a counts file.
CountingState stored_counting(const CameraConfig &config, const CameraRun &run) {
  CountingState stored;
  std::map<std::string, std::string> shapes;
  if (run.counts_file.empty() || !load_counting(run.counts_file, &stored, &shapes)) return {};
  return stored.kept_for(unchanged(shapes, config.line_shapes));
}

}  // namespace

Service::Service(ConfigSource source, std::string source_name, ServiceConfig config)
    : Host(std::move(config)), source_(std::move(source)), source_name_(std::move(source_name)) {}

Service::~Service() {
  if (tick_timer_) g_source_remove(tick_timer_);
}

void Service::change(const std::string &path, const std::string &body,
                     const std::string &authorization, MetricsServer::Respond respond) {
  Reply reply = change_config(path, body, authorization, config_.web_auth, config_file_,
                              "the cameras came from the command line: no config file to save to");
  if (reply.status == 200) reload();
  respond(std::move(reply));
}

void Service::serve(const std::string &path, MetricsServer::Respond respond) {
  const double uptime = uptime_s();
  Reply reply;
  if (path == "/metrics") {
    std::map<unsigned, bool> gpus;
    for (const auto &[gpu, load] : placement_.loads()) gpus[gpu] = placement_.failed(gpu);
    reply.type = kMetricsType;
    ProcessSnapshot process = process_snapshot(uptime, std::move(gpus));
    if (history_) process.history = history_->stats();
    reply.body = render_metrics(snapshots(), process);
  } else if (path == "/health") {
    reply.type = kHealthType;
    reply.body = render_health(snapshots(), uptime, &reply.status);
  } else if (is_events_path(path)) {
    reply = events_reply(history_.get(), path, [this](const std::string &name) {
      return std::any_of(config_.cameras.begin(), config_.cameras.end(),
                         [&](const CameraConfig &c) { return c.name == name; });
    });
  } else if (path == "/api/cameras" || path == "/api/host/cameras") {
    reply.type = kHealthType;
    reply.body = render_cameras(snapshots(), host_name(config_.fleet.host_id));
  } else if (const std::string name = snapshot_camera(path); cameras_.count(name)) {
    reply = snapshot_reply(cameras_.at(name)->picture());
  } else {
    reply = not_found(path);
  }
  respond(std::move(reply));
}

bool Service::start(std::string *error) {
  if (!metrics_.listen(config_.metrics_address, error, web_tls(config_))) return false;
  metrics_.set_host_credential(config_.host_credential);
  history_ = open_host_history(config_.history);
  if (g_str_has_prefix(metrics_.url().c_str(), "http"))
    log_line("metrics at %s/metrics, health at %s/health", metrics_.url().c_str(),
             metrics_.url().c_str());
  status_.apply(config_);
  started_ = true;
  for (const CameraConfig &camera : config_.cameras)
    start_camera(camera, stored_counting(camera, run_of(camera.name)));
  tell_loaded();
  tick_timer_ = g_timeout_add(
      kTickMs,
      [](gpointer data) -> gboolean {
        auto *self = static_cast<Service *>(data);
        const gint64 now = g_get_monotonic_time();
        for (auto &[name, camera] : self->cameras_) {
          camera->tick(now);
          self->placement_.set_load(name, camera->load());
        }
        return G_SOURCE_CONTINUE;
      },
      this);
  return true;
}

CameraRun Service::run_of(const std::string &camera) const {
  const auto found = config_.runs.find(camera);
  CameraRun run = found == config_.runs.end() ? CameraRun() : found->second;
  run.history = history_;
  run.snapshots = config_.snapshots;
  run.snapshots_size = config_.snapshots_size;
  run.host = config_.fleet.host_id;
  return run;
}

CameraRun Service::place(CameraConfig *config) {
  CameraRun run = run_of(config->name);
  if (!config->enabled) return run;
  if (on_cpu_.count(config->name)) {
    run.on_cpu = true;
    return run;
  }
  const bool pinned = config->gpu_id.has_value();
  if (pinned && !placement_.failed(*config->gpu_id)) {
    placement_.pin(config->name, *config->gpu_id);
    return run;
  }
  if (!pinned && !config_.all_gpus && config_.gpus.empty()) {
    run.on_cpu = true;  // gpus = none
    return run;
  }
  const int gpu = placement_.place(config->name);
  if (gpu >= 0) {
    config->gpu_id = static_cast<unsigned>(gpu);
  } else if (pinned || !config_.gpus.empty()) {
    run.on_cpu = true;  // every GPU it could use has failed
  }
  return run;
}

void Service::gpu_failed(const std::string &name, const std::string &reason) {
  const auto found = cameras_.find(name);
  if (found == cameras_.end()) return;
  const int placed_on = found->second->gpu();
  if (placed_on < 0 || placement_.failed(static_cast<unsigned>(placed_on))) return;
  const unsigned gpu = static_cast<unsigned>(placed_on);
  std::vector<std::string> moved = placement_.fail(gpu);
  const bool to_cpu = config_.gpu_failure == "cpu";
  log_line("GPU %u failed (camera %s: %s): %zu cameras %s", gpu, name.c_str(), reason.c_str(),
           moved.size(), to_cpu ? "go on on the CPU" : "move to the GPUs left");
  for (const std::string &m : moved) {
    if (to_cpu) on_cpu_.insert(m);
    const auto running = cameras_.find(m);
    if (running == cameras_.end()) continue;
    CameraConfig unplaced = running->second->config();
    for (const CameraConfig &c : config_.cameras)
      if (c.name == m) unplaced = c;  // without the gpu-id the placement gave it
    const CountingState counted = running->second->counting();  // its counts and ids go on
    stop_camera(m, "GPU " + std::to_string(gpu) + " failed: restarting elsewhere",
                [this, unplaced, counted] { start_camera(unplaced, counted); });
  }
  if (gpu_failed_told_) gpu_failed_told_(gpu);
}

void Service::set_fenced(bool fenced) {
  if (fenced == fenced_) return;
  fenced_ = fenced;
  if (fenced) {
    std::vector<std::string> names;
    for (const auto &[name, camera] : cameras_) names.push_back(name);
    log_line(
        "fenced: the host's etcd lease is not sure to be alive: stopping its %zu cameras "
        "before another host may take them",
        names.size());
    for (const std::string &name : names)
      stop_camera(name, "fenced: the host's etcd lease is not sure to be alive", nullptr);
    return;
  }
  log_line("the host's etcd lease is renewed: its cameras may run");
  if (started_) reload();
}

void Service::start_camera(const CameraConfig &config, CountingState counted) {
  if (shutting_down_) return;  // a restart that a reload asked for, overtaken by the shutdown
  if (fenced_) return;         // they start again when the lease is renewed
  const std::string name = config.name;
  CameraConfig placed = config;
  CameraRun run = place(&placed);
  auto camera = std::make_unique<Camera>(
      std::move(placed), std::move(run), &cuda_contexts_,
      [this, name](const std::string &reason) { gpu_failed(name, reason); }, std::move(counted));
  Camera *raw = camera.get();
  cameras_[config.name] = std::move(camera);
  raw->start();
}

void Service::stop_camera(const std::string &name, const std::string &reason,
                          std::function<void()> then) {
  auto found = cameras_.find(name);
  if (found == cameras_.end()) return;
  Camera *camera = found->second.get();
  stopping_.push_back(std::move(found->second));
  cameras_.erase(found);
  camera->stop(reason, [this, camera, name, then = std::move(then)] {
    for (auto it = stopping_.begin(); it != stopping_.end(); ++it) {
      if (it->get() != camera) continue;
      stopping_.erase(it);
      break;
    }
    if (camera_stopped_told_) camera_stopped_told_(name);
    if (then) then();
    finish_shutdown();
  });
}

void Service::reload() {
  if (!source_) {
    log_line("SIGHUP: no config file to read again (the cameras came from the command line)");
    return;
  }
  if (fenced_) {
    log_line("SIGHUP: fenced: the config is read again when the lease is renewed");
    return;
  }
  ServiceConfig next;
  std::vector<std::string> errors;
  if (!source_(&next, &errors)) {
    for (const std::string &e : errors) log_line("%s", e.c_str());
    log_line("SIGHUP: %s has %zu errors: nothing changed, the cameras run on as before",
             source_name_.c_str(), errors.size());
    return;
  }
  log_line("SIGHUP: reading %s again", source_name_.c_str());
  config_.runs = next.runs;  // the cameras it starts keep their counts where the assignment says
  if (next.metrics_address != config_.metrics_address || web_tls(next) != web_tls(config_))
    metrics_.listen_again(next.metrics_address, web_tls(next));
  metrics_.set_host_credential(next.host_credential);
  status_.apply(next);
  if (next.gpus != config_.gpus) placement_.set_gpus(next.gpus);

  std::map<std::string, const CameraConfig *> wanted;
  for (const CameraConfig &c : next.cameras) wanted[c.name] = &c;
  std::vector<std::string> names;
  for (const auto &[name, camera] : cameras_) names.push_back(name);
  int removed = 0, changed = 0, added = 0, recounted = 0;
  for (const std::string &name : names) {
    auto found = wanted.find(name);
    if (found == wanted.end()) {
      placement_.release(name);
      on_cpu_.erase(name);
      stop_camera(name, "removed from the config", nullptr);
      removed++;
    } else if (found->second->settings != cameras_[name]->config().settings) {
      Camera *running = cameras_[name].get();
      const CameraConfig &config = *found->second;
      if (only_counting_changed(running->config(), config)) {
        running->apply_counting(config);
        recounted++;
        continue;
      }
      // A restart keeps the ids going on and the counts of the lines left as they were.
      const CountingState counted = running->counting().kept_for(
          unchanged(running->config().line_shapes, config.line_shapes));
      stop_camera(name, "its settings changed: restarting",
                  [this, config, counted] { start_camera(config, counted); });
      changed++;
    }
  }
  for (const CameraConfig &c : next.cameras) {
    if (cameras_.count(c.name) || std::find(names.begin(), names.end(), c.name) != names.end())
      continue;
    start_camera(c, stored_counting(c, run_of(c.name)));
    added++;
  }
  log_line("SIGHUP: %d added, %d removed, %d restarted, %d with new lines or zones, %zu untouched",
           added, removed, changed, recounted, next.cameras.size() - added - changed - recounted);
  config_ = std::move(next);
  tell_loaded();
}

void Service::tell_loaded() {
  if (!loaded_told_) return;
  std::vector<std::string> names;
  for (const auto &[name, camera] : cameras_) names.push_back(name);
  for (const auto &camera : stopping_) names.push_back(camera->config().name);
  loaded_told_(config_.generation, names);
}

void Service::shutdown(std::function<void()> done) {
  shutting_down_ = true;
  shut_down_ = std::move(done);
  std::vector<std::string> names;
  for (const auto &[name, camera] : cameras_) names.push_back(name);
  for (const std::string &name : names) stop_camera(name, "the service stops", nullptr);
  finish_shutdown();
}

void Service::finish_shutdown() {
  if (!shut_down_ || !cameras_.empty() || !stopping_.empty()) return;
  std::function<void()> done = std::move(shut_down_);
  shut_down_ = nullptr;
  // Every output is final; the cameras' pipelines stop on threads of their own. Once they have,
  // the service says goodbye on MQTT.
  g_timeout_add_full(
      G_PRIORITY_DEFAULT, 50,
      [](gpointer data) -> gboolean {
        if (Session::stopping() > 0) return G_SOURCE_CONTINUE;
        (*static_cast<std::function<void()> *>(data))();
        return G_SOURCE_REMOVE;
      },
      new std::function<void()>([this, done] {
        status_.offline();
        done();
      }),
      [](gpointer data) { delete static_cast<std::function<void()> *>(data); });
}

std::vector<CameraSnapshot> Service::snapshots() const {
  const gint64 now = g_get_monotonic_time();
  std::vector<CameraSnapshot> out;
  for (const auto &[name, camera] : cameras_) out.push_back(camera->snapshot(now));
  return out;
}

}  // namespace cudanms::service
