// HOTA, Higher Order Tracking Accuracy (Luiten et al., IJCV 2021), as the authors' TrackEval
// computes it for MOTChallenge boxes: detection, association and localisation in one score.
//
// For each localisation threshold alpha in 0.05, 0.10, ..., 0.95:
//  1. Every frame, ground-truth objects and hypotheses are matched one to one, maximising the sum
//     of IoU x A(object, hypothesis), where A is how much the two ids go together over the whole
//     sequence (the overlap of their frames, each frame's IoU first divided by its row's and
//     column's, as TrackEval does). One matching a frame serves every alpha.
//  2. A matched pair of IoU >= alpha is a true positive (TP) of that alpha; the other objects are
//     misses (FN), the other hypotheses false positives (FP).
//  3. DetA = TP / (TP + FN + FP). For each pair of ids with TPA frames matched together,
//     A = TPA / (frames of the object + frames of the hypothesis - TPA); AssA = the mean of A
//     over the true positives. LocA = the mean IoU of the true positives.
//     HOTA(alpha) = sqrt(DetA x AssA).
// HOTA, DetA, AssA and LocA are the means over the 19 alphas. Sequences taken together add up TP,
// FN and FP, and average AssA and LocA weighted by TP (TrackEval's combination). At an alpha
// without a TP, LocA is 1 for one sequence and 0 for sequences together, as in TrackEval.
#pragma once

#include <array>
#include <vector>

namespace cudanms::tools {

struct MotBox;  // mot.h

struct HotaScores {
  static constexpr int kAlphas = 19;  // 0.05, 0.10, ..., 0.95
  std::array<double, kAlphas> tp{}, fn{}, fp{};
  std::array<double, kAlphas> association{};   // AssA x TP: the sum of A over the TPs
  std::array<double, kAlphas> localisation{};  // LocA x TP: the sum of the TPs' IoU
  int sequences = 0;

  double deta() const;
  double assa() const;
  double loca() const;
  double hota() const;
  HotaScores &operator+=(const HotaScores &other);  // sequences taken together

 private:
  double deta_at(int alpha) const;  // DetA and AssA at one threshold
  double assa_at(int alpha) const;
};

HotaScores score_hota(const std::vector<MotBox> &gt, const std::vector<MotBox> &hyp);

}  // namespace cudanms::tools
