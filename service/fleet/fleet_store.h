// A fleet camera's counts and its undelivered events in etcd (docs/fleet.md), written by the
// host whose lease owns the camera and by no other: each write is a transaction that holds only
// while the camera's owner key is still under that lease, so that a host whose lease ran out
// (frozen, cut off from etcd) writes nothing over what the next owner counts. The counts go to
// the camera's state key; each event to STATE_KEY/events/ID (the outbox) until the broker has
// acknowledged it, so that the next owner sends again what the broker may never have had.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>

#include "camera_run.h"
#include "etcd.h"

namespace cudanms::service {

class FleetStore {
 public:
  // Made on the main loop (its client's session lives there).
  explicit FleetStore(FleetStoreConfig config);

  enum class Outcome { kStored, kNotOwner, kFailed };
  // Blocking, from a streaming thread: `state` (counting_json without the undelivered events)
  // stored, `sent` put into the outbox and `delivered` taken out of it, at once; kNotOwner when
  // this host's lease no longer owns the camera, kFailed (and `why`) when etcd did not answer.
  Outcome save(const std::string &state, const std::map<guint64, std::string> &sent,
               const std::set<guint64> &delivered, std::string *why);
  // The outbox's key of event `id` (ids in order as keys are).
  static std::string event_key(const std::string &state_key, guint64 id);

 private:
  const FleetStoreConfig config_;
  std::shared_ptr<EtcdClient> client_;
};

}  // namespace cudanms::service
