// cudanms-service: cameras run for months. Each camera runs in a pipeline of its own (source,
// detector, cudanms, outputs); a camera that fails is reconnected with back-off on its own while
// the others run on; one that stalls is reconnected by the watchdog. /metrics and /health show
// every camera's state; SIGHUP re-reads the config; SIGTERM and SIGINT finalise every output.
//
//   cudanms-service --config cameras.conf           the cameras of a config file
//   cudanms-service --check-config cameras.conf     check it: exit 0, or 2 with every error
//   cudanms-service [options] URL...                one camera a URL, the options as defaults
//   cudanms-service fleet import|add|remove|list    a fleet's cameras in etcd (fleet_cli.h)
//
// A config whose [service] has `fleet = URL,...` makes this host one of a fleet: its cameras
// come from etcd (fleet_agent.h), in worker processes.
// With more than one GPU (or workers = per-gpu) this process supervises a worker process per GPU
// (supervisor.h), each this program again: --worker GPU --run-dir DIR.
//
// Exit status: 0 stopped by a signal, every output finalised; 1 the service could not start (or
// not finalise in time); 2 a usage or config error.
#include <glib-unix.h>
#include <gst/gst.h>
#include <malloc.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "assignment.h"
#include "commandline.h"
#include "config.h"
#include "element_check.h"
#include "fence.h"
#include "fleet_cli.h"
#include "log.h"
#include "service.h"
#include "supervisor.h"

using namespace cudanms::service;

