// Counts of MOT tracks and their score against the ground truth's (count_eval.h), and count /
// count-eval as a user runs them on MOT15's TUD sequences (640 x 480).
#include <glib.h>
#include <glib/gstdio.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "count_eval.h"
#include "tool_runner.h"

namespace cudanms::tools {
using testing::Outcome;
using testing::run_tool;

namespace {

// One track, `id`, a 10 x 20 box whose bottom centre walks through the x's given, a frame each,
// from `first`.
std::vector<MotBox> walk(int64_t id, int64_t first, const std::vector<double> &xs) {
  std::vector<MotBox> out;
  for (size_t i = 0; i < xs.size(); ++i)
    out.push_back({first + static_cast<int64_t>(i), id, xs[i] - 5, 40, 10, 20, 1});
  return out;
}

const std::vector<CountLine> kDoor = {{"door", {50, 0}, {50, 100}}};  // top to bottom

TEST(CountCrossings, InIsRightToLeftOfATopToBottomLineAndAJitterCountsOnce) {
  std::vector<MotBox> tracks = walk(1, 1, {80, 70, 60, 40, 30, 20});    // in
  for (const MotBox &b : walk(2, 1, {20, 30, 45, 52, 48, 55, 70, 80}))  // out, jittering
    tracks.push_back(b);
  const std::vector<Crossing> crossings = count_crossings(tracks, kDoor);
  ASSERT_EQ(crossings.size(), 2u);
  EXPECT_EQ(crossings[0].track, 1);
  EXPECT_EQ(crossings[0].direction, +1);
  EXPECT_EQ(crossings[1].track, 2);
  EXPECT_EQ(crossings[1].direction, -1);
  EXPECT_LE(crossings[0].frame, crossings[1].frame);
}

TEST(CountCrossings, AFrameWithoutBoxesAgesTheTracks) {
  // Track 1 leaves at frame 3; id 1 comes back 40 frames later (past the counter's 30-frame
  // timeout) on the other side: a new track, no crossing.
  std::vector<MotBox> tracks = walk(1, 1, {80, 75, 70});
  for (const MotBox &b : walk(1, 43, {20, 15})) tracks.push_back(b);
  for (const MotBox &b : walk(2, 60, {0})) tracks.push_back(b);  // the last frame
  EXPECT_TRUE(count_crossings(tracks, kDoor).empty());
}

TEST(ScoreCounts, MatchesOneToOneWithinTheWindowSameLineAndDirection) {
  const std::vector<CountLine> lines = {kDoor[0], {"gate", {0, 50}, {100, 50}}};
  const std::vector<Crossing> truth = {
      {10, 0, +1, 1}, {50, 0, +1, 2}, {52, 0, -1, 3}, {60, 1, +1, 4}};
  const std::vector<Crossing> counted = {
      {12, 0, +1, 7}, {13, 0, +1, 8}, {53, 0, +1, 9}, {100, 0, -1, 9}, {61, 0, +1, 10}};
  const std::vector<CountScore> s = score_counts(truth, counted, lines, 5);
  ASSERT_EQ(s.size(), 4u);  // door in, door out, gate in, gate out
  EXPECT_EQ(s[0].line, "door");
  EXPECT_EQ(s[0].truth, 2u);
  EXPECT_EQ(s[0].counted, 4u);
  EXPECT_EQ(s[0].matched, 2u);  // 10 ~ 12 (the nearer), 50 ~ 53; 13 and 61 are no one's
  EXPECT_EQ(s[0].error(), 2);
  EXPECT_EQ(s[1].truth, 1u);  // door out at 52: the counted one is 48 frames off
  EXPECT_EQ(s[1].counted, 1u);
  EXPECT_EQ(s[1].matched, 0u);
  EXPECT_EQ(s[2].truth, 1u);  // gate in: counted on the door, not here
  EXPECT_EQ(s[2].matched, 0u);
  EXPECT_EQ(s[2].error(), -1);
  const std::string table = format_count_scores({{"seq", s[0]}, {"seq", s[1]}, {"seq", s[2]}});
  EXPECT_NE(table.find("total error 3 of 4 true crossings (75.0 %); 2 matched in time (50.0 %)"),
            std::string::npos)
      << table;
}

// --- the tool ---------------------------------------------------------------------------------

std::string data(const std::string &file) {
  return std::string(CUDANMS_SOURCE_DIR) + "/tests/data/mot/" + file;
}

// count-eval's rows: "SEQUENCE LINE DIR" -> {truth, counted, error, matched}.
std::map<std::string, std::vector<long>> score_rows(const std::string &table) {
  std::map<std::string, std::vector<long>> rows;
  std::istringstream lines(table);
  std::string line;
  std::getline(lines, line);  // the header
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string sequence, name, direction;
    long truth, counted, error, matched;
    if (fields >> sequence >> name >> direction >> truth >> counted >> error >> matched)
      rows[sequence + " " + name + " " + direction] = {truth, counted, error, matched};
  }
  return rows;
}

TEST(CountTool, TheGroundTruthScoredAgainstItselfIsExact) {
  std::vector<std::string> args = {"count-eval", "--auto-lines", "--frame-size", "640x480"};
  for (const char *seq : {"TUD-Campus", "TUD-Stadtmitte"})
    args.insert(args.end(), {"--gt", data(std::string(seq) + "/gt.txt"), "--result",
                             data(std::string(seq) + "/gt.txt")});
  const Outcome o = run_tool(args);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto rows = score_rows(o.out);
  ASSERT_EQ(rows.size(), 8u) << o.out;  // 2 sequences x 2 lines x 2 directions
  long truth = 0;
  for (const auto &[row, r] : rows) {
    EXPECT_EQ(r[2], 0) << row << "\n" << o.out;
    EXPECT_EQ(r[3], r[0]) << row << "\n" << o.out;
    truth += r[0];
  }
  EXPECT_EQ(truth, 6) << "the middle lines' true crossings of both sequences\n" << o.out;
}

// The tracker on SORT's detections, counted: guarded at what was measured (docs/elements.md).
TEST(CountTool, TheTrackersCountsOnMot15) {
  g_autofree char *dir = g_dir_make_tmp("cudanms-count-XXXXXX", nullptr);
  std::vector<std::string> eval = {"count-eval", "--auto-lines", "--frame-size", "640x480"};
  for (const char *seq : {"TUD-Campus", "TUD-Stadtmitte"}) {
    const std::string out = std::string(dir) + "/" + seq + ".txt";
    const Outcome o =
        run_tool({"track", "--input", data(std::string(seq) + "/det.txt"), "--output", out});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    eval.insert(eval.end(), {"--gt", data(std::string(seq) + "/gt.txt"), "--result", out});
    const Outcome counted =
        run_tool({"count", "--tracks", out, "--auto-lines", "--frame-size", "640x480"});
    ASSERT_EQ(counted.exit_code, 0) << counted.err;
    EXPECT_NE(counted.out.find("vertical"), std::string::npos) << counted.out;
    EXPECT_NE(counted.out.find("horizontal"), std::string::npos) << counted.out;
  }
  const Outcome o = run_tool(eval);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  std::printf("%s", o.out.c_str());
  long truth = 0, error = 0, matched = 0;
  for (const auto &[row, r] : score_rows(o.out)) {
    if (row.rfind("TOTAL", 0) == 0) continue;
    truth += r[0];
    error += std::labs(r[2]);
    matched += r[3];
  }
  // Measured: every true crossing counted in time, and 3 false ones, TUD-Stadtmitte's horizontal
  // line "out" (box bottoms that jump up as the detector merges and splits people).
  EXPECT_EQ(truth, 6) << o.out;
  EXPECT_EQ(matched, 6) << o.out;
  EXPECT_LE(error, 3) << o.out;
  for (const char *seq : {"TUD-Campus", "TUD-Stadtmitte"})
    g_remove((std::string(dir) + "/" + seq + ".txt").c_str());
  g_rmdir(dir);
}

TEST(CountTool, UsageErrors) {
  const std::string gt = data("TUD-Campus/gt.txt");
  for (const std::vector<std::string> &args : std::vector<std::vector<std::string>>{
           {"count"},
           {"count", "--tracks", gt},
           {"count", "--tracks", gt, "--auto-lines"},
           {"count", "--tracks", gt, "--auto-lines", "--frame-size", "640"},
           {"count", "--tracks", gt, "--auto-lines", "--lines", "a:0,0,1,1"},
           {"count", "--tracks", gt, "--lines", "a:0,0,2,1", "--normalized", "--frame-size",
            "640x480"},
           {"count", "--tracks", gt, "--lines", "a:0,0,0,0"},
           {"count-eval", "--gt", gt, "--auto-lines", "--frame-size", "640x480"},
           {"count-eval", "--gt", gt, "--result", gt, "--auto-lines", "--frame-size", "640x480",
            "--window", "-1"}}) {
    const Outcome o = run_tool(args);
    EXPECT_EQ(o.exit_code, 2) << args.size() << " " << o.out << o.err;
    EXPECT_FALSE(o.err.empty());
  }
  const Outcome missing =
      run_tool({"count", "--tracks", "/nonexistent/t.txt", "--lines", "a:0,0,1,1"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("/nonexistent/t.txt"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace cudanms::tools
