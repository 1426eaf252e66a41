#include "supervisor.h"

#include <gio/gunixsocketaddress.h>
#include <glib/gstdio.h>
#include <sys/prctl.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <set>

#include "config_edit.h"
#include "element_check.h"
#include "fence.h"
#include "log.h"
#include "worker_merge.h"

namespace cudanms::service {
namespace {

// A worker that ran this long before it died is restarted at once; one that dies sooner waits
// a back-off that doubles from the first to the last.
constexpr double kSteadySeconds = 30, kFirstBackoffSeconds = 1, kLastBackoffSeconds = 30;
constexpr guint kWorkerAnswerSeconds = 3;  // a stopped worker must not hold the endpoint

// In the worker, between fork and exec: it ends with the supervisor (SIGTERM finalises its
// outputs), and a SIGHUP before it has its handler does not kill it (its start reads the files
// anyway).
void worker_child_setup(gpointer) {
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  signal(SIGHUP, SIG_IGN);
}

std::string exit_text(GSubprocess *process) {
  if (g_subprocess_get_if_signaled(process)) {
    const int number = g_subprocess_get_term_sig(process);
    return std::string("killed by signal ") + std::to_string(number) + " (" + g_strsignal(number) +
           ")";
  }
  return "exited with status " + std::to_string(g_subprocess_get_exit_status(process));
}

}  // namespace

std::string Supervisor::gpu_failed_line(unsigned gpu) {
  return "gpu-failed " + std::to_string(gpu);
}

std::string Supervisor::camera_stopped_line(const std::string &camera) {
  return "camera-stopped " + camera;
}

Supervisor::Supervisor(std::string config_path, std::string config_text, ServiceConfig config)
    : Host(std::move(config)),
      config_path_(std::move(config_path)),
      config_text_(std::move(config_text)) {}

Supervisor::~Supervisor() {
  for (auto &[gpu, worker] : workers_) {
    if (worker->restart_timer) g_source_remove(worker->restart_timer);
    if (worker->cancel) g_cancellable_cancel(worker->cancel);
    if (worker->process) {
      g_subprocess_force_exit(worker->process);
      g_subprocess_wait(worker->process, nullptr, nullptr);
      g_object_unref(worker->process);
    }
    g_clear_object(&worker->cancel);
    g_clear_object(&worker->events);
    g_clear_object(&worker->session);
  }
  if (hosts_session_) soup_session_abort(hosts_session_);
  g_clear_object(&hosts_session_);
  if (run_dir_.empty()) return;
  if (GDir *dir = g_dir_open(run_dir_.c_str(), 0, nullptr)) {
    while (const gchar *name = g_dir_read_name(dir)) g_unlink((run_dir_ + "/" + name).c_str());
    g_dir_close(dir);
  }
  g_rmdir(run_dir_.c_str());
}

bool Supervisor::start(std::string *error) {
  GError *gerror = nullptr;
  gchar *dir = g_dir_make_tmp("cudanms-service-XXXXXX", &gerror);
  gchar *self = g_file_read_link("/proc/self/exe", gerror ? nullptr : &gerror);
  if (!dir || !self) {
    *error = std::string("cannot make the workers' run directory: ") + gerror->message;
    g_clear_error(&gerror);
    g_free(dir);
    g_free(self);
    return false;
  }
  run_dir_ = dir;
  executable_ = self;
  g_free(dir);
  g_free(self);
  if (config_.fleet.on()) {  // its workers are a fleet's from their start: fenced till renewed
    assignment_.fleet_endpoints = config_.fleet.endpoints;
    assignment_.fleet_keys = config_.fleet.folder();
    assignment_.fleet_host = config_.fleet.host_id;
    std::string why;
    LeaseFence::write(run_lease_path(run_dir_), 0, &why);
  }
  assign();
  if (!write_run_files(error)) return false;
  if (!metrics_.listen(config_.metrics_address, error, web_tls(config_))) return false;
  metrics_.set_host_credential(config_.host_credential);
  if (!metrics_.url().empty())
    log_line("metrics at %s/metrics, health at %s/health", metrics_.url().c_str(),
             metrics_.url().c_str());
  status_.apply(config_);
  history_ = open_host_history(config_.history);  // made before the workers write into it
  start_workers();
  if (!config_.fleet.on()) return true;
  FleetAgent::Hooks hooks;
  hooks.run = [this](std::vector<CameraConfig> cameras, const std::string &text,
                     const std::map<std::string, std::string> &seeds,
                     long long lease) { run_fleet_config(std::move(cameras), text, seeds, lease); };
  hooks.fence = [this](gint64 fence_at_us) {
    std::string why;
    if (!LeaseFence::write(run_lease_path(run_dir_), fence_at_us, &why))
      log_line("fleet: cannot write the workers' fence: %s", why.c_str());
  };
  hooks.refuse = [this](const std::string &why) {
    if (refused_) refused_(why);
  };
  const int units = config_.gpus.empty() ? 1 : static_cast<int>(config_.gpus.size());
  fleet_ = std::make_unique<FleetAgent>(config_.fleet, config_text_, units, metrics_.url(),
                                        std::move(hooks));
  fleet_->start();
  return true;
}

void Supervisor::run_fleet_config(std::vector<CameraConfig> cameras, const std::string &text,
                                  const std::map<std::string, std::string> &seeds,
                                  long long lease) {
  // Each camera was read and checked alone, over this host's defaults; what only holds across
  // cameras (two on one JSON file) is checked here.
  std::vector<std::string> errors;
  if (!cameras_run_together(cameras, "etcd", &errors)) {
    for (const std::string &e : errors) log_line("fleet: %s", e.c_str());
    log_line("fleet: the cameras etcd gives this host do not run together: nothing changed");
    return;
  }
  ServiceConfig next = config_;  // this host's own keys
  next.cameras = std::move(cameras);
  assignment_.fleet_endpoints = config_.fleet.endpoints;
  assignment_.fleet_keys = config_.fleet.folder();
  assignment_.fleet_host = config_.fleet.host_id;
  assignment_.fleet_lease = lease;
  apply(std::move(next), text, seeds);
}

void Supervisor::camera_stopped(const std::string &camera) {
  leaving_.erase(camera);
  if (fleet_) fleet_->camera_stopped(camera);
}

void Supervisor::worker_loaded(unsigned gpu, guint64 generation,
                               const std::set<std::string> &running) {
  std::vector<std::string> stopped;
  for (const auto &[camera, left] : leaving_)
    if (left.first == gpu && left.second <= generation && !running.count(camera))
      stopped.push_back(camera);
  for (const std::string &camera : stopped) camera_stopped(camera);
}

void Supervisor::assign() {
  placement_.set_gpus(config_.gpus);
  std::set<std::string> names;
  for (const CameraConfig &camera : config_.cameras) names.insert(camera.name);
  for (auto it = assignment_.cameras.begin(); it != assignment_.cameras.end();) {
    if (names.count(it->first)) {
      ++it;
      continue;
    }
    placement_.release(it->first);
    on_cpu_.erase(it->first);
    assignment_.epochs.erase(it->first);
    it = assignment_.cameras.erase(it);
  }
  for (const CameraConfig &camera : config_.cameras) {
    if (!assignment_.epochs.count(camera.name)) assignment_.epochs[camera.name] = next_epoch_++;
    if (config_.gpus.empty() && !camera.gpu_id) {  // a host without GPUs: the CPU's worker
      assignment_.cameras[camera.name] = kCpuWorker;
      continue;
    }
    if (on_cpu_.count(camera.name)) continue;  // stays with its failed GPU's worker
    if (camera.gpu_id) {
      const unsigned gpu = *camera.gpu_id;
      if (!placement_.failed(gpu)) {
        placement_.pin(camera.name, gpu);
        assignment_.cameras[camera.name] = gpu;
        continue;
      }
    }
    const int gpu = placement_.place(camera.name);
    if (gpu >= 0) {
      assignment_.cameras[camera.name] = static_cast<unsigned>(gpu);
    } else if (!assignment_.cameras.count(camera.name)) {
      // Every GPU it could use has failed: a failed GPU's worker runs it on the CPU.
      assignment_.cameras[camera.name] = config_.gpus.front();
      on_cpu_.insert(camera.name);
    }
  }
}

void Supervisor::forget_removed_counts() {
  std::set<std::string> current;
  for (const auto &[camera, epoch] : assignment_.epochs)
    current.insert(counts_file_name(camera, epoch));
  std::set<std::string> leaving;
  for (const auto &[camera, left] : leaving_) leaving.insert(counts_file_prefix(camera));
  GDir *dir = g_dir_open(run_dir_.c_str(), 0, nullptr);
  if (!dir) return;
  while (const gchar *name = g_dir_read_name(dir))
    if (stale_counts_file(name, current, leaving)) g_unlink((run_dir_ + "/" + name).c_str());
  g_dir_close(dir);
}

bool Supervisor::write_run_files(std::string *error) {
  assignment_.generation++;
  GError *gerror = nullptr;
  // g_file_set_contents renames a finished file into place: a worker never reads half of one.
  if (!g_file_set_contents(run_config_path(run_dir_).c_str(), config_text_.c_str(),
                           static_cast<gssize>(config_text_.size()), &gerror) ||
      !g_file_set_contents(run_assignment_path(run_dir_).c_str(),
                           assignment_text(assignment_).c_str(), -1, &gerror)) {
    *error = std::string("cannot write the workers' run directory: ") + gerror->message;
    g_clear_error(&gerror);
    return false;
  }
  return true;
}

void Supervisor::start_workers() {
  std::set<unsigned> needed(config_.gpus.begin(), config_.gpus.end());
  if (needed.empty()) needed.insert(kCpuWorker);
  for (const auto &[camera, gpu] : assignment_.cameras) needed.insert(gpu);
  for (unsigned gpu : needed) {
    auto &worker = workers_[gpu];
    if (!worker) {
      worker = std::make_unique<Worker>();
      worker->supervisor = this;
      worker->gpu = gpu;
      GSocketAddress *socket = g_unix_socket_address_new(
          worker_socket_address(run_dir_, gpu).substr(strlen("unix:")).c_str());
      worker->session = soup_session_new_with_options("remote-connectable", socket, "timeout",
                                                      kWorkerAnswerSeconds, nullptr);
      g_object_unref(socket);
    }
    worker->wanted = true;
    if (!worker->process && !worker->restart_timer) spawn(*worker);
  }
  for (auto &[gpu, worker] : workers_) {
    if (needed.count(gpu) || !worker->wanted) continue;
    worker->wanted = false;  // its GPU left the config and no camera is left to it
    if (worker->restart_timer) g_source_remove(worker->restart_timer);
    worker->restart_timer = 0;
    if (worker->process) g_subprocess_send_signal(worker->process, SIGTERM);
    log_line("worker of %s: no camera left to it, stopping", worker_name(gpu).c_str());
  }
}

void Supervisor::spawn(Worker &worker) {
  worker.restart_timer = 0;
  GSubprocessLauncher *launcher = g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_STDOUT_PIPE);
  g_subprocess_launcher_set_child_setup(launcher, worker_child_setup, nullptr, nullptr);
  const std::string gpu = worker.gpu == kCpuWorker ? "cpu" : std::to_string(worker.gpu);
  const gchar *argv[] = {executable_.c_str(), "--worker",       gpu.c_str(),
                         "--run-dir",         run_dir_.c_str(), nullptr};
  GError *error = nullptr;
  worker.process = g_subprocess_launcher_spawnv(launcher, argv, &error);
  g_object_unref(launcher);
  worker.started_us = g_get_monotonic_time();
  if (!worker.process) {
    worker.last_exit = std::string("could not start: ") + error->message;
    log_line("worker of %s %s", worker_name(worker.gpu).c_str(), worker.last_exit.c_str());
    g_clear_error(&error);
    worker.backoff_s = kLastBackoffSeconds;
    restart_later(worker);
    return;
  }
  worker.pid = std::atol(g_subprocess_get_identifier(worker.process));
  worker.cancel = g_cancellable_new();
  worker.events = g_data_input_stream_new(g_subprocess_get_stdout_pipe(worker.process));
  log_line("worker of %s: pid %ld", worker_name(worker.gpu).c_str(), worker.pid);
  g_subprocess_wait_async(worker.process, worker.cancel, on_exit, &worker);
  read_line(worker);
}

