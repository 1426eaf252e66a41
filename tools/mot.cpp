#include "mot.h"

#include <glib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "cudanms/assignment.h"
#include "cudanms/bounded_file.h"

namespace cudanms::tools {
namespace {

constexpr uint64_t kMotFileLimit = 1ull << 30;
constexpr double kMaxDistance = 0.5;  // 1 - IoU: pairs of IoU >= 0.5 may match

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

bool parse_number(const std::string &field, double *out) {
  const char *begin = field.data(), *end = begin + field.size();
  while (begin < end && (*begin == ' ' || *begin == '\t')) ++begin;
  while (end > begin && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) --end;
  if (begin < end && *begin == '+') ++begin;
  const auto [stop, ec] = std::from_chars(begin, end, *out);
  return ec == std::errc() && stop == end && begin < end;
}

}  // namespace

double box_iou(const MotBox &a, const MotBox &b) {
  const double iw = std::max(0.0, std::min(a.x + a.w, b.x + b.w) - std::max(a.x, b.x));
  const double ih = std::max(0.0, std::min(a.y + a.h, b.y + b.h) - std::max(a.y, b.y));
  const double inter = iw * ih;
  const double uni = a.w * a.h + b.w * b.h - inter;
  return inter > 0 && uni > 0 ? inter / uni : 0.0;
}

std::map<int64_t, std::vector<const MotBox *>> boxes_by_frame(const std::vector<MotBox> &boxes) {
  std::map<int64_t, std::vector<const MotBox *>> out;
  for (const MotBox &b : boxes) out[b.frame].push_back(&b);
  return out;
}

std::unordered_map<int64_t, uint32_t> id_codes(const std::vector<MotBox> &boxes,
                                               std::vector<uint64_t> *counts) {
  std::unordered_map<int64_t, uint32_t> codes;
  for (const MotBox &b : boxes) {
    auto [it, fresh] = codes.try_emplace(b.id, static_cast<uint32_t>(codes.size()));
    if (fresh) counts->push_back(0);
    (*counts)[it->second]++;
  }
  return codes;
}

bool read_mot_file(const std::string &path, double min_score, std::vector<MotBox> *boxes,
                   std::string *error) {
  std::string text, why;
  if (!read_bounded_file(path, kMotFileLimit, &text, &why)) {
    *error = path + ": " + why;
    return false;
  }
  std::vector<MotBox> out;
  std::set<std::pair<int64_t, int64_t>> seen;  // (frame, id) of rows with an id
  std::istringstream lines(text);
  std::string line;
  for (size_t number = 1; std::getline(lines, line); ++number) {
    const std::string where = path + ":" + std::to_string(number) + ": ";
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[0] == '#') continue;
    std::vector<double> v;
    std::istringstream fields(line);
    std::string field;
    while (std::getline(fields, field, ',')) {
      double value;
      if (!parse_number(field, &value)) {
        *error = where + "\"" + field + "\" is not a number";
        return false;
      }
      v.push_back(value);
    }
    if (v.size() < 6) {
      *error =
          where + "a row is frame,id,x,y,w,h[,score,...]: " + std::to_string(v.size()) + " fields";
      return false;
    }
    for (size_t i = 0; i < std::min<size_t>(v.size(), 7); ++i)
      if (!std::isfinite(v[i])) {
        *error = where + "field " + std::to_string(i + 1) + " is not finite";
        return false;
      }
    if (v[0] != std::floor(v[0]) || v[1] != std::floor(v[1]) || std::fabs(v[0]) > 1e15 ||
        std::fabs(v[1]) > 1e15) {
      *error = where + "the frame and the id must be integers";
      return false;
    }
    if (v[4] < 0 || v[5] < 0) {
      *error = where + "a box has a negative width or height";
      return false;
    }
    const MotBox box{static_cast<int64_t>(v[0]), static_cast<int64_t>(v[1]), v[2], v[3], v[4], v[5],
                     v.size() > 6 ? v[6] : 1.0};
    if (box.score < min_score) continue;
    if (box.id >= 0 && !seen.emplace(box.frame, box.id).second) {
      *error = where + "id " + std::to_string(box.id) + " appears twice in frame " +
               std::to_string(box.frame);
      return false;
    }
    out.push_back(box);
  }
  *boxes = std::move(out);
  return true;
}

