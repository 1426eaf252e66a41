// Lines and zones (cudanms/count.h): the text forms with their errors, and the counter's rules on
// tracks whose true crossings are known.
#include <gtest/gtest.h>

#include <cmath>

#include "cudanms/count.h"

namespace cudanms {
namespace {

std::vector<CountLine> lines_of(const std::string &text, bool normalized = false) {
  std::vector<CountLine> lines;
  std::string error;
  EXPECT_TRUE(parse_lines(text, normalized, &lines, &error)) << error;
  return lines;
}

std::string line_error(const std::string &text, bool normalized = false) {
  std::vector<CountLine> lines;
  std::string error;
  EXPECT_FALSE(parse_lines(text, normalized, &lines, &error)) << text;
  return error;
}

std::string zone_error(const std::string &text) {
  std::vector<CountZone> zones;
  std::string error;
  EXPECT_FALSE(parse_zones(text, false, &zones, &error)) << text;
  return error;
}

TEST(CountParse, Lines) {
  const auto lines = lines_of(" door : 10,20, 30 ,40 ; gate-2:0 0 100 0;");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].name, "door");
  EXPECT_EQ(lines[0].a.x, 10);
  EXPECT_EQ(lines[0].b.y, 40);
  EXPECT_EQ(lines[1].name, "gate-2");
  EXPECT_TRUE(lines_of("").empty());
  EXPECT_TRUE(lines_of(" ; ").empty());
  EXPECT_EQ(lines_of("a:0,0.5,1,0.5", true)[0].a.y, 0.5);
}

TEST(CountParse, LineErrorsSayWhat) {
  EXPECT_EQ(line_error("door"), "\"door\": a line is NAME:x1,y1,x2,y2");
  EXPECT_EQ(line_error("door:1,2,3"), "line \"door\": needs 4 numbers x1,y1,x2,y2, not 3");
  EXPECT_EQ(line_error("door:1,2,1,2"),
            "line \"door\": its two ends are the same point: it has no length");
  EXPECT_EQ(line_error("door:1,2,x,4"), "line \"door\": \"x\" is not a number");
  EXPECT_EQ(line_error("door:1,2,3,4;door:5,6,7,8"), "line \"door\" is given twice");
  EXPECT_EQ(line_error("do or:1,2,3,4"), "line name \"do or\": 1 to 64 letters, digits, - and _");
  EXPECT_EQ(line_error(":1,2,3,4"), "line name \"\": 1 to 64 letters, digits, - and _");
  EXPECT_EQ(line_error("a:0,0,1.5,1", true), "line \"a\": 1.5 is outside 0..1 (normalized=true)");
  EXPECT_EQ(line_error("a:nan,0,1,1"), "line \"a\": \"nan\" is not a number");
  EXPECT_EQ(line_error("a:1e999,0,1,1"), "line \"a\": \"1e999\" is not a number");
}

TEST(CountParse, Zones) {
  std::vector<CountZone> zones;
  std::string error;
  ASSERT_TRUE(parse_zones("lobby:0,0 100,0 100,50 0,50;x:1,1 5,1 3,4", false, &zones, &error));
  ASSERT_EQ(zones.size(), 2u);
  EXPECT_EQ(zones[0].polygon.size(), 4u);
  EXPECT_EQ(zones[1].name, "x");
}

TEST(CountParse, ZoneErrorsSayWhat) {
  EXPECT_EQ(zone_error("z:0,0 10,0"), "zone \"z\": a polygon needs at least 3 points, not 2");
  EXPECT_EQ(zone_error("z:0,0 10,0 5"), "zone \"z\": an odd count of numbers (5): points are x,y");
  // A bow tie: edges 1-2 and 3-4 cross.
  EXPECT_EQ(zone_error("z:0,0 10,10 10,0 0,10"),
            "zone \"z\": the polygon crosses itself: edge 1-2 meets edge 3-4");
  EXPECT_EQ(zone_error("z:0,0 10,0 10,0 0,10"), "zone \"z\": points 2 and 3 are the same");
  EXPECT_EQ(zone_error("z:0,0 5,0 10,0"),
            "zone \"z\": the edges at point 1 fold back on each other");
  EXPECT_EQ(zone_error("z:0,0 10,0 5,0 0,5"),
            "zone \"z\": the edges at point 2 fold back on each other");
  EXPECT_EQ(zone_error("z:0,0 10,0 10,10 0,10;z:1,1 2,2 1,2"), "zone \"z\" is given twice");
}