void Supervisor::read_line(Worker &worker) {
  g_data_input_stream_read_line_async(worker.events, G_PRIORITY_DEFAULT, worker.cancel, on_line,
                                      &worker);
}

void Supervisor::on_line(GObject *stream, GAsyncResult *result, gpointer data) {
  GError *error = nullptr;
  gchar *line =
      g_data_input_stream_read_line_finish(G_DATA_INPUT_STREAM(stream), result, nullptr, &error);
  if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {  // `data` may be gone
    g_error_free(error);
    return;
  }
  g_clear_error(&error);
  if (!line) return;  // the worker closed its stdout: it is ending
  auto *worker = static_cast<Worker *>(data);
  unsigned gpu = 0;
  const std::string stopped = camera_stopped_line("");
  guint64 generation = 0;
  int consumed = 0;
  if (sscanf(line, "gpu-failed %u", &gpu) == 1) {
    worker->supervisor->gpu_failed(gpu);
  } else if (g_str_has_prefix(line, stopped.c_str())) {
    worker->supervisor->camera_stopped(line + stopped.size());
  } else if (sscanf(line, "loaded %" G_GUINT64_FORMAT " %n", &generation, &consumed) == 1) {
    std::set<std::string> running;
    gchar **names = g_strsplit(line + consumed, ",", -1);
    for (gchar **name = names; *name; ++name)
      if (**name) running.insert(*name);
    g_strfreev(names);
    worker->supervisor->worker_loaded(worker->gpu, generation, running);
  }
  g_free(line);
  worker->supervisor->read_line(*worker);
}

