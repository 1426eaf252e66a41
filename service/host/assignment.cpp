#include "assignment.h"

#include <glib.h>

#include <algorithm>
#include <utility>

namespace cudanms::service {

std::string assignment_text(const Assignment &assignment) {
  GKeyFile *file = g_key_file_new();
  for (const auto &[camera, gpu] : assignment.cameras)
    g_key_file_set_uint64(file, "cameras", camera.c_str(), gpu);
  for (const auto &[camera, epoch] : assignment.epochs)
    g_key_file_set_uint64(file, "epochs", camera.c_str(), epoch);
  std::vector<gint> failed(assignment.failed.begin(), assignment.failed.end());
  if (!failed.empty())
    g_key_file_set_integer_list(file, "gpus", "failed", failed.data(), failed.size());
  g_key_file_set_uint64(file, "assignment", "generation", assignment.generation);
  if (!assignment.fleet_endpoints.empty()) {
    std::vector<const gchar *> endpoints;
    for (const std::string &e : assignment.fleet_endpoints) endpoints.push_back(e.c_str());
    g_key_file_set_string_list(file, "fleet", "endpoints", endpoints.data(), endpoints.size());
    g_key_file_set_string(file, "fleet", "keys", assignment.fleet_keys.c_str());
    g_key_file_set_string(file, "fleet", "host", assignment.fleet_host.c_str());
    g_key_file_set_int64(file, "fleet", "lease", assignment.fleet_lease);
  }
  gchar *data = g_key_file_to_data(file, nullptr, nullptr);
  std::string text = data;
  g_free(data);
  g_key_file_free(file);
  return text;
}

bool parse_assignment(const std::string &text, Assignment *assignment, std::string *error) {
  GKeyFile *file = g_key_file_new();
  GError *gerror = nullptr;
  Assignment out;
  bool good = g_key_file_load_from_data(file, text.c_str(), text.size(), G_KEY_FILE_NONE, &gerror);
  if (good) {
    gchar **keys = g_key_file_get_keys(file, "cameras", nullptr, nullptr);
    for (gchar **key = keys; good && key && *key; ++key) {
      const guint64 gpu = g_key_file_get_uint64(file, "cameras", *key, &gerror);
      good = gerror == nullptr;
      if (good) out.cameras[*key] = static_cast<unsigned>(gpu);
    }
    g_strfreev(keys);
    keys = g_key_file_get_keys(file, "epochs", nullptr, nullptr);
    for (gchar **key = keys; good && key && *key; ++key) {
      const guint64 epoch = g_key_file_get_uint64(file, "epochs", *key, &gerror);
      good = gerror == nullptr;
      if (good) out.epochs[*key] = epoch;
    }
    g_strfreev(keys);
  }
  if (good) {
    gsize n = 0;
    gint *failed = g_key_file_get_integer_list(file, "gpus", "failed", &n, nullptr);
    for (gsize i = 0; i < n; ++i) out.failed.insert(static_cast<unsigned>(failed[i]));
    g_free(failed);
    gchar **endpoints = g_key_file_get_string_list(file, "fleet", "endpoints", &n, nullptr);
    for (gsize i = 0; i < n; ++i) out.fleet_endpoints.push_back(endpoints[i]);
    g_strfreev(endpoints);
    gchar *keys = g_key_file_get_string(file, "fleet", "keys", nullptr);
    out.fleet_keys = keys ? keys : "";
    g_free(keys);
    gchar *host = g_key_file_get_string(file, "fleet", "host", nullptr);
    out.fleet_host = host ? host : "";
    g_free(host);
    out.fleet_lease = g_key_file_get_int64(file, "fleet", "lease", nullptr);
    out.generation = g_key_file_get_uint64(file, "assignment", "generation", nullptr);
  }
  if (!good) *error = gerror ? gerror->message : "not a key file";
  g_clear_error(&gerror);
  g_key_file_free(file);
  if (good) *assignment = std::move(out);
  return good;
}

std::string run_config_path(const std::string &run_dir) { return run_dir + "/cameras.conf"; }
std::string run_assignment_path(const std::string &run_dir) { return run_dir + "/assignment"; }
std::string worker_socket_address(const std::string &run_dir, unsigned gpu) {
  return "unix:" + run_dir + "/worker-" + worker_label(gpu) + ".sock";
}
std::string run_lease_path(const std::string &run_dir) { return run_dir + "/fleet-lease"; }

std::string worker_name(unsigned worker) {
  return worker == kCpuWorker ? "the CPU" : "GPU " + std::to_string(worker);
}

std::string worker_label(unsigned worker) {
  return worker == kCpuWorker ? "cpu" : std::to_string(worker);
}

std::string counts_file_prefix(const std::string &camera) {
  gchar *escaped = g_uri_escape_string(camera.c_str(), nullptr, FALSE);
  std::string prefix = std::string("counts-") + escaped + "-";
  g_free(escaped);
  return prefix;
}

std::string counts_file_name(const std::string &camera, guint64 epoch) {
  return counts_file_prefix(camera) + std::to_string(epoch) + ".json";
}

bool stale_counts_file(const std::string &file, const std::set<std::string> &current,
                       const std::set<std::string> &leaving) {
  if (file.rfind("counts-", 0) != 0) return false;
  auto begins = [&](const std::string &prefix) { return file.rfind(prefix, 0) == 0; };
  return !std::any_of(current.begin(), current.end(), begins) &&
         !std::any_of(leaving.begin(), leaving.end(), begins);
}

ServiceConfig worker_config(ServiceConfig all, unsigned gpu, const Assignment &assignment,
                            const std::string &run_dir) {
  const bool failed = gpu == kCpuWorker || assignment.failed.count(gpu) > 0;
  ServiceConfig out = std::move(all);
  std::vector<CameraConfig> mine;
  for (CameraConfig &camera : out.cameras) {
    const auto assigned = assignment.cameras.find(camera.name);
    if (assigned == assignment.cameras.end() || assigned->second != gpu) continue;
    // The assignment places the camera: the worker pins it to its GPU (a gpu-id of the config
    // whose GPU failed was moved here), or runs it on the CPU once the GPU failed.
    camera.gpu_id = failed ? std::nullopt : std::optional<unsigned>(gpu);
    const auto epoch = assignment.epochs.find(camera.name);
    CameraRun &run = out.runs[camera.name];
    run.counts_file =
        run_dir + "/" +
        counts_file_name(camera.name, epoch == assignment.epochs.end() ? 0 : epoch->second);
    if (!assignment.fleet_endpoints.empty())
      run.fleet_store = {assignment.fleet_endpoints,
                         assignment.fleet_keys + "owners/" + camera.name,
                         assignment.fleet_keys + "state/" + camera.name, assignment.fleet_lease};
    mine.push_back(std::move(camera));
  }
  // Its events' host in the history: the supervisor's, which the workers' config leaves out.
  const std::string host_id =
      assignment.fleet_host.empty() ? out.fleet.host_id : assignment.fleet_host;
  const EtcdTls tls = out.fleet.tls;  // its counts' way to etcd
  const EtcdLogin login = out.fleet.login;
  out.fleet = FleetSettings();
  out.fleet.endpoints = assignment.fleet_endpoints;
  out.fleet.host_id = host_id;
  out.fleet.tls = tls;
  out.fleet.login = login;
  out.generation = assignment.generation;
  out.cameras = std::move(mine);
  out.all_gpus = false;
  out.gpus.clear();
  if (!failed) out.gpus.push_back(gpu);
  out.metrics_address = worker_socket_address(run_dir, gpu);
  out.mqtt_address.clear();  // the service's status is the supervisor's; cameras keep theirs
  return out;
}

bool load_worker_config(const std::string &run_dir, unsigned gpu, ServiceConfig *config,
                        std::vector<std::string> *errors) {
  ServiceConfig all;
  if (!load_config(run_config_path(run_dir), &all, errors, -1, nullptr, false)) return false;
  gchar *text = nullptr;
  GError *gerror = nullptr;
  Assignment assignment;
  std::string why;
  if (!g_file_get_contents(run_assignment_path(run_dir).c_str(), &text, nullptr, &gerror)) {
    why = gerror->message;
    g_clear_error(&gerror);
  } else {
    parse_assignment(text, &assignment, &why);
    g_free(text);
  }
  if (!why.empty()) {
    errors->push_back(run_assignment_path(run_dir) + ": " + why);
    return false;
  }
  *config = worker_config(std::move(all), gpu, assignment, run_dir);
  return true;
}

}  // namespace cudanms::service