// One track walking through anchor points (boxes 20 wide, 100 tall, the anchor their bottom).
struct Walk {
  uint64_t id;
  std::vector<std::pair<double, double>> anchors;  // per frame; NaN x: not seen that frame
};

struct Outcome {
  std::vector<CountEvent> events;
  LineCounts counts;
};

Outcome count(const std::string &lines, const std::vector<Walk> &walks, CounterParams params = {}) {
  Counter counter(params);
  counter.set_lines(lines_of(lines));
  size_t frames = 0;
  for (const Walk &w : walks) frames = std::max(frames, w.anchors.size());
  Outcome out;
  for (size_t f = 0; f < frames; ++f) {
    std::vector<CountObservation> seen;
    for (const Walk &w : walks) {
      if (f >= w.anchors.size() || std::isnan(w.anchors[f].first)) continue;
      const auto [x, y] = w.anchors[f];
      seen.push_back({w.id, static_cast<float>(x - 10), static_cast<float>(y - 100),
                      static_cast<float>(x + 10), static_cast<float>(y), 0});
    }
    counter.update(static_cast<int64_t>(f), seen, &out.events);
  }
  out.counts = counter.line_counts(0);
  return out;
}

// The horizontal line y = 200 from x 100 to 300: "in" is downwards (s > 0 below it).
const char kLine[] = "door:100,200,300,200";

std::vector<std::pair<double, double>> straight(double x0, double y0, double x1, double y1,
                                                int steps) {
  std::vector<std::pair<double, double>> out;
  for (int i = 0; i <= steps; ++i)
    out.emplace_back(x0 + (x1 - x0) * i / steps, y0 + (y1 - y0) * i / steps);
  return out;
}

TEST(Counter, InAndOut) {
  const Outcome o =
      count(kLine, {{1, straight(200, 100, 200, 300, 20)}, {2, straight(150, 300, 150, 100, 20)}});
  ASSERT_EQ(o.events.size(), 2u);
  EXPECT_EQ(o.events[0].track_id, 1u);
  EXPECT_EQ(o.events[0].direction, 1);
  EXPECT_EQ(o.events[1].track_id, 2u);
  EXPECT_EQ(o.events[1].direction, -1);
  EXPECT_EQ(o.counts.in, 1u);
  EXPECT_EQ(o.counts.out, 1u);
}

TEST(Counter, TheSignRuleOfTheIssue) {
  // s = (x2-x1)(py-y1) - (y2-y1)(px-x1): a vertical line from (0,0) to (0,100) has s = -100 px,
  // so going from x > 0 (s < 0) to x < 0 (s > 0) is "in".
  Counter counter;
  counter.set_lines(lines_of("v:0,0,0,100"));
  std::vector<CountEvent> events;
  for (int f = 0; f <= 10; ++f) {
    const float x = 50 - 10.0f * f;
    counter.update(f, {{7, x - 5, 0, x + 5, 60, 0}}, &events);
  }
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].direction, 1);
}

TEST(Counter, JitterOnTheLineCountsOnce) {
  // Up to the line, 20 frames jittering +-4 px across it, then on through.
  auto path = straight(200, 100, 200, 198, 10);
  for (int i = 0; i < 20; ++i) path.emplace_back(200, i % 2 ? 196 : 204);
  for (const auto &p : straight(200, 204, 200, 320, 10)) path.push_back(p);
  const Outcome o = count(kLine, {{1, path}});
  EXPECT_EQ(o.counts.in, 1u);
  EXPECT_EQ(o.counts.out, 0u);
  EXPECT_EQ(o.events.size(), 1u);
}

TEST(Counter, JitterWithoutHysteresisCountsEveryCrossing) {
  CounterParams params;
  params.hysteresis = 0;
  params.crossing_frames = 1;
  std::vector<std::pair<double, double>> path = {{200, 190}, {200, 210}, {200, 190}, {200, 210}};
  const Outcome o = count(kLine, {{1, path}}, params);
  EXPECT_EQ(o.counts.in, 2u);
  EXPECT_EQ(o.counts.out, 1u);
}

