#include "hota.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>

#include "cudanms/assignment.h"
#include "mot.h"

namespace cudanms::tools {
namespace {

constexpr double kEpsilon = std::numeric_limits<double>::epsilon();  // TrackEval's np.finfo eps

double alpha_of(int a) { return 0.05 + 0.05 * a; }  // as np.arange(0.05, 0.99, 0.05)

double mean(const std::array<double, HotaScores::kAlphas> &values) {
  double sum = 0;
  for (const double v : values) sum += v;
  return sum / HotaScores::kAlphas;
}

// One frame's objects and hypotheses: their id codes and the IoU of each pair.
struct Frame {
  std::vector<uint32_t> objects, hyps;
  std::vector<double> iou;  // objects x hyps

  double at(size_t i, size_t j) const { return iou[i * hyps.size() + j]; }
};

std::vector<Frame> frames_of(const std::vector<MotBox> &gt, const std::vector<MotBox> &hyp,
                             const std::unordered_map<int64_t, uint32_t> &object_code,
                             const std::unordered_map<int64_t, uint32_t> &hyp_code) {
  const auto gt_frames = boxes_by_frame(gt), hyp_frames = boxes_by_frame(hyp);
  std::map<int64_t, Frame> frames;
  for (const auto &[f, boxes] : gt_frames)
    for (const MotBox *b : boxes) frames[f].objects.push_back(object_code.at(b->id));
  for (const auto &[f, boxes] : hyp_frames)
    for (const MotBox *b : boxes) frames[f].hyps.push_back(hyp_code.at(b->id));
  std::vector<Frame> out;
  for (auto &[f, frame] : frames) {
    const auto g = gt_frames.find(f), h = hyp_frames.find(f);
    frame.iou.assign(frame.objects.size() * frame.hyps.size(), 0.0);
    for (size_t i = 0; i < frame.objects.size(); ++i)
      for (size_t j = 0; j < frame.hyps.size(); ++j)
        frame.iou[i * frame.hyps.size() + j] = box_iou(*g->second[i], *h->second[j]);
    out.push_back(std::move(frame));
  }
  return out;
}

}  // namespace

double HotaScores::deta_at(int a) const { return tp[a] / std::max(1.0, tp[a] + fn[a] + fp[a]); }

double HotaScores::assa_at(int a) const { return association[a] / std::max(1.0, tp[a]); }

double HotaScores::deta() const {
  std::array<double, kAlphas> each{};
  for (int a = 0; a < kAlphas; ++a) each[a] = deta_at(a);
  return mean(each);
}

double HotaScores::assa() const {
  std::array<double, kAlphas> each{};
  for (int a = 0; a < kAlphas; ++a) each[a] = assa_at(a);
  return mean(each);
}

double HotaScores::loca() const {
  std::array<double, kAlphas> each{};
  for (int a = 0; a < kAlphas; ++a)
    each[a] = (sequences == 1 ? std::max(1e-10, localisation[a]) : localisation[a]) /
              std::max(1e-10, tp[a]);
  return mean(each);
}

double HotaScores::hota() const {
  std::array<double, kAlphas> each{};
  for (int a = 0; a < kAlphas; ++a) each[a] = std::sqrt(deta_at(a) * assa_at(a));
  return mean(each);
}

HotaScores &HotaScores::operator+=(const HotaScores &o) {
  for (int a = 0; a < kAlphas; ++a) {
    tp[a] += o.tp[a];
    fn[a] += o.fn[a];
    fp[a] += o.fp[a];
    association[a] += o.association[a];
    localisation[a] += o.localisation[a];
  }
  sequences += o.sequences;
  return *this;
}

HotaScores score_hota(const std::vector<MotBox> &gt, const std::vector<MotBox> &hyp) {
  std::vector<uint64_t> object_boxes, hyp_boxes;
  const auto object_code = id_codes(gt, &object_boxes);
  const auto hyp_code = id_codes(hyp, &hyp_boxes);
  const std::vector<Frame> frames = frames_of(gt, hyp, object_code, hyp_code);

  // How much each pair of ids goes together: each frame's IoU over its row's and column's.
  std::map<std::pair<uint32_t, uint32_t>, double> together;
  for (const Frame &f : frames) {
    std::vector<double> row(f.objects.size(), 0.0), col(f.hyps.size(), 0.0);
    for (size_t i = 0; i < f.objects.size(); ++i)
      for (size_t j = 0; j < f.hyps.size(); ++j) {
        row[i] += f.at(i, j);
        col[j] += f.at(i, j);
      }
    for (size_t i = 0; i < f.objects.size(); ++i)
      for (size_t j = 0; j < f.hyps.size(); ++j) {
        const double denominator = row[i] + col[j] - f.at(i, j);
        if (denominator > kEpsilon) together[{f.objects[i], f.hyps[j]}] += f.at(i, j) / denominator;
      }
  }
  auto alignment = [&](uint32_t o, uint32_t h) {
    const auto it = together.find({o, h});
    if (it == together.end()) return 0.0;
    return it->second / (static_cast<double>(object_boxes[o] + hyp_boxes[h]) - it->second);
  };

  HotaScores s;
  s.sequences = 1;
  std::vector<std::map<std::pair<uint32_t, uint32_t>, double>> matched(HotaScores::kAlphas);
  SparseAssignment solver;
  std::vector<AssignmentEdge> edges;
  std::vector<int32_t> column_of_row;
  for (const Frame &f : frames) {
    // The most total alignment x IoU (cost 1 - score against 1 for no pair: pairs of score 0
    // change no sum and are left out).
    edges.clear();
    for (size_t i = 0; i < f.objects.size(); ++i)
      for (size_t j = 0; j < f.hyps.size(); ++j) {
        const double score = alignment(f.objects[i], f.hyps[j]) * f.at(i, j);
        if (score > 0)
          edges.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(j), 1.0 - score});
      }
    solver.solve(static_cast<uint32_t>(f.objects.size()), static_cast<uint32_t>(f.hyps.size()),
                 edges, 1.0, &column_of_row);
    for (int a = 0; a < HotaScores::kAlphas; ++a) {
      double tp = 0;
      for (size_t i = 0; i < f.objects.size(); ++i) {
        if (column_of_row[i] < 0) continue;
        const double iou = f.at(i, static_cast<size_t>(column_of_row[i]));
        if (iou < alpha_of(a) - kEpsilon) continue;
        tp++;
        s.localisation[a] += iou;
        matched[a][{f.objects[i], f.hyps[static_cast<size_t>(column_of_row[i])]}] += 1;
      }
      s.tp[a] += tp;
      s.fn[a] += static_cast<double>(f.objects.size()) - tp;
      s.fp[a] += static_cast<double>(f.hyps.size()) - tp;
    }
  }
  for (int a = 0; a < HotaScores::kAlphas; ++a)
    for (const auto &[pair, tpa] : matched[a])
      s.association[a] +=
          tpa * tpa /
          std::max(1.0, static_cast<double>(object_boxes[pair.first] + hyp_boxes[pair.second]) -
                            tpa);
  return s;
}

}  // namespace cudanms::tools
