// ByteTrack's update loop (cudanms/track.h has the rules), after the authors' byte_tracker.py.
#include <algorithm>
#include <cmath>
#include <limits>

#include "box_index.h"
#include "common/overlap.h"
#include "cudanms/assignment.h"
#include "cudanms/track.h"
#include "kalman.h"

namespace cudanms {
namespace {

using detail::Box;
using track::BoxKalman;
using track::Measurement;

enum class Phase { kTentative, kTracked, kLost };

struct Track {
  BoxKalman filter;
  Phase phase;
  uint64_t id;         // 0 while tentative
  int64_t last_frame;  // when it was last matched
  uint32_t hits;       // frames matched in a row while tentative
  int32_t class_id;
  float score;
  Box box;            // the filter's box: predicted, then updated on a match
  int64_t detection;  // the detection it was matched to on this frame, or -1
};

Measurement measure(const Detection &d) {
  const double w = d.x2 - d.x1, h = d.y2 - d.y1;
  return {d.x1 + w / 2, d.y1 + h / 2, h > 0 ? w / h : 0.0, h};
}

Box box_of(const Measurement &m) {
  const double w = m.aspect * m.height;
  return {static_cast<float>(m.cx - w / 2), static_cast<float>(m.cy - m.height / 2),
          static_cast<float>(m.cx + w / 2), static_cast<float>(m.cy + m.height / 2)};
}

constexpr size_t kPairsWithoutGrid = 1024;

bool usable(const Detection &d) {
  return std::isfinite(d.x1) && std::isfinite(d.y1) && std::isfinite(d.x2) && std::isfinite(d.y2) &&
         std::isfinite(d.score) && d.x2 >= d.x1 && d.y2 >= d.y1;
}

}  // namespace

struct Tracker::State {
  TrackerParams params;
  uint64_t next_id = 1;
  int64_t last_frame = std::numeric_limits<int64_t>::min();
  bool first_frame = true;  // the next frame is the first since a reset
  std::vector<Track> tracks;
  TrackedFrame out;

  // Scratch, kept between frames.
  track::BoxIndex grid;
  std::vector<Box> grid_boxes;
  std::vector<AssignmentEdge> edges;
  std::vector<int32_t> column_of_row;
  SparseAssignment solver;
  std::vector<int32_t> track_of_detection;  // per detection: the track it was matched to, or -1
  std::vector<uint32_t> high, low, confirmed, tentative, still_tracked;
  std::vector<uint8_t> col_taken;

