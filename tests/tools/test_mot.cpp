// The MOT scorer against py-motmetrics' own expected table (tests/data/mot/README.md), its file
// rules, and cudanms-tool track and mot-eval as a user runs them on SORT's MOT15 detections.
#include <glib.h>
#include <glib/gstdio.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "mot.h"
#include "tool_runner.h"

namespace cudanms::testing {
namespace {

using tools::MotBox;
using tools::MotScores;

std::string data(const std::string &name) {
  return std::string(CUDANMS_SOURCE_DIR) + "/tests/data/mot/" + name;
}

MotScores score_files(const std::string &gt_path, const std::string &hyp_path) {
  std::vector<MotBox> gt, hyp;
  std::string error;
  EXPECT_TRUE(tools::read_mot_file(gt_path, 1.0, &gt, &error)) << error;
  EXPECT_TRUE(tools::read_mot_file(hyp_path, -INFINITY, &hyp, &error)) << error;
  return tools::score_mot(gt, hyp);
}

struct Expected {
  double idf1, idp, idr, recall, precision;
  uint64_t objects, mt, pt, ml, fp, fn, idsw, fm;
  double mota, motp;
};

void expect_scores(const MotScores &s, const Expected &e, const std::string &name) {
  SCOPED_TRACE(name);
  EXPECT_NEAR(s.idf1(), e.idf1, 1e-6);
  EXPECT_NEAR(s.idp(), e.idp, 1e-6);
  EXPECT_NEAR(s.idr(), e.idr, 1e-6);
  EXPECT_NEAR(s.recall(), e.recall, 1e-6);
  EXPECT_NEAR(s.precision(), e.precision, 1e-6);
  EXPECT_EQ(s.objects, e.objects);
  EXPECT_EQ(s.mostly_tracked, e.mt);
  EXPECT_EQ(s.partly_tracked, e.pt);
  EXPECT_EQ(s.mostly_lost, e.ml);
  EXPECT_EQ(s.false_positives, e.fp);
  EXPECT_EQ(s.misses, e.fn);
  EXPECT_EQ(s.switches, e.idsw);
  EXPECT_EQ(s.fragmentations, e.fm);
  EXPECT_NEAR(s.mota(), e.mota, 1e-6);
  EXPECT_NEAR(s.motp(), e.motp, 1e-6);
}

// py-motmetrics' test_motchallenge_files, its numbers.
TEST(MotScorer, ReproducesPyMotmetrics) {
  const MotScores campus =
      score_files(data("TUD-Campus/gt.txt"), data("TUD-Campus/motmetrics-test.txt"));
  const MotScores stadtmitte =
      score_files(data("TUD-Stadtmitte/gt.txt"), data("TUD-Stadtmitte/motmetrics-test.txt"));
  expect_scores(campus,
                {0.557659, 0.729730, 0.451253, 0.582173, 0.941441, 8, 1, 6, 1, 13, 150, 7, 7,
                 0.526462, 0.277201},
                "TUD-Campus");
  expect_scores(stadtmitte,
                {0.644619, 0.819760, 0.531142, 0.608997, 0.939920, 10, 5, 4, 1, 45, 452, 7, 6,
                 0.564014, 0.345904},
                "TUD-Stadtmitte");
  MotScores overall = campus;
  overall += stadtmitte;
  expect_scores(overall,
                {0.624296, 0.799176, 0.512211, 0.602640, 0.940268, 18, 6, 10, 2, 58, 602, 14, 13,
                 0.555116, 0.330177},
                "overall");
}

std::string write_temp(const std::string &text) {
  gchar *path = nullptr;
  const int fd = g_file_open_tmp("cudanms-mot-XXXXXX.txt", &path, nullptr);
  close(fd);
  g_file_set_contents(path, text.c_str(), -1, nullptr);
  const std::string out = path;
  g_free(path);
  return out;
}

// Ground truth flagged 0 is not there at all: neither a miss nor a match.
TEST(MotScorer, IgnoredGroundTruthIsDropped) {
  const std::string gt = write_temp(
      "1,1,0,0,10,10,1,-1,-1,-1\n"
      "1,2,100,0,10,10,0,-1,-1,-1\n"
      "2,1,0,0,10,10,1,-1,-1,-1\n"
      "2,2,100,0,10,10,0,-1,-1,-1\n");
  const std::string hyp = write_temp("1,7,0,0,10,10,1\n2,7,0,0,10,10,1\n");
  const MotScores s = score_files(gt, hyp);
  EXPECT_EQ(s.gt_boxes, 2u);
  EXPECT_EQ(s.objects, 1u);
  EXPECT_EQ(s.misses, 0u);
  EXPECT_EQ(s.matches, 2u);
  EXPECT_DOUBLE_EQ(s.mota(), 1.0);
  EXPECT_DOUBLE_EQ(s.idf1(), 1.0);
  g_remove(gt.c_str());
  g_remove(hyp.c_str());
}

// An object handed from one hypothesis to another is one switch; IDF1 gives the object to the
// hypothesis it spent more frames with.
TEST(MotScorer, SwitchAndIdentity) {
  const std::string gt =
      write_temp("1,1,0,0,10,10,1\n2,1,0,0,10,10,1\n3,1,0,0,10,10,1\n4,1,0,0,10,10,1\n");
  const std::string hyp =
      write_temp("1,5,0,0,10,10\n2,5,0,0,10,10\n3,5,0,0,10,10\n4,6,0,0,10,10\n");
  const MotScores s = score_files(gt, hyp);
  EXPECT_EQ(s.switches, 1u);
  EXPECT_EQ(s.id_true_positives, 3u);
  EXPECT_DOUBLE_EQ(s.mota(), 0.75);
  EXPECT_DOUBLE_EQ(s.idf1(), 0.75);
  g_remove(gt.c_str());
  g_remove(hyp.c_str());
}

// mot-eval's rows: name -> the numbers after it.
std::map<std::string, std::vector<double>> table_rows(const std::string &table) {
  std::map<std::string, std::vector<double>> rows;
  std::istringstream lines(table);
  std::string line;
  std::getline(lines, line);  // the header
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string name;
    fields >> name;
    double v;
    while (fields >> v) rows[name].push_back(v);
  }
  return rows;
}
enum Column { kIdf1, kIdp, kIdr, kRcll, kPrcn, kGt, kMt, kPt, kMl, kFp, kFn, kIdsw, kFm, kMota,
              kMotp, kHota, kDeta, kAssa, kLoca };

// HOTA on cases worked by hand (hota.h): alphas 0.05..0.95, a TP of an alpha at IoU >= alpha.
std::vector<MotBox> one_object(const std::vector<int64_t> &ids, double h = 10) {
  std::vector<MotBox> out;
  for (size_t f = 0; f < ids.size(); ++f)
    out.push_back({static_cast<int64_t>(f + 1), ids[f], 0, 0, 10, h, 1});
  return out;
}

TEST(Hota, CasesWorkedByHand) {
  const std::vector<MotBox> gt = one_object({1, 1, 1, 1});
  const tools::HotaScores perfect = tools::score_hota(gt, one_object({7, 7, 7, 7}));
  EXPECT_DOUBLE_EQ(perfect.hota(), 1.0);
  EXPECT_DOUBLE_EQ(perfect.deta(), 1.0);
  EXPECT_DOUBLE_EQ(perfect.assa(), 1.0);
  EXPECT_DOUBLE_EQ(perfect.loca(), 1.0);
  // Handed to another id halfway: each pair of ids 2 frames together of 4 + 2 - 2.
  const tools::HotaScores swapped = tools::score_hota(gt, one_object({5, 5, 6, 6}));
  EXPECT_DOUBLE_EQ(swapped.deta(), 1.0);
  EXPECT_DOUBLE_EQ(swapped.assa(), 0.5);
  EXPECT_NEAR(swapped.hota(), std::sqrt(0.5), 1e-12);
  // Boxes twice as tall: IoU 0.5, a TP for the 10 alphas up to 0.5 and nothing above, where LocA
  // is 1 (TrackEval's value for an alpha without TP).
  const tools::HotaScores loose = tools::score_hota(gt, one_object({7, 7, 7, 7}, 20));
  EXPECT_NEAR(loose.deta(), 10.0 / 19, 1e-12);
  EXPECT_NEAR(loose.assa(), 10.0 / 19, 1e-12);
  EXPECT_NEAR(loose.hota(), 10.0 / 19, 1e-12);
  EXPECT_NEAR(loose.loca(), (10 * 0.5 + 9 * 1.0) / 19, 1e-12);
  // A false positive every frame: TP / (TP + FP) = 1/2.
  std::vector<MotBox> with_extra = one_object({7, 7, 7, 7});
  for (int64_t f = 1; f <= 4; ++f) with_extra.push_back({f, 8, 100, 100, 10, 10, 1});
  const tools::HotaScores extra = tools::score_hota(gt, with_extra);
  EXPECT_DOUBLE_EQ(extra.deta(), 0.5);
  EXPECT_DOUBLE_EQ(extra.assa(), 1.0);
  EXPECT_NEAR(extra.hota(), std::sqrt(0.5), 1e-12);
}

// mot-eval's HOTA columns against a second computation: tests/tools/hota_reference.py, TrackEval's
// metric transcribed onto dense lists with a dense Hungarian method, on py-motmetrics' test
// files and the tracker's tracks, each sequence and both together.
TEST(Hota, MotEvalEqualsTheReference) {
  if (!*CUDANMS_PYTHON3) GTEST_SKIP() << "no python3 to run tests/tools/hota_reference.py";
  g_autofree char *dir = g_dir_make_tmp("cudanms-hota-XXXXXX", nullptr);
  std::vector<std::string> files;
  for (const char *kind : {"motmetrics-test", "boxtrack"}) {
    std::vector<std::string> eval = {"mot-eval"}, pairs;
    for (const char *seq : {"TUD-Campus", "TUD-Stadtmitte"}) {
      std::string result = data(std::string(seq) + "/motmetrics-test.txt");
      if (std::string(kind) == "boxtrack") {
        result = std::string(dir) + "/" + seq + ".txt";
        files.push_back(result);
        ASSERT_EQ(
            run_tool({"track", "--input", data(std::string(seq) + "/det.txt"), "--output", result})
                .exit_code,
            0);
      }
      eval.insert(eval.end(), {"--gt", data(std::string(seq) + "/gt.txt"), "--result", result});
      pairs.insert(pairs.end(), {data(std::string(seq) + "/gt.txt"), result});
    }
    const Outcome o = run_tool(eval);
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const auto rows = table_rows(o.out);
    const std::string script = std::string(CUDANMS_SOURCE_DIR) + "/tests/tools/hota_reference.py";
    const std::vector<std::pair<std::string, std::vector<std::string>>> checks = {
        {"TUD-Campus", {pairs[0], pairs[1]}}, {"TUD-Stadtmitte", {pairs[2], pairs[3]}},
        {"OVERALL", pairs}};
    for (const auto &[row, files_of_row] : checks) {
      std::vector<std::string> command = {CUDANMS_PYTHON3, script};
      command.insert(command.end(), files_of_row.begin(), files_of_row.end());
      const Outcome reference = run_program(command);
      ASSERT_EQ(reference.exit_code, 0) << reference.err;
      std::istringstream values(reference.out);
      double hota, deta, assa, loca;
      ASSERT_TRUE(values >> hota >> deta >> assa >> loca) << reference.out;
      const std::vector<double> &r = rows.at(row);
      ASSERT_EQ(r.size(), 19u) << o.out;
      EXPECT_NEAR(r[kHota], hota, 1e-6) << kind << " " << row << "\n" << o.out;
      EXPECT_NEAR(r[kDeta], deta, 1e-6) << kind << " " << row << "\n" << o.out;
      EXPECT_NEAR(r[kAssa], assa, 1e-6) << kind << " " << row << "\n" << o.out;
      EXPECT_NEAR(r[kLoca], loca, 1e-6) << kind << " " << row << "\n" << o.out;
    }
  }
  for (const std::string &file : files) g_remove(file.c_str());
  g_rmdir(dir);
}

TEST(MotFile, ErrorsNameTheLine) {
  std::vector<MotBox> boxes;
  std::string error;
  const std::string bad = write_temp("1,1,0,0,10,10,1\n\n2,1,0,x,10,10,1\n");
  EXPECT_FALSE(tools::read_mot_file(bad, 0, &boxes, &error));
  EXPECT_EQ(error, bad + ":3: \"x\" is not a number");
  const std::string short_row = write_temp("1,1,0,0,10\n");
  EXPECT_FALSE(tools::read_mot_file(short_row, 0, &boxes, &error));
  EXPECT_EQ(error, short_row + ":1: a row is frame,id,x,y,w,h[,score,...]: 5 fields");
  const std::string twice = write_temp("1,1,0,0,10,10\n1,1,5,5,10,10\n");
  EXPECT_FALSE(tools::read_mot_file(twice, 0, &boxes, &error));
  EXPECT_EQ(error, twice + ":2: id 1 appears twice in frame 1");
  for (const std::string &p : {bad, short_row, twice}) g_remove(p.c_str());
  EXPECT_FALSE(tools::read_mot_file("/nonexistent/gt.txt", 0, &boxes, &error));
}

// A row of mot-eval's table: name -> its numbers in column order.

// The tracker on SORT's detections, through the tool as a user runs it, guarded at what was
// measured (docs/performance.md) less one point. SORT: MOTA 0.627 / 0.717, IDF1 0.606 / 0.735,
// 6 / 10 id switches.
TEST(TrackTool, BeatsItsMeasuredScoresOnMot15) {
  g_autofree char *dir = g_dir_make_tmp("cudanms-track-XXXXXX", nullptr);
  std::vector<std::string> eval = {"mot-eval"};
  for (const char *seq : {"TUD-Campus", "TUD-Stadtmitte"}) {
    const std::string out = std::string(dir) + "/" + seq + ".txt";
    const Outcome o =
        run_tool({"track", "--input", data(std::string(seq) + "/det.txt"), "--output", out});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    eval.insert(eval.end(), {"--gt", data(std::string(seq) + "/gt.txt"), "--result", out});
  }
  const Outcome o = run_tool(eval);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto rows = table_rows(o.out);
  ASSERT_EQ(rows.size(), 3u) << o.out;
  const struct {
    const char *name;
    double mota, idf1, idsw;
  } measured[] = {{"TUD-Campus", 0.649, 0.766, 3}, {"TUD-Stadtmitte", 0.729, 0.802, 11}};
  for (const auto &m : measured) {
    const std::vector<double> &r = rows.at(m.name);
    EXPECT_GE(r[kMota], m.mota - 0.01) << m.name << "\n" << o.out;
    EXPECT_GE(r[kIdf1], m.idf1 - 0.01) << m.name << "\n" << o.out;
    EXPECT_LE(r[kIdsw], m.idsw + 1) << m.name << "\n" << o.out;
  }
  for (const char *seq : {"TUD-Campus", "TUD-Stadtmitte"})
    g_remove((std::string(dir) + "/" + seq + ".txt").c_str());
  g_rmdir(dir);
}

TEST(TrackTool, UsageErrors) {
  EXPECT_EQ(run_tool({"track"}).exit_code, 2);
  EXPECT_EQ(run_tool({"track", "--input", data("TUD-Campus/det.txt"), "--min-hits", "0"}).exit_code,
            2);
  EXPECT_EQ(
      run_tool({"track", "--input", data("TUD-Campus/det.txt"), "--track-thresh", "2"}).exit_code,
      2);
  const Outcome missing = run_tool({"track", "--input", "/nonexistent/det.txt"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("/nonexistent/det.txt"), std::string::npos) << missing.err;
  EXPECT_EQ(run_tool({"mot-eval", "--gt", data("TUD-Campus/gt.txt")}).exit_code, 2);
}

TEST(TrackTool, Bench) {
  const Outcome o = run_tool({"track-bench", "--sizes", "10,100", "--frames", "20"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("p50_us"), std::string::npos);
  EXPECT_EQ(table_rows(o.out).size(), 2u) << o.out;
}

}  // namespace
}  // namespace cudanms::testing
