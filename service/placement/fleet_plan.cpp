#include "fleet_plan.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace cudanms::service {
namespace {

struct Load {
  int capacity = 1;
  int owned = 0;
  int floor_share = 0, ceil_share = 0;  // its share of the cameras, rounded down and up

  // 0 under its share rounded down, 1 under it rounded up, 2 at it: who gets a camera first.
  int tier() const { return owned < floor_share ? 0 : owned < ceil_share ? 1 : 2; }
};

// Host a should get the next camera before b: the lower tier, then the emptier (the less of its
// capacity filled), then the larger capacity, then the lower id.
bool first_to_fill(const std::pair<const std::string, Load> &a,
                   const std::pair<const std::string, Load> &b) {
  if (a.second.tier() != b.second.tier()) return a.second.tier() < b.second.tier();
  const long long left = static_cast<long long>(a.second.owned) * b.second.capacity;
  const long long right = static_cast<long long>(b.second.owned) * a.second.capacity;
  if (left != right) return left < right;
  if (a.second.capacity != b.second.capacity) return a.second.capacity > b.second.capacity;
  return a.first < b.first;
}

// Every host's capacity and its share of the cameras: in proportion to the capacities.
std::map<std::string, Load> loads_of(const FleetView &view) {
  std::map<std::string, Load> loads;
  int total_capacity = 0;
  for (const auto &[host, capacity] : view.hosts) {
    loads[host].capacity = std::max(1, capacity);
    total_capacity += loads[host].capacity;
  }
  const double cameras = static_cast<double>(view.cameras.size());
  for (auto &[host, load] : loads) {
    const double share = cameras * load.capacity / total_capacity;
    load.floor_share = std::min(load.capacity, static_cast<int>(std::floor(share + 1e-9)));
    load.ceil_share = std::min(
        load.capacity, std::max(load.floor_share, static_cast<int>(std::ceil(share - 1e-9))));
  }
  return loads;
}

// How many of its cameras `me` gives up. What the hosts under their shares (rounded down) lack,
// the others give up: first those over theirs (rounded up), the fullest first, then, while some
// still lack, those over theirs rounded down (two hosts that join take their shares even where
// every other host holds exactly its own rounded up); last, what is still over a share rounded up
// goes where a host is under its own. The cameras given up go to those that lack first (their
// tier).
int given_up(const std::map<std::string, Load> &loads, const std::string &me) {
  int lacking = 0, room = 0;  // under the shares rounded down; between them and rounded up
  std::vector<std::pair<int, std::string>> over_ceil, over_floor;  // (cameras, host)
  for (const auto &[host, load] : loads) {
    lacking += std::max(0, load.floor_share - load.owned);
    room += std::max(0, load.ceil_share - std::max(load.owned, load.floor_share));
    if (load.owned > load.ceil_share) over_ceil.push_back({load.owned - load.ceil_share, host});
    if (load.owned > load.floor_share)
      over_floor.push_back({std::min(load.owned, load.ceil_share) - load.floor_share, host});
  }
  auto fullest_first = [](const auto &a, const auto &b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  std::sort(over_ceil.begin(), over_ceil.end(), fullest_first);
  std::sort(over_floor.begin(), over_floor.end(), fullest_first);
  int giving = 0;
  auto give = [&](std::vector<std::pair<int, std::string>> &givers, int *wanted) {
    for (auto &[over, host] : givers) {
      const int given = std::min(over, *wanted);
      *wanted -= given;
      over -= given;
      if (host == me) giving += given;
    }
  };
  give(over_ceil, &lacking);
  give(over_floor, &lacking);
  give(over_ceil, &room);
  return giving;
}

}  // namespace

FleetPlan plan_fleet(const FleetView &view, const std::string &me) {
  FleetPlan plan;
  std::map<std::string, Load> loads = loads_of(view);
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

  // Unowned cameras, one at a time, to the host with room that should fill first: the hosts
  // with room kept in that order (a site of 100 hosts and 3 000 new cameras is 3 000 picks,
  // each log(hosts)).
  using Host = std::map<std::string, Load>::iterator;
  auto before = [](Host a, Host b) { return first_to_fill(*a, *b); };
  std::set<Host, decltype(before)> with_room(before);
  for (auto it = loads.begin(); it != loads.end(); ++it)
    if (it->second.owned < it->second.capacity) with_room.insert(it);
  for (const std::string &camera : unowned) {
    if (with_room.empty()) break;  // the fleet is full: the rest wait for room
    const Host best = *with_room.begin();
    with_room.erase(with_room.begin());
    best->second.owned++;
    if (best->second.owned < best->second.capacity) with_room.insert(best);
    if (best->first == me) plan.claims.push_back(camera);
  }

  const std::vector<std::string> &mine = held[me];
  const int giving = given_up(loads, me);
  for (int i = 0; i < giving && i < static_cast<int>(mine.size()); ++i)
    plan.releases.push_back(mine[mine.size() - 1 - i]);
  return plan;
}

}  // namespace cudanms::service