void Supervisor::on_exit(GObject *process, GAsyncResult *result, gpointer data) {
  GError *error = nullptr;
  g_subprocess_wait_finish(G_SUBPROCESS(process), result, &error);
  if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
    g_error_free(error);
    return;
  }
  g_clear_error(&error);
  auto *worker = static_cast<Worker *>(data);
  Supervisor *self = worker->supervisor;
  const double ran_s = (g_get_monotonic_time() - worker->started_us) / 1e6;
  worker->last_exit = exit_text(worker->process);
  g_cancellable_cancel(worker->cancel);
  g_clear_object(&worker->cancel);
  g_clear_object(&worker->events);
  g_clear_object(&worker->process);
  const long pid = worker->pid;
  worker->pid = 0;
  // Its cameras died with it: nothing of them runs until it is back.
  std::vector<std::string> died;
  for (const auto &[camera, gpu] : self->assignment_.cameras)
    if (gpu == worker->gpu) died.push_back(camera);
  for (const auto &[camera, left] : self->leaving_)
    if (left.first == worker->gpu) died.push_back(camera);
  for (const std::string &camera : died) self->camera_stopped(camera);
  if (self->shutting_down_) {
    log_line("worker of %s (pid %ld) %s", worker_name(worker->gpu).c_str(), pid,
             worker->last_exit.c_str());
    self->finish_shutdown();
    return;
  }
  if (!worker->wanted) {
    log_line("worker of %s (pid %ld) %s: stopped", worker_name(worker->gpu).c_str(), pid,
             worker->last_exit.c_str());
    return;
  }
  worker->backoff_s =
      ran_s >= kSteadySeconds
          ? 0
          : std::clamp(2 * worker->backoff_s, kFirstBackoffSeconds, kLastBackoffSeconds);
  worker->restarts++;
  log_line("worker of %s (pid %ld) %s after %.1f s: restarting it in %.0f s",
           worker_name(worker->gpu).c_str(), pid, worker->last_exit.c_str(), ran_s,
           worker->backoff_s);
  if (worker->backoff_s == 0) {
    self->spawn(*worker);
    return;
  }
  self->restart_later(*worker);
}

