// Which worker runs each camera when the service runs a worker process per GPU (supervisor.h).
// The supervisor writes the config it read and this assignment into its run directory; each
// worker reads both, at its start and at every SIGHUP, and runs its own GPU's cameras.
#pragma once

#include <glib.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "config.h"

namespace cudanms::service {

// The worker of a host without GPUs (gpus = none): its cameras run on the CPU.
constexpr unsigned kCpuWorker = 0xffffffffu;
// "GPU N", or "the CPU", for the log; "N" or "cpu" for the metrics' worker label.
std::string worker_name(unsigned worker);
std::string worker_label(unsigned worker);

struct Assignment {
  std::map<std::string, unsigned> cameras;  // camera -> the GPU of the worker that runs it
  // camera -> the reload that brought it into the config: its counts file's (a camera removed and
  // added again starts counting anew, as in one process; one moved to another worker goes on).
  std::map<std::string, guint64> epochs;
  std::set<unsigned> failed;  // GPUs a CUDA failure took out
  // A fleet host's (fleet_agent.h): etcd's endpoints, the site's folder of keys
  // (PREFIX/SITE/) and the lease that owns the cameras now (0: none), for the cameras' counts;
  // its host id, for their events in the history.
  std::vector<std::string> fleet_endpoints;
  std::string fleet_keys;
  std::string fleet_host;
  long long fleet_lease = 0;
  // Counts the assignments the supervisor wrote: a worker says which one it runs (its "loaded"
  // line), so that a camera that left it is known to have stopped even if it never started.
  guint64 generation = 0;
};

// As a key file: [cameras] NAME = GPU, [epochs] NAME = N, [gpus] failed = LIST, [fleet]
// endpoints = LIST, keys = FOLDER, host = ID, lease = ID, [assignment] generation = N.
std::string assignment_text(const Assignment &assignment);
// False with the reason when `text` is not such a key file.
bool parse_assignment(const std::string &text, Assignment *assignment, std::string *error);

// The run directory's files.
std::string run_config_path(const std::string &run_dir);
std::string run_assignment_path(const std::string &run_dir);
std::string worker_socket_address(const std::string &run_dir, unsigned gpu);  // unix:PATH
std::string run_lease_path(const std::string &run_dir);  // a fleet host's fence (fence.h)
// Where a camera's counts are kept (counting_file.h): counts-NAME-EPOCH.json, NAME escaped.
std::string counts_file_name(const std::string &camera, guint64 epoch);
std::string counts_file_prefix(const std::string &camera);  // of any epoch's
// Whether `file`, a name in the run directory, is a counts file no camera uses any more: neither
// one of `current` (counts_file_name) nor a temporary of one being written (its name and a
// suffix: the worker writes a file whole and renames it), nor any file of a camera in
// `leaving` (counts_file_prefix: still stopping, it writes its file to the last).
bool stale_counts_file(const std::string &file, const std::set<std::string> &current,
                       const std::set<std::string> &leaving);

// What the worker of `gpu` runs of `all`: the cameras assigned to it, on its GPU (or on the CPU:
// the CPU's worker, or once its GPU failed: their cameras stay there, as gpu-failure = cpu or no
// GPU left has it), its endpoint on its socket, its counts in the run directory (and a fleet's in
// etcd), and no service status on MQTT (the supervisor's).
ServiceConfig worker_config(ServiceConfig all, unsigned gpu, const Assignment &assignment,
                            const std::string &run_dir);

// The worker's config as its run directory has it now; false with every error.
bool load_worker_config(const std::string &run_dir, unsigned gpu, ServiceConfig *config,
                        std::vector<std::string> *errors);

}  // namespace cudanms::service
