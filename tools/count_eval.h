// Line counts of MOT tracks, and counts scored against the ground truth's: the library's own
// Counter (cudanms/count.h, what boxcount runs) over a tracks file, frame by frame.
//
// The rule (docs/elements.md, "Counts scored against the truth"): the ground truth's crossings
// are what the same Counter, with the same lines and parameters, counts over the ground-truth
// tracks (rows scoring below 1 dropped, as for mot-eval). For each line and direction: truth,
// counted, error = counted - truth, and matched: counted crossings paired one to one with true
// ones of the same line and direction at most `window` frames apart, the earliest true crossing
// first, each taking the nearest unpaired counted one in time. The total error is the sum of
// |error| over lines and directions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cudanms/count.h"
#include "mot.h"

namespace cudanms::tools {

struct Crossing {
  int64_t frame;
  size_t line;
  int direction;  // +1 in, -1 out
  int64_t track;
};

// Every crossing of `lines` by the tracks (a MOT box's id is its track), each frame from the
// first to the last (a frame without boxes ages the tracks), in frame order.
std::vector<Crossing> count_crossings(const std::vector<MotBox> &tracks,
                                      const std::vector<CountLine> &lines,
                                      const CounterParams &params = {});

// A vertical and a horizontal line through the middle of a width x height frame ("vertical",
// "horizontal"): --auto-lines.
std::vector<CountLine> middle_lines(double width, double height);

struct CountScore {
  std::string line;
  int direction;
  uint64_t truth = 0, counted = 0, matched = 0;
  int64_t error() const { return static_cast<int64_t>(counted) - static_cast<int64_t>(truth); }
};

// Per line and direction (in, then out), in the lines' order.
std::vector<CountScore> score_counts(const std::vector<Crossing> &truth,
                                     const std::vector<Crossing> &counted,
                                     const std::vector<CountLine> &lines, int64_t window);

// The table of count-eval; `name` titles its rows' sequence (a column), and a TOTAL row adds
// up every row given.
std::string format_count_scores(const std::vector<std::pair<std::string, CountScore>> &rows);

}  // namespace cudanms::tools