// The default: a crossing counts on the 4th observation past the band (10 px) on the other side.
TEST(Counter, ACrossingCountsOnceItHeld) {
  // Every 10 px down from 160: 220 is the first beyond the band (210 is on its edge), 250 the 4th.
  const Outcome o = count(kLine, {{1, straight(200, 160, 200, 300, 14)}});
  ASSERT_EQ(o.events.size(), 1u);
  EXPECT_EQ(o.counts.in, 1u);
  std::vector<CountEvent> events;
  Counter counter;
  counter.set_lines(lines_of(kLine));
  int64_t frame = 0, counted_at = -1;
  for (const auto &[x, y] : straight(200, 160, 200, 300, 14)) {
    counter.update(frame, {{1, float(x - 10), float(y - 100), float(x + 10), float(y), 0}},
                   &events);
    if (!events.empty() && counted_at < 0) counted_at = frame;
    ++frame;
  }
  EXPECT_EQ(counted_at, 9) << "frame 9 is y = 250";
}

TEST(Counter, ACrossingThatDoesNotHoldCountsNothing) {
  // The box's bottom jumps past the line and the track ends 3 observations later (its box
  // taken by another object as it left the picture: TUD-Stadtmitte's false crossings).
  auto ends = straight(200, 100, 200, 190, 9);
  for (const auto &p : straight(200, 230, 200, 232, 2)) ends.push_back(p);
  EXPECT_EQ(count(kLine, {{1, ends}}).events.size(), 0u);
  // Past the line twice and back, then over for good: one crossing, no more.
  auto back = straight(200, 100, 200, 190, 9);
  for (const auto &p : {std::pair{200.0, 220.0}, {200.0, 222.0}, {200.0, 150.0}}) back.push_back(p);
  for (const auto &p : straight(200, 150, 200, 300, 15)) back.push_back(p);
  const Outcome o = count(kLine, {{1, back}});
  EXPECT_EQ(o.counts.in, 1u);
  EXPECT_EQ(o.counts.out, 0u);
  // Observations within the band neither hold nor undo a crossing; missed frames do neither.
  auto band = straight(200, 100, 200, 190, 9);
  for (const auto &p : {std::pair{200.0, 215.0}, {200.0, 205.0}, {200.0, 195.0},
                        {NAN, NAN}, {200.0, 220.0}, {NAN, NAN}, {200.0, 225.0}, {200.0, 230.0}})
    band.push_back(p);
  EXPECT_EQ(count(kLine, {{1, band}}).counts.in, 1u);
  CounterParams at_once;
  at_once.crossing_frames = 1;
  EXPECT_EQ(count(kLine, {{1, ends}}, at_once).counts.in, 1u);
}

// Ids changing at the line (a tracker's switch while two people meet, or a track lost and found
// again under a new id): no crossing is counted twice.
TEST(Counter, AnIdChangedMidCrossingIsNotCountedTwice) {
  // Track 1 walks down to the line and ends there; track 2 goes on from just past it.
  auto first = straight(200, 100, 200, 200, 10);
  std::vector<std::pair<double, double>> second(first.size(), {NAN, NAN});
  for (const auto &p : straight(200, 205, 200, 300, 10)) second.push_back(p);
  const Outcome handed_over = count(kLine, {{1, first}, {2, second}});
  EXPECT_EQ(handed_over.counts.in + handed_over.counts.out, 0u);
  // Two people meet on the line and their ids swap there: each id goes back where it came from.
  auto down = straight(200, 100, 200, 198, 7), up = straight(220, 300, 220, 202, 7);
  const auto down_rest = straight(220, 202, 220, 300, 7), up_rest = straight(200, 198, 200, 100, 7);
  auto id1 = down, id2 = up;
  id1.insert(id1.end(), up_rest.begin(), up_rest.end());    // id 1: down, then back up
  id2.insert(id2.end(), down_rest.begin(), down_rest.end());  // id 2: up, then back down
  const Outcome swapped = count(kLine, {{1, id1}, {2, id2}});
  EXPECT_EQ(swapped.counts.in + swapped.counts.out, 0u);
  // The swap a frame after both crossed: each id holds its side 1 observation, then goes back
  // over: still nothing twice (each id crosses and returns, neither holds).
  auto late1 = straight(200, 100, 200, 215, 8), late2 = straight(220, 300, 220, 185, 8);
  const auto late1_rest = straight(220, 185, 220, 100, 6),
             late2_rest = straight(200, 215, 200, 300, 6);
  late1.insert(late1.end(), late2_rest.begin(), late2_rest.end());
  late2.insert(late2.end(), late1_rest.begin(), late1_rest.end());
  const Outcome late = count(kLine, {{1, late2}, {2, late1}});
  EXPECT_LE(late.counts.in, 1u);
  EXPECT_LE(late.counts.out, 1u);
}

