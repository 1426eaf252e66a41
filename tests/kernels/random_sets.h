// Random candidate sets for the NMS tests, each shaped to stress one part of the rules.
#pragma once

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "candidate_set.h"
#include "support/test_scale.h"
#include "synthetic.h"

namespace cudanms::testing {

using tools::CandidateSet;

struct Generator {
  std::string name;
  std::function<CandidateSet(std::mt19937_64 &, size_t n, int classes)> make;
};

inline float uniform(std::mt19937_64 &rng, float lo, float hi) {
  return std::uniform_real_distribution<float>(lo, hi)(rng);
}
inline int uniform_int(std::mt19937_64 &rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

inline std::vector<Generator> generators() {
  return {
      {"uniform",
       [](std::mt19937_64 &rng, size_t n, int classes) {
         CandidateSet s;
         for (size_t i = 0; i < n; ++i) {
           const float x = uniform(rng, 0, 600), y = uniform(rng, 0, 400);
           s.add(x, y, x + uniform(rng, 1, 200), y + uniform(rng, 1, 200), uniform(rng, 0, 1),
                 uniform_int(rng, 0, classes - 1));
         }
         return s;
       }},
      {"sliding_window",
       [](std::mt19937_64 &rng, size_t n, int classes) {
         return tools::sliding_window_candidates(n, rng(), classes, 640, 480);
       }},
      {"equal_scores",  // ties everywhere: the index decides
       [](std::mt19937_64 &rng, size_t n, int classes) {
         CandidateSet s;
         for (size_t i = 0; i < n; ++i) {
           const float x = uniform_int(rng, 0, 60) * 4.0f, y = uniform_int(rng, 0, 40) * 4.0f;
           const float side = uniform_int(rng, 4, 20) * 4.0f;
           s.add(x, y, x + side, y + side, uniform_int(rng, 0, 3) * 0.25f,
                 uniform_int(rng, 0, classes - 1));
         }
         return s;
       }},
      {"zero_area",  // points and lines mixed with boxes
       [](std::mt19937_64 &rng, size_t n, int classes) {
         CandidateSet s;
         for (size_t i = 0; i < n; ++i) {
           const float x = uniform_int(rng, 0, 50), y = uniform_int(rng, 0, 50);
           const int kind = uniform_int(rng, 0, 3);
           const float w = kind == 0 || kind == 1 ? 0.0f : uniform_int(rng, 1, 30);
           const float h = kind == 0 || kind == 2 ? 0.0f : uniform_int(rng, 1, 30);
           s.add(x, y, x + w, y + h, uniform(rng, 0, 1), uniform_int(rng, 0, classes - 1));
         }
         return s;
       }},
      {"nested",  // concentric boxes: IoMin and IoS see full overlap where IoU does not
       [](std::mt19937_64 &rng, size_t n, int classes) {
         CandidateSet s;
         while (s.size() < n) {
           const float cx = uniform(rng, 100, 500), cy = uniform(rng, 100, 300);
           for (int k = 1; k <= 8 && s.size() < n; ++k) {
             const float r = 6.0f * k + uniform(rng, 0, 3);
             s.add(cx - r, cy - r, cx + r, cy + r, uniform(rng, 0, 1),
                   uniform_int(rng, 0, classes - 1));
           }
         }
         return s;
       }},
      {"millions",  // far from the origin, where float spacing is coarse
       [](std::mt19937_64 &rng, size_t n, int classes) {
         CandidateSet s;
         for (size_t i = 0; i < n; ++i) {
           const float x = 3.0e6f + uniform(rng, 0, 2000), y = -2.0e6f + uniform(rng, 0, 2000);
           s.add(x, y, x + uniform(rng, 0, 300), y + uniform(rng, 0, 300), uniform(rng, 0, 1),
                 uniform_int(rng, 0, classes - 1));
         }
         return s;
       }},
      {"face_windows",  // integer squares with rounded scores, the paper's input
       [](std::mt19937_64 &rng, size_t n, int classes) {
         CandidateSet s = tools::face_windows(n, rng(), 640, 480);
         for (auto &c : s.classes) c = uniform_int(rng, 0, classes - 1);
         return s;
       }},
  };
}

}  // namespace cudanms::testing

namespace cudanms::testing {

// Gives every candidate `per_candidate` points spread over and around its box.
inline void add_points(std::mt19937_64 &rng, int per_candidate, tools::CandidateSet *set) {
  std::uniform_real_distribution<float> t(-0.25f, 1.25f);
  set->points_per_candidate = static_cast<uint32_t>(per_candidate);
  set->points.clear();
  for (size_t i = 0; i < set->size(); ++i) {
    const float *b = &set->boxes[4 * i];
    for (int k = 0; k < per_candidate; ++k) {
      set->points.push_back(b[0] + t(rng) * (b[2] - b[0]));
      set->points.push_back(b[1] + t(rng) * (b[3] - b[1]));
    }
  }
}

struct RandomCase {
  std::string description;  // enough to find the case again with the seed
  CandidateSet set;
  Params params;
};

// Every generator x method x criterion x threshold x class mode, `sets` random sets each,
// of 0..max_size candidates, with random Dmax, score threshold and detection cap now and then;
// at the small test scale, every random_case_stride()th of them (the same cases either way).
template <typename Visit>
void for_each_random_case(uint64_t seed, int sets, size_t max_size, Visit visit) {
  std::mt19937_64 rng(seed);
  const float thresholds[] = {0.0f, 0.3f, 0.5f, 0.7f, 1.0f};
  size_t index = 0;
  for (const Generator &g : generators()) {
    for (Method method :
         {Method::kGreedy, Method::kMatrix, Method::kSoft, Method::kWeighted, Method::kGroup}) {
      for (Overlap overlap : {Overlap::kIoU, Overlap::kIoMin, Overlap::kIoS, Overlap::kDIoU}) {
        for (float threshold : thresholds) {
          for (bool agnostic : {false, true}) {
            for (int k = 0; k < sets; ++k) {
              RandomCase c;
              const size_t n = std::uniform_int_distribution<size_t>(0, max_size)(rng);
              c.set = g.make(rng, n, agnostic ? 1 : 3);
              c.params.method = method;
              c.params.overlap = overlap;
              c.params.threshold = threshold;
              c.params.class_agnostic = agnostic;
              c.params.score_threshold = uniform_int(rng, 0, 3) == 0 ? 0.25f : 0.0f;
              c.params.max_candidates = uniform_int(rng, 0, 3) == 0 ? n / 2 + 1 : 4096;
              c.params.max_detections = uniform_int(rng, 0, 3) == 0 ? 5 : 0;
              if (!agnostic && uniform_int(rng, 0, 2) == 0) c.params.class_groups = {{0, 2}};
              c.params.soft_decay =
                  uniform_int(rng, 0, 1) ? SoftDecay::kLinear : SoftDecay::kGaussian;
              c.params.sigma = uniform_int(rng, 0, 1) ? 0.5f : 0.1f;
              // A third of the sets need neighbours (rule 5), and group's always but a fifth.
              const bool grouping = method == Method::kGroup && uniform_int(rng, 0, 4) != 0;
              c.params.min_neighbors =
                  grouping || uniform_int(rng, 0, 2) == 0 ? uniform_int(rng, 1, 3) : 0;
              c.params.group_eps = uniform_int(rng, 0, 1) ? 0.2 : 0.5;
              // A third of the sets carry 1 to 6 points per box, near it (landmarks).
              if (uniform_int(rng, 0, 2) == 0) add_points(rng, uniform_int(rng, 1, 6), &c.set);
              c.description =
                  g.name + " n=" + std::to_string(n) + " " + to_string(method) + " " +
                  to_string(overlap) + " threshold=" + std::to_string(threshold) +
                  (agnostic ? " agnostic" : " per-class") +
                  " score_threshold=" + std::to_string(c.params.score_threshold) +
                  " Dmax=" + std::to_string(c.params.max_candidates) +
                  " max_detections=" + std::to_string(c.params.max_detections) +
                  " groups=" + class_groups_to_string(c.params.class_groups) +
                  " min_neighbors=" + std::to_string(c.params.min_neighbors) +
                  (method == Method::kGroup ? " eps=" + std::to_string(c.params.group_eps)
                                            : std::string()) +
                  " points=" + std::to_string(c.set.points_per_candidate) +
                  (method == Method::kSoft ? std::string(" ") + to_string(c.params.soft_decay) +
                                                 " sigma=" + std::to_string(c.params.sigma)
                                           : std::string()) +
                  " set#" + std::to_string(k);
              if (index++ % random_case_stride() == 0) visit(c);
            }
          }
        }
      }
    }
  }
}

}  // namespace cudanms::testing
