// Which GPU each camera runs on (service/placement/placement.h), over fake GPU lists: balanced by measured
// load, steady across restarts, pinned cameras counted, a failed GPU's cameras handed back.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "placement.h"

namespace cudanms::service {
namespace {

TEST(Placement, CamerasSpreadOverTheGpusByCountWhileNothingIsMeasured) {
  Placement placement({0, 1, 2});
  std::vector<int> got;
  for (int i = 0; i < 7; ++i) got.push_back(placement.place("cam" + std::to_string(i)));
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 0, 1, 2, 0}));
  EXPECT_EQ(placement.loads().at(0).cameras, 3);
  EXPECT_EQ(placement.loads().at(2).cameras, 2);
}

TEST(Placement, ACameraKeepsItsGpuAcrossRestarts) {
  Placement placement({0, 1});
  EXPECT_EQ(placement.place("a"), 0);
  EXPECT_EQ(placement.place("b"), 1);
  placement.set_load("a", 0.9);
  EXPECT_EQ(placement.place("a"), 0);  // a reconnect or a changed setting: the same GPU
  placement.release("a");              // removed from the config
  EXPECT_EQ(placement.place("c"), 0);
}

TEST(Placement, ANewCameraGoesWhereTheMeasuredLoadIsLeast) {
  Placement placement({0, 1, 2});
  for (const char *name : {"a", "b", "c", "d", "e", "f"}) placement.place(name);
  // GPU 0 holds a and d, 1 b and e, 2 c and f: one heavy camera on 1 outweighs two light ones.
  placement.set_load("a", 0.1);
  placement.set_load("d", 0.1);
  placement.set_load("b", 0.5);
  placement.set_load("e", 0.0);
  placement.set_load("c", 0.3);
  placement.set_load("f", 0.3);
  EXPECT_EQ(placement.place("g"), 0);
  placement.set_load("g", 0.6);
  EXPECT_EQ(placement.place("h"), 1);
  EXPECT_DOUBLE_EQ(placement.loads().at(0).load, 0.8);
}

TEST(Placement, PinnedCamerasCountOnTheirGpuAndFreeItWhenUnpinned) {
  Placement placement({0, 1});
  placement.pin("fixed", 0);
  placement.set_load("fixed", 0.7);
  EXPECT_EQ(placement.place("a"), 1);
  EXPECT_EQ(placement.place("b"), 1);  // 1 holds a camera of no load yet, 0 one of 0.7
  placement.set_load("a", 0.4);
  placement.set_load("b", 0.4);
  EXPECT_EQ(placement.place("c"), 0);
  placement.set_load("c", 1.0);
  // Its gpu-id removed from the config: placed like any camera, where the load is least now.
  EXPECT_EQ(placement.place("fixed"), 1);
}

TEST(Placement, AFailedGpuHandsBackItsCamerasAndTakesNoMore) {
  Placement placement({0, 1, 2});
  for (const char *name : {"a", "b", "c", "d", "e", "f"}) placement.place(name);
  placement.pin("fixed", 1);
  std::vector<std::string> moved = placement.fail(1);
  EXPECT_EQ(moved, (std::vector<std::string>{"b", "e", "fixed"}));
  EXPECT_TRUE(placement.failed(1));
  EXPECT_FALSE(placement.failed(0));
  // The others keep their GPUs; the moved ones go to 0 and 2.
  EXPECT_EQ(placement.place("a"), 0);
  EXPECT_EQ(placement.place("c"), 2);
  for (const std::string &name : moved) EXPECT_NE(placement.place(name), 1) << name;
  EXPECT_EQ(placement.loads().at(1).cameras, 0);
  // Every GPU failed: nowhere to go.
  placement.fail(0);
  placement.fail(2);
  EXPECT_EQ(placement.place("a"), -1);
  EXPECT_EQ(placement.loads().size(), 3u);
}

TEST(Placement, ANewGpuListPlacesTheCamerasThatStartAfterIt) {
  Placement placement({0, 1});
  EXPECT_EQ(placement.place("a"), 0);
  EXPECT_EQ(placement.place("b"), 1);
  placement.set_gpus({2});
  EXPECT_EQ(placement.place("c"), 2);
  EXPECT_EQ(placement.place("a"), 0);  // placed before: stays
  EXPECT_EQ(placement.loads().count(1), 1u);
}

TEST(Placement, NoGpusPlaceNothing) {
  Placement placement;
  EXPECT_EQ(placement.place("a"), -1);
  EXPECT_TRUE(placement.loads().empty());
}

}  // namespace
}  // namespace cudanms::service