TEST(Counter, MissedWhileCrossing) {
  auto path = straight(200, 100, 200, 180, 8);
  for (int i = 0; i < 6; ++i) path.emplace_back(NAN, NAN);  // not seen for 6 frames
  for (const auto &p : straight(200, 240, 200, 320, 8)) path.push_back(p);
  const Outcome o = count(kLine, {{1, path}});
  EXPECT_EQ(o.counts.in, 1u);
}

TEST(Counter, TurningBackBeforeTheLineCountsNothing) {
  auto path = straight(200, 100, 200, 195, 10);
  for (const auto &p : straight(200, 195, 200, 100, 10)) path.push_back(p);
  EXPECT_EQ(count(kLine, {{1, path}}).events.size(), 0u);
}

TEST(Counter, TurningBackOnTheLineCountsNothing) {
  auto path = straight(200, 100, 200, 205, 10);  // just over, within the band (10 px)
  for (const auto &p : straight(200, 205, 200, 100, 10)) path.push_back(p);
  EXPECT_EQ(count(kLine, {{1, path}}).events.size(), 0u);
}

TEST(Counter, WalkingAroundTheEndCountsNothing) {
  EXPECT_EQ(count(kLine, {{1, straight(350, 100, 350, 300, 20)}}).events.size(), 0u);
  // Across the infinite line beyond the end, then back up through the segment: one "out".
  auto path = straight(350, 100, 350, 300, 10);
  for (const auto &p : straight(350, 300, 200, 300, 5)) path.push_back(p);
  for (const auto &p : straight(200, 300, 200, 100, 10)) path.push_back(p);
  const Outcome o = count(kLine, {{1, path}});
  EXPECT_EQ(o.counts.in, 0u);
  EXPECT_EQ(o.counts.out, 1u);
}

TEST(Counter, TwoCrossingPathsCountTwice) {
  const Outcome o =
      count(kLine, {{1, straight(120, 100, 280, 300, 20)}, {2, straight(280, 100, 120, 300, 20)}});
  EXPECT_EQ(o.counts.in, 2u);
}

TEST(Counter, UntrackedBoxesAreIgnored) {
  EXPECT_EQ(count(kLine, {{0, straight(200, 100, 200, 300, 20)}}).events.size(), 0u);
}

TEST(Counter, AnchorChoice) {
  CounterParams params;
  params.anchor = CountAnchor::kTopCenter;
  // Bottoms go 150 -> 400 (crossing y = 200), tops -50 -> 200: the top ends on the line.
  const Outcome top = count(kLine, {{1, straight(200, 150, 200, 300, 10)}}, params);
  EXPECT_EQ(top.events.size(), 0u);
  const Outcome bottom = count(kLine, {{1, straight(200, 150, 200, 300, 10)}});
  EXPECT_EQ(bottom.events.size(), 1u);
}

TEST(Counter, NewLinesKeepTheCountsOfUnchangedOnes) {
  Counter counter;
  counter.set_lines(lines_of("a:0,200,400,200;b:0,250,400,250"));
  std::vector<CountEvent> events;
  int f = 0;
  for (const auto &[x, y] : straight(200, 100, 200, 300, 20))
    counter.update(f++, {{1, float(x - 10), float(y - 100), float(x + 10), float(y), 0}}, &events);
  ASSERT_EQ(counter.line_counts(0).in, 1u);
  ASSERT_EQ(counter.line_counts(1).in, 1u);
  counter.set_lines(lines_of("b:0,250,400,250;a:0,210,400,210;c:0,0,1,1"));
  EXPECT_EQ(counter.line_counts(0).in, 1u);  // b, unchanged
  EXPECT_EQ(counter.line_counts(1).in, 0u);  // a moved: counted afresh
  EXPECT_EQ(counter.line_counts(2).in, 0u);
  counter.set_line_counts(2, {5, 6});
  EXPECT_EQ(counter.line_counts(2).out, 6u);
}

