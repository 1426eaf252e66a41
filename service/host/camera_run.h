// What the service and its supervisor decide for a running camera, never its config: whether it
// runs on the CPU, where what it counted is kept while workers and hosts come and go, and where
// its events are kept to look back on.
#pragma once

#include <glib.h>

#include <memory>
#include <string>
#include <vector>

namespace cudanms::service {

class EventHistory;  // event_history.h

// A fleet host's camera: where its counts and its events not yet acknowledged by the broker are
// kept in etcd, written only while the host's lease owns the camera (fleet_store.h).
struct FleetStoreConfig {
  std::vector<std::string> endpoints;  // none: not a fleet's camera
  std::string owner_key, state_key;
  long long lease = 0;
};

struct CameraRun {
  // The camera's GPU failed, or it has none to run on (gpus = none): it runs on the CPU
  // (backend=cpu on every element that has one).
  bool on_cpu = false;
  // A worker's camera: where its counts are kept across the worker's deaths (counting_file.h);
  // "" for none.
  std::string counts_file;
  FleetStoreConfig fleet_store;
  // Where its events are kept to look back on (nullptr: nowhere), marked with `host`.
  std::shared_ptr<EventHistory> history;
  // Where each counting event's picture goes (SNAPSHOTS/CAMERA/ID.jpg, its path in the history);
  // "" for none.
  std::string snapshots;
  guint64 snapshots_size = 0;  // the most bytes of pictures under `snapshots`; 0: any
  std::string host;
};

}  // namespace cudanms::service
