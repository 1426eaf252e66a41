// The supervisor's endpoint from its workers' (supervisor.h): one /metrics and one /health for
// the whole service, as a single process would give them, so that dashboards and alerts do not
// change with `workers`.
#pragma once

#include <json-glib/json-glib.h>

#include <functional>
#include <string>
#include <vector>

namespace cudanms::service {

// One process's answer: `worker` is its GPU's index, or "supervisor".
struct WorkerAnswer {
  std::string worker;
  std::string body;
};

// The answers' /metrics as one exposition: each family's HELP and TYPE once, then its samples
// from every answer. A camera's sample stays as it is (a camera runs in one worker); a GPU's is
// taken from that GPU's worker alone (the others measure the device too); one that names its
// worker stays too; any other sample, the process's own, gains a worker label.
std::string merge_metrics(const std::vector<WorkerAnswer> &answers);

// A worker as /health shows it.
struct WorkerHealth {
  std::string worker;
  bool up = false;
  long pid = 0;
  long restarts = 0;
  std::string last_exit;  // how it last ended, "" when it never did
};

// The answers' /health documents as one: every camera of every answer, the workers, and the
// status: ok (200) when every enabled camera streams and every worker is up, else degraded
// (503). An answer that is not such a document counts as a degraded one. `more` adds members of
// the supervisor's own (a fleet host's "fleet"), and says whether they are healthy.
std::string merge_health(const std::vector<WorkerAnswer> &answers,
                         const std::vector<WorkerHealth> &workers, double uptime_s, int *status,
                         const std::function<bool(JsonBuilder *)> &more = nullptr);

}  // namespace cudanms::service