// Crossings by label: a person and a car down through a, a person up through b; then the counts
// carried into a new counter, one of whose lines comes only later, and one moved.
TEST(LabelledCounter, CountsByLabelResumeAndMovedLines) {
  LabelledCounter counter;
  counter.set_lines(lines_of("a:0,200,400,200;b:0,250,400,250"));
  const int32_t person = counter.class_of("person"), car = counter.class_of("car");
  EXPECT_EQ(counter.class_of("person"), person);
  EXPECT_EQ(counter.label_of(car), "car");
  std::vector<CountEvent> events;
  int f = 0;
  // 5 px a frame: each crossing seen beyond the band (10 px) the 4 frames it takes to count.
  const auto down = straight(200, 100, 200, 245, 29);  // through a, not b
  const auto up = straight(300, 320, 300, 215, 21);    // through b, not a
  for (size_t i = 0; i < down.size(); i++) {
    const auto [x, y] = down[i];
    const auto [ux, uy] = up[std::min(i, up.size() - 1)];
    counter.update(f++,
                   {{1, float(x - 10), float(y - 100), float(x + 10), float(y), person},
                    {2, float(x + 40), float(y - 60), float(x + 60), float(y), car},
                    {3, float(ux - 10), float(uy - 100), float(ux + 10), float(uy), person}},
                   &events);
  }
  LineTallies now = counter.tallies();
  ASSERT_EQ(now.size(), 2u);
  EXPECT_EQ(now["a"].total, (LineCounts{2, 0}));
  EXPECT_EQ(now["a"].by_label["person"], (LineCounts{1, 0}));
  EXPECT_EQ(now["a"].by_label["car"], (LineCounts{1, 0}));
  EXPECT_EQ(now["b"].total, (LineCounts{0, 1}));
  EXPECT_EQ(now["b"].by_label.size(), 1u);
  EXPECT_EQ(now["b"].by_label["person"], (LineCounts{0, 1}));

  // Resumed before the lines exist, b's counts wait for b; a moved counts afresh.
  LabelledCounter next;
  next.resume(now);
  EXPECT_TRUE(next.tallies().empty());
  next.set_lines(lines_of("a:0,200,400,200"));
  EXPECT_EQ(next.tallies()["a"].by_label["car"], (LineCounts{1, 0}));
  next.set_lines(lines_of("a:0,210,400,210;b:0,250,400,250"));
  LineTallies later = next.tallies();
  EXPECT_EQ(later["a"].total, (LineCounts{0, 0}));
  EXPECT_TRUE(later["a"].by_label.empty());
  EXPECT_EQ(later["b"].total, (LineCounts{0, 1}));
  EXPECT_EQ(later["b"].by_label["person"], (LineCounts{0, 1}));
  // Resumed while the line exists: replaced at once, labels included.
  next.resume({{"b", {{7, 8}, {{"bus", {7, 8}}}}}});
  EXPECT_EQ(next.counter().line_counts(1), (LineCounts{7, 8}));
  EXPECT_EQ(next.by_label(1).size(), 1u);
  EXPECT_EQ(next.by_label(1).at("bus"), (LineCounts{7, 8}));
}

// A zone: the square 100..300 x 100..300.
TEST(Counter, ZoneEnterLeaveAndOccupancy) {
  Counter counter;
  std::vector<CountZone> zones;
  std::string error;
  ASSERT_TRUE(parse_zones("room:100,100 300,100 300,300 100,300", false, &zones, &error));
  counter.set_zones(zones);
  std::vector<CountEvent> events;
  auto at = [](uint64_t id, double x, double y, int32_t class_id = 0) {
    return CountObservation{id, float(x - 10), float(y - 100), float(x + 10), float(y), class_id};
  };
  counter.update(0, {at(1, 50, 200), at(2, 200, 200, 3)}, &events);  // 2 starts inside
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, CountEventKind::kZoneEntered);
  EXPECT_EQ(events[0].track_id, 2u);
  EXPECT_EQ(counter.occupancy(0), (std::map<int32_t, uint64_t>{{3, 1}}));
  events.clear();
  counter.update(1, {at(1, 105, 200), at(2, 200, 200, 3)}, &events);  // 1 in the band: nothing
  EXPECT_TRUE(events.empty());
  counter.update(2, {at(1, 150, 200), at(2, 200, 200, 3)}, &events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, CountEventKind::kZoneEntered);
  EXPECT_EQ(counter.occupancy(0), (std::map<int32_t, uint64_t>{{0, 1}, {3, 1}}));
  events.clear();
  counter.update(3, {at(1, 350, 200)}, &events);  // 1 leaves; 2 unseen, still in
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, CountEventKind::kZoneLeft);
  EXPECT_EQ(events[0].track_id, 1u);
  events.clear();
  // 2 is forgotten after track_timeout frames without a sighting, and leaves.
  counter.update(3 + 31, {}, &events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, CountEventKind::kZoneLeft);
  EXPECT_EQ(events[0].track_id, 2u);
  EXPECT_TRUE(counter.occupancy(0).empty());
}

