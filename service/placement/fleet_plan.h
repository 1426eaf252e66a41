// Where a fleet's cameras should run, as each host works it out from what etcd shows it: the
// live hosts and their capacities, the cameras, which host owns which. Every host computes the
// same plan from the same view, and acts only on its own part of it (its claims and releases);
// etcd's transactions settle what views that differ for a moment would both try.
//
// - A host's share is the cameras in proportion to the capacities (at most its capacity).
// - A camera no host owns goes to the host with room that is furthest under its share (under it
//   rounded down, then under it rounded up), then whose cameras fill the least of its capacity
//   (then the larger capacity, then the lower host id), one camera at a time in id order.
// - A camera that runs stays where it is, unless the hosts are not all within their shares
//   (rounded down to rounded up): then the fewest cameras move that bring every host within
//   its own, the highest ids of the fullest hosts first (those over their shares rounded up
//   first). A host that joins takes its share from the others this way, and no more: a
//   rebalance is not a reshuffle.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace cudanms::service {

struct FleetView {
  std::map<std::string, int> hosts;           // live host -> capacity (cameras)
  std::set<std::string> cameras;              // cameras to run: valid and enabled
  std::map<std::string, std::string> owners;  // camera -> the host that runs it
};

struct FleetPlan {
  std::vector<std::string> claims;    // unowned cameras this host should take
  std::vector<std::string> releases;  // its cameras it should give up for another host
};

// `me`'s part of the plan. Cameras `me` owns that are not in `view.cameras` are not its
// business here (the host stops those it no longer should run).
FleetPlan plan_fleet(const FleetView &view, const std::string &me);

}  // namespace cudanms::service
