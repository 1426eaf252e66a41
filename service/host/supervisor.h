// The service as a worker process per GPU (workers = per-gpu; a fleet host's, or one for the CPU
// where there is no GPU): the supervisor reads the config,
// assigns each camera to a GPU (placement.h: its gpu-id, else the GPU with the fewest cameras;
// a camera keeps its GPU across reloads and restarts), writes config and assignment into its run
// directory (assignment.h) and runs a worker per GPU: this program again, a Service of that GPU's
// cameras alone. A worker that dies (a crash, a driver fault, SIGKILL) is restarted at once, or
// after a back-off of 1 s doubling to 30 s when it keeps dying; the other GPUs' cameras do not
// notice. The supervisor keeps what is the whole service's: /metrics and /health, merged from
// the workers' (worker_merge.h), and the service's status on MQTT. SIGHUP re-reads the config
// and tells each worker; a GPU failure a worker reports moves its cameras to the other workers
// (gpu-failure = move). Workers die with the supervisor (PR_SET_PDEATHSIG: SIGTERM, which
// finalises their outputs). A fleet host's supervisor takes its cameras from its FleetAgent
// instead of its file, and passes the agent's fence on to the workers (fence.h). Runs on the
// main loop.
#pragma once

#include <gio/gio.h>
#include <libsoup/soup.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "assignment.h"
#include "config.h"
#include "event_history.h"
#include "fleet_agent.h"
#include "host.h"
#include "metrics.h"
#include "other_hosts.h"

namespace cudanms::service {

struct WorkerAnswer;  // worker_merge.h

class Supervisor : public Host {
 public:
  // `config_path`: re-read on reload, "" for cameras from the command line; `config_text`: what
  // `config` was parsed from, handed to the workers as it is.
  Supervisor(std::string config_path, std::string config_text, ServiceConfig config);
  ~Supervisor();
  Supervisor(const Supervisor &) = delete;
  Supervisor &operator=(const Supervisor &) = delete;

  // The run directory, the endpoint, then a worker per GPU; false with the reason.
  bool start(std::string *error);
  void reload();
  // SIGTERM to every worker (each finalises its outputs), then `done` once all have exited.
  void shutdown(std::function<void()> done);

  // Called when this host cannot be one of its fleet (fleet_agent.h), with the reason: the
  // service then stops and exits with status 2.
  void on_refused(std::function<void(const std::string &why)> told) { refused_ = std::move(told); }

  // What the lines a worker writes on its stdout say: "gpu-failed N", "camera-stopped NAME".
  static std::string gpu_failed_line(unsigned gpu);
  static std::string camera_stopped_line(const std::string &camera);

 private:
  struct Worker {
    Supervisor *supervisor = nullptr;
    unsigned gpu = 0;                    // or kCpuWorker
    GSubprocess *process = nullptr;      // null while down
    GCancellable *cancel = nullptr;      // this run's reads and wait
    GDataInputStream *events = nullptr;  // its stdout: gpu_failed_line()
    SoupSession *session = nullptr;      // to its endpoint (its Unix socket)
    long pid = 0;
    long restarts = 0;
    gint64 started_us = 0;
    double backoff_s = 0;
    guint restart_timer = 0;
    bool wanted = true;  // false once no camera and no GPU of the config is left to it
    std::string last_exit;
  };

  bool write_run_files(std::string *error);
  // write_run_files(), then every worker told (or started): false, logged, when the files
  // cannot be written (the workers run on as before).
  bool hand_out_run_files();
  // A fleet host's: the cameras its lease owns now, as config text, with the counts of those it
  // has just taken (counting_json), and the lease.
  void run_fleet_config(std::vector<CameraConfig> cameras, const std::string &text,
                        const std::map<std::string, std::string> &seeds, long long lease);
  // A new config to every worker; `seeds`: counts files to write first (run_fleet_config).
  void apply(ServiceConfig next, std::string text,
             const std::map<std::string, std::string> &seeds = {});
  void camera_stopped(const std::string &camera);
  // A worker's "loaded GENERATION NAMES" line: the cameras it runs or is stopping.
  void worker_loaded(unsigned gpu, guint64 generation, const std::set<std::string> &running);
  void assign();                 // every camera of config_ to a GPU's worker
  void forget_removed_counts();  // the counts files of cameras no longer in the config
  void start_workers();
  void spawn(Worker &worker);
  void restart_later(Worker &worker);  // spawn() after worker.backoff_s
  static void on_exit(GObject *process, GAsyncResult *result, gpointer data);
  static void on_line(GObject *stream, GAsyncResult *result, gpointer data);
  void read_line(Worker &worker);
  void gpu_failed(unsigned gpu);
  void tell_workers();  // SIGHUP: read the run directory again
  // The endpoint (supervisor_endpoint.cpp): merged from the workers' answers.
  void serve(const std::string &path, MetricsServer::Respond respond) override;
  // The cameras of workers that did not answer (down, restarting, stopped), as not streaming.
  std::vector<CameraSnapshot> unanswered_cameras(const std::set<unsigned> &answered) const;
  // /metrics and /health: the workers' answers with the supervisor's own.
  std::string merged_metrics(std::vector<WorkerAnswer> answers,
                             const std::vector<CameraSnapshot> &unanswered, double uptime_s) const;
  Reply merged_health(std::vector<WorkerAnswer> answers,
                      const std::vector<CameraSnapshot> &unanswered, double uptime_s) const;
  void forward_snapshot(const std::string &camera, MetricsServer::Respond respond);
  // An event's picture or clip made by another fleet host (a shared history): asked of that host.
  void forward_event_file(const std::string &host, const std::string &path,
                          MetricsServer::Respond respond);
  // A fleet host's /api/cameras: `here` (this host's cameras) with every other host's and the
  // site's cameras that no host runs.
  void serve_site(std::string here, MetricsServer::Respond respond);
  SoupSession *hosts_session();
  // The page's POST (config_edit.h): into the config file, or a fleet's etcd.
  void change(const std::string &path, const std::string &body, const std::string &authorization,
              MetricsServer::Respond respond) override;
  void finish_shutdown();

  std::string config_path_, config_text_;
  std::string run_dir_, executable_;
  Assignment assignment_;
  guint64 next_epoch_ = 1;  // Assignment::epochs
  // on_cpu_ (host.h): run on the CPU by their failed GPU's worker.
  std::map<unsigned, std::unique_ptr<Worker>> workers_;
  std::unique_ptr<FleetAgent> fleet_;      // a fleet host's part in its site
  SoupSession *hosts_session_ = nullptr;   // to the other fleet hosts' endpoints
  OtherHostsCameras other_hosts_;          // their cameras, for the page
  std::shared_ptr<EventHistory> history_;  // what the workers keep, read for /api/events
  // Cameras that left their worker's assignment and may still run there: camera -> (the
  // worker, the generation that left it out).
  std::map<std::string, std::pair<unsigned, guint64>> leaving_;
  std::function<void(const std::string &)> refused_;
};

}  // namespace cudanms::service