void Supervisor::restart_later(Worker &worker) {
  worker.restart_timer = g_timeout_add(
      static_cast<guint>(worker.backoff_s * 1000),
      [](gpointer data) -> gboolean {
        auto *w = static_cast<Worker *>(data);
        w->supervisor->spawn(*w);
        return G_SOURCE_REMOVE;
      },
      &worker);
}

void Supervisor::gpu_failed(unsigned gpu) {
  if (placement_.failed(gpu)) return;
  std::vector<std::string> moved = placement_.fail(gpu);
  assignment_.failed.insert(gpu);
  int elsewhere = 0;
  for (const std::string &name : moved) {
    const int to = config_.gpu_failure == "move" ? placement_.place(name) : -1;
    if (to >= 0) {
      assignment_.cameras[name] = static_cast<unsigned>(to);
      elsewhere++;
    } else {
      on_cpu_.insert(name);  // its worker runs it on the CPU
    }
  }
  log_line(
      "GPU %u failed: %d of its %zu cameras move to the other GPUs' workers, %zu stay on "
      "the CPU",
      gpu, elsewhere, moved.size(), moved.size() - elsewhere);
  hand_out_run_files();
}

void Supervisor::tell_workers() {
  for (auto &[gpu, worker] : workers_)
    if (worker->process) g_subprocess_send_signal(worker->process, SIGHUP);
}