std::string format_mot_rows(const std::vector<MotBox> &boxes) {
  std::string out;
  char line[256];
  for (const MotBox &b : boxes) {
    std::snprintf(line, sizeof line, "%lld,%lld,%.2f,%.2f,%.2f,%.2f,%.6g,-1,-1,-1\n",
                  static_cast<long long>(b.frame), static_cast<long long>(b.id), b.x, b.y, b.w, b.h,
                  b.score);
    out += line;
  }
  return out;
}

double MotScores::mota() const {
  return gt_boxes ? 1.0 - static_cast<double>(misses + false_positives + switches) / gt_boxes : 0;
}
double MotScores::motp() const { return ratio(distance_sum, static_cast<double>(detections())); }
double MotScores::recall() const { return ratio(detections(), gt_boxes); }
double MotScores::precision() const {
  return ratio(detections(), static_cast<double>(false_positives + detections()));
}
double MotScores::idf1() const {
  return ratio(2.0 * id_true_positives, static_cast<double>(gt_boxes + hyp_boxes));
}
double MotScores::idp() const { return ratio(id_true_positives, hyp_boxes); }
double MotScores::idr() const { return ratio(id_true_positives, gt_boxes); }

MotScores &MotScores::operator+=(const MotScores &o) {
  gt_boxes += o.gt_boxes;
  hyp_boxes += o.hyp_boxes;
  matches += o.matches;
  switches += o.switches;
  false_positives += o.false_positives;
  misses += o.misses;
  fragmentations += o.fragmentations;
  objects += o.objects;
  mostly_tracked += o.mostly_tracked;
  partly_tracked += o.partly_tracked;
  mostly_lost += o.mostly_lost;
  id_true_positives += o.id_true_positives;
  distance_sum += o.distance_sum;
  hota += o.hota;
  return *this;
}

namespace {

// CLEAR MOT's and the identity scores' bookkeeping, frame by frame (py-motmetrics' rules): which
// hypothesis each object was last matched to, who is tracked, and how many frames each
// object-hypothesis pair could have matched.
class MotCounter {
 public:
  MotCounter(const std::unordered_map<int64_t, uint32_t> &object_code,
             const std::unordered_map<int64_t, uint32_t> &hyp_code, size_t n_objects, MotScores *s)
      : object_code_(object_code),
        hyp_code_(hyp_code),
        s_(s),
        last_hyp_(n_objects, -1),
        matched_before_(n_objects, 0),
        tracked_ever_(n_objects, 0),
        tracked_last_(n_objects, 0),
        tracked_frames_(n_objects, 0) {}

  void frame(const std::vector<const MotBox *> &objects, const std::vector<const MotBox *> &hyps) {
    objects_ = &objects;
    hyps_ = &hyps;
    distance_.assign(objects.size() * hyps.size(), NAN);
    for (size_t i = 0; i < objects.size(); ++i)
      for (size_t j = 0; j < hyps.size(); ++j) {
        const double d = 1.0 - box_iou(*objects[i], *hyps[j]);
        if (d <= kMaxDistance) {
          distance_[i * hyps.size() + j] = d;
          overlapping_[{object(i), hyp(j)}]++;
        }
      }
    object_done_.assign(objects.size(), 0);
    hyp_done_.assign(hyps.size(), 0);
    matched_now_.clear();
    match_again();
    match_best();
    tally();
  }

  // Mostly tracked (80 % of its boxes or more), partly (20 % or more), mostly lost.
  void classify_objects(const std::vector<uint64_t> &object_boxes) const {
    for (size_t o = 0; o < object_boxes.size(); ++o) {
      const double r = ratio(tracked_frames_[o], object_boxes[o]);
      (r >= 0.8 ? s_->mostly_tracked : r >= 0.2 ? s_->partly_tracked : s_->mostly_lost)++;
    }
  }