namespace {

constexpr guint kShutdownSeconds = 10;  // past this, the service exits with what it finalised
// A supervisor waits for its workers' own kShutdownSeconds.
constexpr guint kSupervisorShutdownSeconds = kShutdownSeconds + 2;
// glibc gives each new thread an arena of its own, up to 8 a core; every reconnect starts new
// streaming threads, and their arenas' leftovers grew the RSS by 0.1-0.2 MB a reconnect on the
// H100 (1 MB with 16 cameras), where one arena kept it flat (README: Measured). Two arenas, unless
// MALLOC_ARENA_MAX says otherwise.
constexpr int kMallocArenas = 2;

// What the signals act on: a Service, or a Supervisor of workers.
struct Run {
  GMainLoop *loop = nullptr;
  std::function<void(std::function<void()>)> shutdown;
  std::function<void()> reload;
  guint shutdown_seconds = kShutdownSeconds;
  int exit_code = 0;
  int signals = 0;
};

gboolean on_stop_signal(gpointer data, int signal_number) {
  auto *run = static_cast<Run *>(data);
  if (++run->signals > 1) {
    log_line("%s again: exiting now, without finalising", g_strsignal(signal_number));
    _exit(128 + signal_number);
  }
  log_line("%s: stopping every camera and finalising the outputs (again to exit now)",
           g_strsignal(signal_number));
  run->shutdown([run] {
    log_line("stopped");
    g_main_loop_quit(run->loop);
  });
  g_timeout_add_seconds(
      run->shutdown_seconds,
      [](gpointer data) -> gboolean {
        auto *run = static_cast<Run *>(data);
        log_line("not stopped after %u s: exiting with what is finalised", run->shutdown_seconds);
        run->exit_code = 1;
        g_main_loop_quit(run->loop);
        return G_SOURCE_REMOVE;
      },
      run);
  return G_SOURCE_CONTINUE;
}

void add_signals(Run *run) {
  g_unix_signal_add(
      SIGINT, [](gpointer data) -> gboolean { return on_stop_signal(data, SIGINT); }, run);
  g_unix_signal_add(
      SIGTERM, [](gpointer data) -> gboolean { return on_stop_signal(data, SIGTERM); }, run);
  g_unix_signal_add(
      SIGHUP,
      [](gpointer data) -> gboolean {
        static_cast<Run *>(data)->reload();
        return G_SOURCE_CONTINUE;
      },
      run);
}

// Runs `runner` (a Service or a Supervisor) until a signal stops it; the exit status.
template <typename Runner>
int run_until_stopped(Run *run, Runner *runner) {
  run->shutdown = [runner](std::function<void()> done) { runner->shutdown(std::move(done)); };
  run->reload = [runner] { runner->reload(); };
  std::string why;
  if (!runner->start(&why)) {
    log_line("%s", why.c_str());
    return 1;
  }
  g_main_loop_run(run->loop);
  // Pipelines still stopping on their threads: leave without tearing down under them.
  if (run->exit_code != 0) _exit(run->exit_code);
  return 0;
}

// A worker of a supervisor: the cameras the run directory assigns to `gpu` (or kCpuWorker). Its
// signals are handled before it reads the directory: a SIGHUP meanwhile is a reload, not its end.
// A fleet host's worker runs its cameras only while the host's lease is sure to be alive
// (fence.h), and tells the supervisor each camera that has stopped, which another host may then
// take.
int run_worker(unsigned gpu, const std::string &run_dir) {
  static const std::string name =
      "cudanms-service[" + (gpu == kCpuWorker ? std::string("cpu") : "gpu " + std::to_string(gpu)) +
      "]";
  log_name() = name.c_str();
  Run run;
  run.loop = g_main_loop_new(nullptr, FALSE);
  add_signals(&run);
  ServiceConfig config;
  std::vector<std::string> errors;
  if (!load_worker_config(run_dir, gpu, &config, &errors)) {
    for (const std::string &e : errors) log_line("%s", e.c_str());
    return 2;
  }
  const bool fleet = config.fleet.on();
  if (const std::string why = use_etcd(config.fleet.tls, config.fleet.login); !why.empty()) {
    log_line("%s", why.c_str());
    return 2;
  }
  Service service(
      [run_dir, gpu](ServiceConfig *next, std::vector<std::string> *errors) {
        return load_worker_config(run_dir, gpu, next, errors);
      },
      run_config_path(run_dir), std::move(config));
  service.on_gpu_failed([](unsigned failed) {
    g_print("%s\n", Supervisor::gpu_failed_line(failed).c_str());
    fflush(stdout);
  });
  std::unique_ptr<LeaseFence> fence;
  if (fleet) {
    service.on_camera_stopped([](const std::string &camera) {
      g_print("%s\n", Supervisor::camera_stopped_line(camera).c_str());
      fflush(stdout);
    });
    service.on_loaded([](guint64 generation, const std::vector<std::string> &running) {
      std::string names;
      for (const std::string &name : running) names += (names.empty() ? "" : ",") + name;
      g_print("loaded %" G_GUINT64_FORMAT " %s\n", generation, names.c_str());
      fflush(stdout);
    });
    fence = std::make_unique<LeaseFence>(run_lease_path(run_dir),
                                         [&service](bool fenced) { service.set_fenced(fenced); });
  }
  const int status = run_until_stopped(&run, &service);
  fence.reset();
  g_main_loop_unref(run.loop);
  return status;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc > 1 && g_str_equal(argv[1], "fleet")) return run_fleet_command(argc - 1, argv + 1);
  if (!g_getenv("MALLOC_ARENA_MAX")) mallopt(M_ARENA_MAX, kMallocArenas);
  gchar *config_path = nullptr, *check_path = nullptr, *detector = nullptr, *json_dir = nullptr;
  gchar *record_dir = nullptr, *metrics = nullptr, *mqtt = nullptr;
  gchar **sets = nullptr, **urls = nullptr;
  gboolean list_keys = FALSE;
  gchar *worker = nullptr;
  gchar *run_dir = nullptr;
  const GOptionEntry entries[] = {
      {"config", 'c', 0, G_OPTION_ARG_FILENAME, &config_path, "Run the cameras of this config",
       "FILE"},
      {"check-config", 0, 0, G_OPTION_ARG_FILENAME, &check_path,
       "Check a config: exit 0, or 2 with each error as FILE:GROUP:KEY: reason", "FILE"},
      {"keys", 0, 0, G_OPTION_ARG_NONE, &list_keys, "List the config's keys", nullptr},
      {"detector", 0, 0, G_OPTION_ARG_STRING, &detector,
       "With URLs: the detector (a gst-launch description)", "DESC"},
      {"json-dir", 0, 0, G_OPTION_ARG_FILENAME, &json_dir,
       "With URLs: JSON lines to DIR/CAMERA.jsonl", "DIR"},
      {"record-dir", 0, 0, G_OPTION_ARG_FILENAME, &record_dir,
       "With URLs: record MP4 segments into DIR", "DIR"},
      {"metrics-address", 0, 0, G_OPTION_ARG_STRING, &metrics,
       "With URLs: HOST:PORT of /metrics and /health (default 127.0.0.1:9358; \"\": none)", "ADDR"},
      {"mqtt-address", 0, 0, G_OPTION_ARG_STRING, &mqtt, "With URLs: publish to this broker",
       "HOST:PORT"},
      {"set", 0, 0, G_OPTION_ARG_STRING_ARRAY, &sets,
       "With URLs: any other key of the config's [service] group (repeatable)", "KEY=VALUE"},
      {"worker", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &worker,
       "Run as the supervisor's worker of this GPU (or cpu)", "GPU"},
      {"run-dir", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_FILENAME, &run_dir,
       "With --worker: the supervisor's run directory", "DIR"},
      {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_STRING_ARRAY, &urls, nullptr, "URL..."},
      {nullptr, 0, 0, G_OPTION_ARG_NONE, nullptr, nullptr, nullptr}};
  const CommandLineHelp help{
      "[URL...] - cameras run as a service", nullptr,
      "Each camera: source -> detector -> cudanms -> JSON lines, MQTT, MP4 segments. A camera "
      "that fails or stalls reconnects with back-off by itself; the others never notice.\n"
      "Signals: SIGHUP re-reads --config; SIGTERM/SIGINT stop every camera and finalise its "
      "outputs (a second one exits at once).\n"};
  std::string parse_error;
  if (!gst_cv_parse_command_line(help, entries, &argc, &argv, &parse_error)) {
    g_printerr("cudanms-service: %s\n", parse_error.c_str());
    return 2;
  }
  if (list_keys) {
    g_print("[service] and [camera.NAME] keys:\n%s", describe_keys().c_str());
    return 0;
  }