void Supervisor::reload() {
  if (config_path_.empty()) {
    log_line("SIGHUP: no config file to read again (the cameras came from the command line)");
    return;
  }
  if (fleet_) {
    log_line(
        "SIGHUP: a fleet host reads its file at its start only; its cameras change in etcd "
        "(cudanms-service fleet add, remove, import)");
    return;
  }
  ServiceConfig next;
  std::vector<std::string> errors;
  std::string text;
  if (load_checked_config(config_path_, &next, &errors, -1, &text) && next.gpus.empty())
    errors.push_back(config_path_ +
                     ":service:gpus: a worker per GPU needs a GPU; "
                     "gpus = none takes a restart with workers = one");
  if (!errors.empty()) {
    for (const std::string &e : errors) log_line("%s", e.c_str());
    log_line("SIGHUP: %s has %zu errors: nothing changed, the cameras run on as before",
             config_path_.c_str(), errors.size());
    return;
  }
  log_line("SIGHUP: reading %s again", config_path_.c_str());
  if (next.workers == "one") log_line("SIGHUP: workers = one takes a restart; per GPU until then");
  if (next.metrics_address != config_.metrics_address || web_tls(next) != web_tls(config_))
    metrics_.listen_again(next.metrics_address, web_tls(next));
  metrics_.set_host_credential(next.host_credential);
  // Made again with the new CA or credential.
  if (next.tls_ca != config_.tls_ca || next.host_credential != config_.host_credential)
    g_clear_object(&hosts_session_);
  status_.apply(next);
  apply(std::move(next), std::move(text));
}

void Supervisor::apply(ServiceConfig next, std::string text,
                       const std::map<std::string, std::string> &seeds) {
  config_ = std::move(next);
  config_text_ = std::move(text);
  const std::map<std::string, unsigned> before = assignment_.cameras;
  assign();
  // Each camera that left its worker: stopped once the worker says so, or says it runs a later
  // assignment without it; at once when the worker is down.
  for (const auto &[camera, gpu] : before) {
    const auto now = assignment_.cameras.find(camera);
    if (now != assignment_.cameras.end() && now->second == gpu) continue;
    const auto worker = workers_.find(gpu);
    if (worker == workers_.end() || !worker->second->process) {
      if (now == assignment_.cameras.end()) camera_stopped(camera);
      continue;
    }
    leaving_[camera] = {gpu, assignment_.generation + 1};  // the generation written below
  }
  // The counts a fleet's camera just taken goes on from, where its worker reads them when it
  // starts the camera.
  for (const auto &[camera, counted] : seeds) {
    const std::string path = run_dir_ + "/" + counts_file_name(camera, assignment_.epochs[camera]);
    GError *gerror = nullptr;
    if (!g_file_set_contents(path.c_str(), counted.c_str(), -1, &gerror)) {
      log_line("fleet: camera %s: cannot hand its counts over: %s", camera.c_str(),
               gerror->message);
      g_clear_error(&gerror);
    }
  }
  if (hand_out_run_files()) forget_removed_counts();
}

bool Supervisor::hand_out_run_files() {
  std::string error;
  if (!write_run_files(&error)) {
    log_line("%s: the workers run on as before", error.c_str());
    return false;
  }
  // The workers running now read the new files on SIGHUP; those started now read them anyway.
  tell_workers();
  start_workers();
  return true;
}

void Supervisor::shutdown(std::function<void()> done) {
  shutting_down_ = true;
  shut_down_ = std::move(done);
  for (auto &[gpu, worker] : workers_) {
    if (worker->restart_timer) g_source_remove(worker->restart_timer);
    worker->restart_timer = 0;
    if (worker->process) g_subprocess_send_signal(worker->process, SIGTERM);
  }
  finish_shutdown();
}

void Supervisor::finish_shutdown() {
  if (!shut_down_) return;
  for (const auto &[gpu, worker] : workers_)
    if (worker->process) return;
  status_.offline();
  std::function<void()> done = std::move(shut_down_);
  shut_down_ = nullptr;
  done();
}

}  // namespace cudanms::service
