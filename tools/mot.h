// MOTChallenge text files and the MOT benchmark's scores of a tracker, as py-motmetrics computes
// them (its test data reproduce to 1e-6: tests/tools/test_mot.cpp).
//
// Files: one box a line, `frame,id,x,y,w,h,score[,...]`, frames from 1, (x, y) the top-left
// corner in pixels. Ground truth rows whose score is below 1 (MOT15's flag 0, "ignore") are
// dropped before matching, as the MOTChallenge devkit and py-motmetrics' loadtxt(min_confidence=1)
// drop them.
//
// Scores (CLEAR MOT: Bernardin and Stiefelhagen 2008; identity: Ristani et al. 2016), per frame
// over the frames either file has, with the distance 1 - IoU and pairs of IoU >= 0.5 only:
//  1. The objects matched on the previous frame keep their hypothesis where it is still there
//     and still overlaps enough.
//  2. The rest are matched by an assignment of the most pairs, then the least total distance.
//     A match of an object to another hypothesis than its last one is an id switch.
//  3. Objects left are misses (FN), hypotheses left false positives (FP).
// MOTA = 1 - (FN + FP + IDsw) / GT boxes; MOTP = mean distance of the matches; a fragmentation is
// an object tracked again after a miss; MT / ML: objects tracked on >= 80 % / < 20 % of their
// frames. IDF1 = 2 IDTP / (GT boxes + hypothesis boxes), IDTP from the one-to-one assignment of
// object ids to hypothesis ids that maximises the frames each pair overlaps enough.
// An id switch is py-motmetrics' (a match to another hypothesis than the object's last one,
// however long ago; steps 1 and 2), which the MOTChallenge devkit counts alike; HOTA: hota.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "hota.h"

namespace cudanms::tools {

struct MotBox {
  int64_t frame;
  int64_t id;
  double x, y, w, h;
  double score;
};

// Reads a MOT text file; rows scoring below `min_score` are dropped. false with
// "FILE:LINE: what is wrong" (or "FILE: ..." for the file as a whole) in *error.
bool read_mot_file(const std::string &path, double min_score, std::vector<MotBox> *boxes,
                   std::string *error);
// The sequence a ground truth file belongs to: SEQ of SEQ/gt.txt or SEQ/gt/gt.txt.
std::string mot_sequence_name(const std::string &gt_path);
// The rows, `frame,id,x,y,w,h,score,-1,-1,-1`, one a line.
std::string format_mot_rows(const std::vector<MotBox> &boxes);
// IoU of two boxes (py-motmetrics' boxiou); 0 for boxes without area.
double box_iou(const MotBox &a, const MotBox &b);
// The boxes of each frame, in file order within a frame.
std::map<int64_t, std::vector<const MotBox *>> boxes_by_frame(const std::vector<MotBox> &boxes);
// Dense codes 0..n-1 for the ids of `boxes`, in order of first appearance; (*counts)[code]: the
// boxes of each id.
std::unordered_map<int64_t, uint32_t> id_codes(const std::vector<MotBox> &boxes,
                                               std::vector<uint64_t> *counts);

struct MotScores {
  uint64_t gt_boxes = 0, hyp_boxes = 0;
  uint64_t matches = 0, switches = 0, false_positives = 0, misses = 0, fragmentations = 0;
  uint64_t objects = 0, mostly_tracked = 0, partly_tracked = 0, mostly_lost = 0;
  uint64_t id_true_positives = 0;
  double distance_sum = 0;
  HotaScores hota;  // hota.h

  uint64_t detections() const { return matches + switches; }
  double mota() const;
  double motp() const;  // mean 1 - IoU of the matched pairs (py-motmetrics'; lower is better)
  double recall() const;
  double precision() const;
  double idf1() const;
  double idp() const;
  double idr() const;
  MotScores &operator+=(const MotScores &other);  // sequences taken together
};

MotScores score_mot(const std::vector<MotBox> &gt, const std::vector<MotBox> &hyp);

// A table of named rows, the columns of py-motmetrics' MOTChallenge summary, then HOTA, DetA,
// AssA and LocA.
std::string format_mot_table(const std::vector<std::pair<std::string, MotScores>> &rows);

}  // namespace cudanms::tools