  // Identity: the object-to-hypothesis assignment with the most frames in common.
  uint64_t id_true_positives(size_t n_objects, size_t n_hyps) {
    uint64_t most = 0;
    for (const auto &[pair, frames_together] : overlapping_) most = std::max(most, frames_together);
    edges_.clear();
    for (const auto &[pair, frames_together] : overlapping_)
      edges_.push_back({pair.first, pair.second, static_cast<double>(most - frames_together)});
    solver_.solve(static_cast<uint32_t>(n_objects), static_cast<uint32_t>(n_hyps), edges_,
                  static_cast<double>(most), &column_of_row_);
    uint64_t positives = 0;
    for (size_t o = 0; o < n_objects; ++o)
      if (column_of_row_[o] >= 0)
        positives += overlapping_.at({static_cast<uint32_t>(o), column_of_row_[o]});
    return positives;
  }

 private:
  uint32_t object(size_t i) const { return object_code_.at((*objects_)[i]->id); }
  uint32_t hyp(size_t j) const { return hyp_code_.at((*hyps_)[j]->id); }
  double distance(size_t i, size_t j) const { return distance_[i * hyps_->size() + j]; }

  std::pair<uint32_t, int64_t> record(size_t i, size_t j) {
    s_->distance_sum += distance(i, j);
    object_done_[i] = hyp_done_[j] = 1;
    matched_now_.push_back(object(i));
    return {object(i), static_cast<int64_t>(hyp(j))};
  }

  // 1. Last frame's matches, where they still hold.
  void match_again() {
    for (size_t i = 0; i < objects_->size(); ++i) {
      if (!matched_before_[object(i)]) continue;
      for (size_t j = 0; j < hyps_->size(); ++j) {
        if (hyp_done_[j] || static_cast<int64_t>(hyp(j)) != last_hyp_[object(i)]) continue;
        if (!std::isnan(distance(i, j))) {
          record(i, j);
          s_->matches++;
        }
        break;
      }
    }
  }

  // 2. The most pairs, then the least distance: leaving an object alone costs more than any
  // total of distances, as py-motmetrics' forbidden cost does.
  void match_best() {
    edges_.clear();
    for (size_t i = 0; i < objects_->size(); ++i)
      for (size_t j = 0; j < hyps_->size(); ++j)
        if (!object_done_[i] && !hyp_done_[j] && !std::isnan(distance(i, j)))
          edges_.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(j), distance(i, j)});
    const double alone = 2.0 * static_cast<double>(std::min(objects_->size(), hyps_->size()) + 1);
    solver_.solve(static_cast<uint32_t>(objects_->size()), static_cast<uint32_t>(hyps_->size()),
                  edges_, alone, &column_of_row_);
    for (size_t i = 0; i < objects_->size(); ++i) {
      if (object_done_[i] || column_of_row_[i] < 0) continue;
      const auto [o, hyp_id] = record(i, static_cast<size_t>(column_of_row_[i]));
      const bool is_switch = last_hyp_[o] >= 0 && last_hyp_[o] != hyp_id;
      (is_switch ? s_->switches : s_->matches)++;
      last_hyp_[o] = hyp_id;
    }
  }

  // 3. Misses and false positives; who is tracked.
  void tally() {
    for (size_t i = 0; i < objects_->size(); ++i) {
      if (object_done_[i]) continue;
      s_->misses++;
      tracked_last_[object(i)] = 0;
    }
    for (size_t j = 0; j < hyps_->size(); ++j) s_->false_positives += hyp_done_[j] ? 0 : 1;
    for (const uint32_t o : matched_now_) {
      tracked_frames_[o]++;
      if (tracked_ever_[o] && !tracked_last_[o]) s_->fragmentations++;
      tracked_ever_[o] = tracked_last_[o] = 1;
    }
    std::fill(matched_before_.begin(), matched_before_.end(), 0);
    for (const uint32_t o : matched_now_) matched_before_[o] = 1;
  }

  const std::unordered_map<int64_t, uint32_t> &object_code_, &hyp_code_;
  MotScores *s_;
  std::vector<int64_t> last_hyp_;  // the hypothesis an object was last matched to
  std::vector<uint8_t> matched_before_, tracked_ever_, tracked_last_;
  std::vector<uint64_t> tracked_frames_;
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> overlapping_;  // frames each pair could match
  SparseAssignment solver_;
  std::vector<AssignmentEdge> edges_;
  std::vector<int32_t> column_of_row_;
  // The frame's.
  const std::vector<const MotBox *> *objects_ = nullptr, *hyps_ = nullptr;
  std::vector<double> distance_;
  std::vector<uint8_t> object_done_, hyp_done_;
  std::vector<uint32_t> matched_now_;
};

}  // namespace