  if (worker && run_dir)
    return run_worker(g_str_equal(worker, "cpu")
                          ? kCpuWorker
                          : static_cast<unsigned>(g_ascii_strtoull(worker, nullptr, 10)),
                      run_dir);

  ServiceConfig config;
  std::vector<std::string> errors;
  const int sources = (config_path != nullptr) + (check_path != nullptr) + (urls != nullptr);
  if (sources != 1) {
    g_printerr("cudanms-service: give --config FILE, --check-config FILE or URLs (one of them)\n");
    return 2;
  }
  if (check_path) {
    if (!load_checked_config(check_path, &config, &errors)) {
      for (const std::string &e : errors) g_printerr("%s\n", e.c_str());
      return 2;
    }
    size_t enabled = 0;
    for (const CameraConfig &c : config.cameras) enabled += c.enabled;
    g_print("%s: good: %zu cameras (%zu enabled)\n", check_path, config.cameras.size(), enabled);
    return 0;
  }
  std::string path, text;
  if (config_path) {
    path = config_path;
    if (!load_checked_config(path, &config, &errors, -1, &text)) {
      for (const std::string &e : errors) g_printerr("%s\n", e.c_str());
      return 2;
    }
  } else {
    std::map<std::string, std::string> keys;
    if (detector) keys["detector"] = detector;
    if (json_dir) keys["json"] = std::string(json_dir) + "/{camera}.jsonl";
    if (record_dir) keys["record-dir"] = record_dir;
    if (metrics) keys["metrics-address"] = metrics;
    if (mqtt) keys["mqtt-address"] = mqtt;
    for (gchar **set = sets; set && *set; ++set) {
      const gchar *equals = strchr(*set, '=');
      if (!equals) {
        g_printerr("cudanms-service: --set takes KEY=VALUE, not %s\n", *set);
        return 2;
      }
      keys[std::string(*set, static_cast<size_t>(equals - *set))] = equals + 1;
    }
    std::vector<std::string> list(urls, urls + g_strv_length(urls));
    text = config_for_urls(list, keys);
    if (!parse_checked_config(text, "command line", &config, &errors)) {
      for (const std::string &e : errors) g_printerr("%s\n", e.c_str());
      return 2;
    }
  }

  if (const std::string why = use_etcd(config.fleet.tls, config.fleet.login); !why.empty()) {
    g_printerr("cudanms-service: %s\n", why.c_str());
    return 2;
  }
  Run run;
  run.loop = g_main_loop_new(nullptr, FALSE);
  add_signals(&run);
  int status;
  if (config.fleet.on() || (config.per_gpu_workers() && !config.gpus.empty())) {
    if (config.fleet.on() && config.gpus.empty())
      log_line("a fleet host: its cameras from etcd, in a worker process for the CPU");
    else if (config.fleet.on())
      log_line("a fleet host: its cameras from etcd, in a worker process per GPU: %zu GPUs",
               config.gpus.size());
    else
      log_line("a worker process per GPU (workers = per-gpu): %zu GPUs", config.gpus.size());
    run.shutdown_seconds = kSupervisorShutdownSeconds;
    Supervisor supervisor(path, text, std::move(config));
    supervisor.on_refused([&run, &supervisor](const std::string &why) {
      log_line("%s", why.c_str());
      run.exit_code = 2;
      supervisor.shutdown([&run] { g_main_loop_quit(run.loop); });
    });
    status = run_until_stopped(&run, &supervisor);
  } else {
    if (config.per_gpu_workers())
      log_line("workers = per-gpu with no GPU to run on: every camera in this process");
    Service::ConfigSource source;
    if (!path.empty())
      source = [path](ServiceConfig *next, std::vector<std::string> *errors) {
        return load_checked_config(path, next, errors);
      };
    Service service(source, path, std::move(config));
    service.edit_file(path);
    status = run_until_stopped(&run, &service);
  }
  g_main_loop_unref(run.loop);
  return status;
}
