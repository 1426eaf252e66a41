#include "fleet_plan.h"

#include <algorithm>
#include <cmath>

namespace cudanms::service {
namespace {

struct Load {
  int capacity = 1;
  int owned = 0;
};

// Host a fills less of its capacity than b (then has the larger capacity, then the lower id).
bool emptier(const std::pair<const std::string, Load> &a,
             const std::pair<const std::string, Load> &b) {
  const long long left = static_cast<long long>(a.second.owned) * b.second.capacity;
  const long long right = static_cast<long long>(b.second.owned) * a.second.capacity;
  if (left != right) return left < right;
  if (a.second.capacity != b.second.capacity) return a.second.capacity > b.second.capacity;
  return a.first < b.first;
}

}  // namespace

FleetPlan plan_fleet(const FleetView &view, const std::string &me) {
  FleetPlan plan;
  std::map<std::string, Load> loads;
  int total_capacity = 0;
  for (const auto &[host, capacity] : view.hosts) {
    loads[host].capacity = std::max(1, capacity);
    total_capacity += loads[host].capacity;
  }
  if (loads.empty()) return plan;
  std::map<std::string, std::vector<std::string>> held;  // host -> its cameras, in id order
  std::vector<std::string> unowned;
  for (const std::string &camera : view.cameras) {
    const auto owner = view.owners.find(camera);
    if (owner == view.owners.end()) {
      unowned.push_back(camera);
    } else if (loads.count(owner->second)) {
      loads[owner->second].owned++;
      held[owner->second].push_back(camera);
    }
  }

  // Unowned cameras, one at a time, to the emptiest host with room.
  for (const std::string &camera : unowned) {
    auto best = loads.end();
    for (auto it = loads.begin(); it != loads.end(); ++it)
      if (it->second.owned < it->second.capacity && (best == loads.end() || emptier(*it, *best)))
        best = it;
    if (best == loads.end()) break;  // the fleet is full: the rest wait for room
    best->second.owned++;
    if (best->first == me) plan.claims.push_back(camera);
  }

  // Shares: the cameras in proportion to the capacities. What the hosts under theirs lack is
  // what the hosts over theirs give up, the fullest first.
  const double cameras = static_cast<double>(view.cameras.size());
  int lacking = 0;
  std::vector<std::pair<int, std::string>> excess;  // (cameras over the share, host)
  for (const auto &[host, load] : loads) {
    const double share = cameras * load.capacity / total_capacity;
    const int floor_share = std::min(load.capacity, static_cast<int>(std::floor(share + 1e-9)));
    const int ceil_share = static_cast<int>(std::ceil(share - 1e-9));
    if (load.owned < floor_share) lacking += floor_share - load.owned;
    if (load.owned > ceil_share) excess.push_back({load.owned - ceil_share, host});
  }
  std::sort(excess.begin(), excess.end(), [](const auto &a, const auto &b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  for (const auto &[over, host] : excess) {
    const int giving = std::min(over, lacking);
    lacking -= giving;
    if (host != me || giving <= 0) continue;
    const std::vector<std::string> &mine = held[me];
    for (int i = 0; i < giving && i < static_cast<int>(mine.size()); ++i)
      plan.releases.push_back(mine[mine.size() - 1 - i]);
  }
  return plan;
}

}  // namespace cudanms::service