  // Matches the tracks `rows` to the detections `cols`: track_of_detection is filled for the
  // pairs taken, and the rows and columns left are returned in place.
  void match(std::vector<uint32_t> *rows, std::vector<uint32_t> *cols,
             const std::vector<Detection> &detections, bool fuse_score, float max_cost);
  void step(int64_t frame, const std::vector<Detection> &detections, const CameraMotion &motion);
  void new_track(const Detection &d, size_t index, int64_t frame);
};

void Tracker::State::match(std::vector<uint32_t> *rows, std::vector<uint32_t> *cols,
                           const std::vector<Detection> &detections, bool fuse_score,
                           float max_cost) {
  if (rows->empty() || cols->empty()) return;
  grid_boxes.clear();
  for (uint32_t t : *rows) grid_boxes.push_back(tracks[t].box);
  edges.clear();
  auto add_edge = [&](uint32_t r, uint32_t c, const Box &db, const Detection &d) {
    if (params.per_class && tracks[(*rows)[r]].class_id != d.class_id) return;
    const float iou = detail::overlap(Overlap::kIoU, grid_boxes[r], db);
    if (iou <= 0.0f) return;
    // Scores past 1 (an SVM's margin, a cascade's level weight) count as 1: a cost below 0
    // would be no edge at all.
    const double score =
        fuse_score ? std::min(std::max(static_cast<double>(d.score), 0.0), 1.0) : 1.0;
    const double cost = 1.0 - static_cast<double>(iou) * score;
    if (cost < max_cost) edges.push_back({r, c, cost});
  };
  // A few pairs are cheaper to test all than to lay a grid for.
  const bool few = rows->size() * cols->size() <= kPairsWithoutGrid;
  if (!few) grid.build(grid_boxes);
  for (uint32_t c = 0; c < cols->size(); ++c) {
    const Detection &d = detections[(*cols)[c]];
    const Box db{d.x1, d.y1, d.x2, d.y2};
    if (few) {
      for (uint32_t r = 0; r < rows->size(); ++r) add_edge(r, c, db, d);
    } else {
      grid.near(db, [&](uint32_t r) { add_edge(r, c, db, d); });
    }
  }
  solver.solve(static_cast<uint32_t>(rows->size()), static_cast<uint32_t>(cols->size()), edges,
               max_cost, &column_of_row);
  col_taken.assign(cols->size(), 0);
  size_t rows_left = 0;
  for (uint32_t r = 0; r < rows->size(); ++r) {
    const int32_t c = column_of_row[r];
    if (c < 0) {
      (*rows)[rows_left++] = (*rows)[r];
      continue;
    }
    col_taken[c] = 1;
    track_of_detection[(*cols)[c]] = static_cast<int32_t>((*rows)[r]);
  }
  rows->resize(rows_left);
  size_t cols_left = 0;
  for (uint32_t c = 0; c < cols->size(); ++c)
    if (!col_taken[c]) (*cols)[cols_left++] = (*cols)[c];
  cols->resize(cols_left);
}

void Tracker::State::new_track(const Detection &d, size_t index, int64_t frame) {
  if (tracks.size() >= params.max_tracks) {
    // Make room: the lost track seen longest ago goes.
    auto oldest = tracks.end();
    for (auto t = tracks.begin(); t != tracks.end(); ++t)
      if (t->phase == Phase::kLost &&
          (oldest == tracks.end() || t->last_frame < oldest->last_frame))
        oldest = t;
    if (oldest == tracks.end()) {
      out.refused++;
      return;
    }
    *oldest = std::move(tracks.back());
    tracks.pop_back();
    out.evicted++;
  }
  const Measurement m = measure(d);
  Track t{BoxKalman(m), Phase::kTentative,          0, frame, 1, d.class_id, d.score,
          box_of(m),    static_cast<int64_t>(index)};
  if (first_frame || params.min_hits <= 1) {
    t.phase = Phase::kTracked;
    t.id = next_id++;
  }
  tracks.push_back(std::move(t));
}

void Tracker::State::step(int64_t frame, const std::vector<Detection> &detections,
                          const CameraMotion &motion) {
  // Tracks not seen for more than track_buffer frames cannot be found again: after a gap in
  // time (dropped frames, a reconnection) as after as many empty frames.
  tracks.erase(
      std::remove_if(tracks.begin(), tracks.end(),
                     [&](const Track &t) { return frame - t.last_frame > params.track_buffer; }),
      tracks.end());
  const int64_t gap = first_frame ? 1 : frame - last_frame;
  for (Track &t : tracks) {
    t.detection = -1;
    if (t.phase == Phase::kLost) t.filter.stop_growing();
    for (int64_t s = 0; s < gap; ++s) t.filter.predict();
    if (motion.scale != 1 || motion.dx != 0 || motion.dy != 0)
      t.filter.move(motion.scale, motion.dx, motion.dy);
    t.box = box_of(t.filter.box());
  }

  track_of_detection.assign(detections.size(), -1);
  high.clear();
  low.clear();
  for (uint32_t i = 0; i < detections.size(); ++i) {
    const Detection &d = detections[i];
    if (!usable(d)) {
      out.ignored++;
    } else if (d.score >= params.track_thresh) {
      high.push_back(i);
    } else if (d.score >= params.low_thresh) {
      low.push_back(i);
    }
  }
  confirmed.clear();
  tentative.clear();
  for (uint32_t t = 0; t < tracks.size(); ++t)
    (tracks[t].phase == Phase::kTentative ? tentative : confirmed).push_back(t);

  match(&confirmed, &high, detections, true, params.match_thresh);
  still_tracked.clear();
  for (uint32_t t : confirmed)
    if (tracks[t].phase == Phase::kTracked) still_tracked.push_back(t);
  match(&still_tracked, &low, detections, false, params.low_match_thresh);
  match(&tentative, &high, detections, true, params.tentative_match_thresh);

  for (size_t i = 0; i < detections.size(); ++i) {
    const int32_t t = track_of_detection[i];
    if (t < 0) continue;
    Track &track = tracks[t];
    const Detection &d = detections[i];
    track.filter.update(measure(d));
    track.box = box_of(track.filter.box());
    track.last_frame = frame;
    track.detection = static_cast<int64_t>(i);
    track.score = d.score;
    track.class_id = d.class_id;
    if (track.phase == Phase::kTentative && ++track.hits >= params.min_hits) {
      track.phase = Phase::kTracked;
      track.id = next_id++;
    } else if (track.phase == Phase::kLost) {
      track.phase = Phase::kTracked;
    }
  }
  // Unmatched: tentative tracks go, tracked ones are lost.
  size_t kept = 0;
  for (Track &t : tracks) {
    if (t.detection < 0) {
      if (t.phase == Phase::kTentative) continue;
      t.phase = Phase::kLost;
    }
    if (&tracks[kept] != &t) tracks[kept] = std::move(t);
    kept++;
  }
  tracks.erase(tracks.begin() + static_cast<std::ptrdiff_t>(kept), tracks.end());

  for (uint32_t i : high)
    if (detections[i].score >= params.high_thresh) new_track(detections[i], i, frame);
}

Tracker::Tracker(TrackerParams params) : state_(std::make_unique<State>()) {
  state_->params = params;
}

Tracker::~Tracker() = default;

const TrackerParams &Tracker::params() const { return state_->params; }
void Tracker::set_params(const TrackerParams &params) { state_->params = params; }
uint64_t Tracker::next_id() const { return state_->next_id; }
void Tracker::set_next_id(uint64_t id) {
  state_->next_id = std::max(state_->next_id, std::min(id, kMaxFirstId));
}

void Tracker::reset() {
  state_->tracks.clear();
  state_->first_frame = true;
  state_->last_frame = std::numeric_limits<int64_t>::min();
}

const TrackedFrame &Tracker::update(int64_t frame, const std::vector<Detection> &detections,
                                    const CameraMotion &motion) {
  State &s = *state_;
  s.out.tracks.clear();
  s.out.tentative = s.out.tracked = s.out.lost = s.out.evicted = s.out.refused = s.out.ignored = 0;
  s.out.reset = false;
  if (!s.first_frame && frame <= s.last_frame) {
    reset();
    s.out.reset = true;
  }
  s.step(frame, detections, motion);
  s.first_frame = false;
  s.last_frame = frame;

  TrackedFrame &out = s.out;
  out.ids.assign(detections.size(), 0);
  for (const Track &t : s.tracks) {
    if (t.phase == Phase::kTentative) out.tentative++;
    if (t.phase == Phase::kTracked) out.tracked++;
    if (t.phase == Phase::kLost) out.lost++;
    if (t.phase != Phase::kTracked || t.detection < 0) continue;
    const size_t d = static_cast<size_t>(t.detection);
    out.ids[d] = t.id;
    out.tracks.push_back({t.id, d, t.box.x1, t.box.y1, t.box.x2, t.box.y2, t.score, t.class_id});
  }
  std::sort(out.tracks.begin(), out.tracks.end(),
            [](const TrackedBox &a, const TrackedBox &b) { return a.detection < b.detection; });
  return out;
}

}  // namespace cudanms
