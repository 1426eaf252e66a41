// The fleet's plan (service/placement/fleet_plan.h): every host computes its claims and releases from the
// same view; carried out together, they give every camera exactly one host, within the hosts'
// capacities, each host within its share, with the fewest moves. Checked by simulating the hosts
// acting on their plans, round after round, on random fleets (the seed is printed).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>

#include "fleet_plan.h"
#include "support/seed.h"

namespace cudanms::service {
namespace {

std::set<std::string> names(const char *prefix, int n) {
  std::set<std::string> out;
  for (int i = 0; i < n; ++i) out.insert(prefix + std::to_string(100 + i));
  return out;
}

// Every host's plan carried out at once; the number of cameras that changed hands (releases).
int settle_round(FleetView *view) {
  std::map<std::string, std::string> owners = view->owners;
  int moved = 0;
  for (const auto &[host, capacity] : view->hosts) {
    const FleetPlan plan = plan_fleet(*view, host);
    for (const std::string &camera : plan.releases) {
      EXPECT_EQ(view->owners.at(camera), host) << "a host releases only its own cameras";
      owners.erase(camera);
      moved++;
    }
    for (const std::string &camera : plan.claims) {
      EXPECT_FALSE(view->owners.count(camera)) << "a claim is for an unowned camera";
      // Two hosts claiming one camera: etcd's transaction lets the first have it.
      EXPECT_TRUE(owners.emplace(camera, host).second)
          << camera << " claimed by " << owners[camera] << " and " << host;
    }
  }
  view->owners = owners;
  return moved;
}

// Rounds until no host wants to change anything; the moves.
int settle(FleetView *view) {
  int moves = 0;
  for (int round = 0; round < 50; ++round) {
    bool quiet = true;
    for (const auto &[host, capacity] : view->hosts) {
      const FleetPlan plan = plan_fleet(*view, host);
      quiet = quiet && plan.claims.empty() && plan.releases.empty();
    }
    if (quiet) return moves;
    moves += settle_round(view);
  }
  ADD_FAILURE() << "the plan does not settle";
  return moves;
}

std::map<std::string, int> loads(const FleetView &view) {
  std::map<std::string, int> out;
  for (const auto &[host, capacity] : view.hosts) out[host] = 0;
  for (const auto &[camera, host] : view.owners) out[host]++;
  return out;
}

TEST(FleetPlan, TwelveCamerasOverThreeEqualHostsFourEach) {
  FleetView view;
  view.hosts = {{"a", 8}, {"b", 8}, {"c", 8}};
  view.cameras = names("cam", 12);
  EXPECT_EQ(settle(&view), 0);
  EXPECT_EQ(view.owners.size(), 12u);
  for (const auto &[host, n] : loads(view)) EXPECT_EQ(n, 4) << host;
}

TEST(FleetPlan, ADeadHostsCamerasGoToTheOthersAndNothingElseMoves) {
  FleetView view;
  view.hosts = {{"a", 8}, {"b", 8}, {"c", 8}};
  view.cameras = names("cam", 12);
  settle(&view);
  const auto before = view.owners;
  view.hosts.erase("b");  // its lease ended: its owner keys are gone with it
  for (auto it = view.owners.begin(); it != view.owners.end();)
    it = it->second == "b" ? view.owners.erase(it) : std::next(it);
  EXPECT_EQ(settle(&view), 0) << "the cameras of a and c stay where they are";
  for (const auto &[camera, host] : before) {
    if (host == "b") continue;
    EXPECT_EQ(view.owners.at(camera), host) << camera;
  }
  for (const auto &[host, n] : loads(view)) EXPECT_EQ(n, 6) << host;
}

TEST(FleetPlan, AJoiningHostTakesItsShareAndNoMore) {
  FleetView view;
  view.hosts = {{"a", 8}, {"c", 8}};
  view.cameras = names("cam", 12);
  settle(&view);
  view.hosts["b"] = 8;
  EXPECT_EQ(settle(&view), 4) << "two from a, two from c: the fewest moves";
  for (const auto &[host, n] : loads(view)) EXPECT_EQ(n, 4) << host;
}

TEST(FleetPlan, AFullFleetLeavesTheRestUnownedAndNoneTwice) {
  FleetView view;
  view.hosts = {{"a", 2}, {"b", 3}};
  view.cameras = names("cam", 8);
  settle(&view);
  EXPECT_EQ(view.owners.size(), 5u);
  EXPECT_EQ(loads(view)["a"], 2);
  EXPECT_EQ(loads(view)["b"], 3);
}

TEST(FleetPlan, CapacitiesShareInProportion) {
  FleetView view;
  view.hosts = {{"big", 16}, {"small", 4}};
  view.cameras = names("cam", 10);
  settle(&view);
  EXPECT_EQ(loads(view)["big"], 8);
  EXPECT_EQ(loads(view)["small"], 2);
}

TEST(FleetPlan, NoHostNoPlan) {
  FleetView view;
  view.cameras = names("cam", 3);
  const FleetPlan plan = plan_fleet(view, "a");
  EXPECT_TRUE(plan.claims.empty());
  EXPECT_TRUE(plan.releases.empty());
}

// Random fleets, hosts joining and leaving: every camera that fits has one host, none is run
// twice, no host runs past its capacity, and once settled every host is within one camera of its
// share (where capacities allow).
TEST(FleetPlan, RandomFleetsSettleWithinCapacityAndShare) {
  std::mt19937_64 random(cudanms::testing::run_seed());
  for (int trial = 0; trial < 200; ++trial) {
    FleetView view;
    const int hosts = 1 + static_cast<int>(random() % 5);
    for (int h = 0; h < hosts; ++h)
      view.hosts["h" + std::to_string(h)] = 1 + static_cast<int>(random() % 10);
    view.cameras = names("cam", static_cast<int>(random() % 40));
    for (int step = 0; step < 4; ++step) {
      settle(&view);
      int capacity = 0;
      for (const auto &[host, c] : view.hosts) capacity += c;
      EXPECT_EQ(view.owners.size(),
                std::min<size_t>(view.cameras.size(), static_cast<size_t>(capacity)));
      for (const auto &[host, n] : loads(view)) EXPECT_LE(n, view.hosts[host]) << host;
      // Every host within its share: no more than it rounded up, no fewer than it rounded down
      // (or its capacity).
      const double cameras = static_cast<double>(view.cameras.size());
      for (const auto &[host, n] : loads(view)) {
        const double share = cameras * view.hosts[host] / capacity;
        EXPECT_LE(n, std::max<double>(std::ceil(share - 1e-9), std::floor(share + 1e-9)))
            << host << " settled over its share";
        EXPECT_GE(n, std::min<double>(std::floor(share + 1e-9), view.hosts[host]))
            << host << " settled under its share";
      }
      // A host leaves (its cameras freed) or joins.
      if (random() % 2 && view.hosts.size() > 1) {
        const std::string gone = view.hosts.begin()->first;
        view.hosts.erase(gone);
        for (auto it = view.owners.begin(); it != view.owners.end();)
          it = it->second == gone ? view.owners.erase(it) : std::next(it);
      } else {
        view.hosts["j" + std::to_string(step)] = 1 + static_cast<int>(random() % 10);
      }
    }
  }
}

}  // namespace
}  // namespace cudanms::service