// Dwell (frames since it entered, on zone-left) and loitering: once a stay, after loiter_frames.
TEST(Counter, DwellAndLoitering) {
  CounterParams params;
  params.loiter_frames = 10;
  Counter counter(params);
  std::vector<CountZone> zones;
  std::string error;
  ASSERT_TRUE(parse_zones("room:100,100 300,100 300,300 100,300", false, &zones, &error));
  counter.set_zones(zones);
  auto at = [](uint64_t id, double x, double y) {
    return CountObservation{id, float(x - 10), float(y - 100), float(x + 10), float(y), 0};
  };
  std::vector<CountEvent> events;
  auto kinds = [&]() {
    std::vector<std::pair<CountEventKind, int64_t>> out;
    for (const CountEvent &e : events) out.emplace_back(e.kind, e.dwell_frames);
    events.clear();
    return out;
  };
  using K = CountEventKind;
  // Track 1 in from frame 0; track 2 in at 0, out at 5 (dwell 5), back in at 6.
  for (int64_t f = 0; f <= 5; ++f) counter.update(f, {at(1, 200, 200), at(2, 150, 200)}, &events);
  EXPECT_EQ(kinds(), (std::vector<std::pair<K, int64_t>>{{K::kZoneEntered, 0},
                                                         {K::kZoneEntered, 0}}));
  counter.update(6, {at(1, 200, 200), at(2, 50, 200)}, &events);
  EXPECT_EQ(kinds(), (std::vector<std::pair<K, int64_t>>{{K::kZoneLeft, 6}}));
  counter.update(7, {at(1, 200, 200), at(2, 150, 200)}, &events);
  EXPECT_EQ(kinds(), (std::vector<std::pair<K, int64_t>>{{K::kZoneEntered, 0}}));
  // Track 1 unseen on frames 8 and 9, seen at 12: it loiters then (12 >= 10), once.
  counter.update(10, {at(2, 150, 200)}, &events);
  EXPECT_EQ(kinds(), (std::vector<std::pair<K, int64_t>>{}));
  counter.update(12, {at(1, 200, 200), at(2, 150, 200)}, &events);
  EXPECT_EQ(kinds(), (std::vector<std::pair<K, int64_t>>{{K::kZoneLoitering, 12}}));
  EXPECT_EQ(counter.loitering(0), 1u);
  counter.update(13, {at(1, 200, 200), at(2, 150, 200)}, &events);
  EXPECT_TRUE(kinds().empty());
  // Track 2's new stay counts from frame 7: it loiters at 17.
  for (int64_t f = 14; f <= 17; ++f) counter.update(f, {at(1, 200, 200), at(2, 150, 200)}, &events);
  EXPECT_EQ(kinds(), (std::vector<std::pair<K, int64_t>>{{K::kZoneLoitering, 10}}));
  EXPECT_EQ(counter.loitering(0), 2u);
  // Track 1 forgotten (unseen past the timeout): it left at its last sighting, 17 frames in.
  for (int64_t f = 18; f <= 17 + 31; ++f) counter.update(f, {at(2, 150, 200)}, &events);
  EXPECT_EQ(kinds(), (std::vector<std::pair<K, int64_t>>{{K::kZoneLeft, 17}}));
  EXPECT_EQ(counter.loitering(0), 1u);
  // Without loiter_frames, no loitering.
  Counter plain;
  plain.set_zones(zones);
  for (int64_t f = 0; f < 100; ++f) plain.update(f, {at(1, 200, 200)}, &events);
  EXPECT_EQ(kinds(), (std::vector<std::pair<K, int64_t>>{{K::kZoneEntered, 0}}));
  EXPECT_EQ(plain.loitering(0), 0u);
}

TEST(Counter, TimeGoingBackwardsForgetsTracksKeepsCounts) {
  Counter counter;
  counter.set_lines(lines_of(kLine));
  std::vector<CountEvent> events;
  int f = 100;
  for (const auto &[x, y] : straight(200, 100, 200, 300, 20))
    counter.update(f++, {{1, float(x - 10), float(y - 100), float(x + 10), float(y), 0}}, &events);
  ASSERT_EQ(counter.line_counts(0).in, 1u);
  // Back to frame 0 right below the line, then up: the track is new, its side unknown before.
  counter.update(0, {{1, 190, 110, 210, 210, 0}}, &events);
  counter.update(1, {{1, 190, 50, 210, 150, 0}}, &events);
  EXPECT_EQ(counter.line_counts(0).in, 1u);
  EXPECT_EQ(counter.line_counts(0).out, 0u);
}

}  // namespace
}  // namespace cudanms