MotScores score_mot(const std::vector<MotBox> &gt, const std::vector<MotBox> &hyp) {
  MotScores s;
  std::vector<uint64_t> object_boxes, hyp_id_boxes;
  const auto object_code = id_codes(gt, &object_boxes);
  const auto hyp_code = id_codes(hyp, &hyp_id_boxes);
  s.gt_boxes = gt.size();
  s.hyp_boxes = hyp.size();
  s.objects = object_boxes.size();
  MotCounter counter(object_code, hyp_code, object_boxes.size(), &s);
  const auto gt_frames = boxes_by_frame(gt), hyp_frames = boxes_by_frame(hyp);
  std::set<int64_t> frames;
  for (const auto &[f, rows] : gt_frames) frames.insert(f);
  for (const auto &[f, rows] : hyp_frames) frames.insert(f);
  const std::vector<const MotBox *> none;
  for (const int64_t frame : frames) {
    const auto g = gt_frames.find(frame), h = hyp_frames.find(frame);
    counter.frame(g == gt_frames.end() ? none : g->second,
                  h == hyp_frames.end() ? none : h->second);
  }
  counter.classify_objects(object_boxes);
  s.id_true_positives = counter.id_true_positives(object_boxes.size(), hyp_id_boxes.size());
  s.hota = score_hota(gt, hyp);
  return s;
}

std::string format_mot_table(const std::vector<std::pair<std::string, MotScores>> &rows) {
  size_t width = 8;
  for (const auto &[name, scores] : rows) width = std::max(width, name.size());
  std::string out;
  char line[512];
  std::snprintf(
      line, sizeof line,
      "%-*s %8s %8s %8s %8s %8s %5s %4s %4s %4s %6s %6s %5s %5s %8s %8s %8s %8s %8s %8s\n",
      static_cast<int>(width), "", "IDF1", "IDP", "IDR", "Rcll", "Prcn", "GT", "MT", "PT", "ML",
      "FP", "FN", "IDsw", "FM", "MOTA", "MOTP", "HOTA", "DetA", "AssA", "LocA");
  out += line;
  for (const auto &[name, s] : rows) {
    std::snprintf(line, sizeof line,
                  "%-*s %8.6f %8.6f %8.6f %8.6f %8.6f %5llu %4llu %4llu %4llu %6llu %6llu %5llu "
                  "%5llu %8.6f %8.6f %8.6f %8.6f %8.6f %8.6f\n",
                  static_cast<int>(width), name.c_str(), s.idf1(), s.idp(), s.idr(), s.recall(),
                  s.precision(), static_cast<unsigned long long>(s.objects),
                  static_cast<unsigned long long>(s.mostly_tracked),
                  static_cast<unsigned long long>(s.partly_tracked),
                  static_cast<unsigned long long>(s.mostly_lost),
                  static_cast<unsigned long long>(s.false_positives),
                  static_cast<unsigned long long>(s.misses),
                  static_cast<unsigned long long>(s.switches),
                  static_cast<unsigned long long>(s.fragmentations), s.mota(), s.motp(),
                  s.hota.hota(), s.hota.deta(), s.hota.assa(), s.hota.loca());
    out += line;
  }
  return out;
}

std::string mot_sequence_name(const std::string &gt_path) {
  g_autofree char *dir = g_path_get_dirname(gt_path.c_str());
  g_autofree char *base = g_path_get_basename(gt_path.c_str());
  g_autofree char *folder_name = g_path_get_basename(dir);
  if (std::string(folder_name) == "gt") {
    g_autofree char *up = g_path_get_dirname(dir);
    g_autofree char *up_name = g_path_get_basename(up);
    return up_name;
  }
  return std::string(base) == "gt.txt" ? std::string(folder_name) : std::string(base);
}

}  // namespace cudanms::tools
