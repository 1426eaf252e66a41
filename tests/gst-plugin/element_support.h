// Shared by the element tests: registering cudanms, building buffers with candidates, reading the
// element's metas back, and the independent expectation (the frame clipping rule + the library).
#pragma once

#include <gst/cudanms/cudanmsmeta.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "candidate_set.h"
#include "cudanms/nms.h"
#include "gstcudanms.h"

namespace cudanms::testing {

using tools::CandidateSet;

inline void init_gstreamer_once() {
  static const bool done = [] {
    gst_init(nullptr, nullptr);
    // The element registered from the static library the plugin is built from.
    return GST_ELEMENT_REGISTER(cudanms, nullptr) != FALSE;
  }();
  ASSERT_TRUE(done);
}

// A buffer (no memory: cudanms never maps) carrying the set in one candidates meta.
inline GstBuffer *packed_buffer(const CandidateSet &set) {
  GstBuffer *buf = gst_buffer_new();
  GstCudaNmsCandidatesMeta *meta =
      gst_buffer_add_cuda_nms_candidates_meta(buf, static_cast<guint>(set.size()));
  gst_cuda_nms_candidates_meta_set_points_per_candidate(meta, set.points_per_candidate);
  gst_cuda_nms_candidates_meta_append_with_points(meta, set.boxes.data(), set.scores.data(),
                                                  set.classes.data(), set.points.data(),
                                                  static_cast<guint>(set.size()));
  return buf;
}

// Adds the set as region-of-interest metas with the DL Streamer "detection" structure. ROI
// coordinates are integers: the set must hold integer, non-negative boxes.
inline void add_roi_candidates(GstBuffer *buf, const CandidateSet &set,
                               bool with_detection = true) {
  for (size_t i = 0; i < set.size(); ++i) {
    const float *b = &set.boxes[4 * i];
    GstVideoRegionOfInterestMeta *roi = gst_buffer_add_video_region_of_interest_meta(
        buf, "object", static_cast<guint>(b[0]), static_cast<guint>(b[1]),
        static_cast<guint>(b[2] - b[0]), static_cast<guint>(b[3] - b[1]));
    if (with_detection) {
      gst_video_region_of_interest_meta_add_param(
          roi, gst_structure_new("detection", "confidence", G_TYPE_DOUBLE,
                                 static_cast<double>(set.scores[i]), "label_id", G_TYPE_INT,
                                 set.classes[i], NULL));
    }
  }
}

// The set with integer coordinates, every box inside a width x height frame.
inline CandidateSet integer_boxes_in_frame(const CandidateSet &set, int width, int height) {
  CandidateSet out;
  for (size_t i = 0; i < set.size(); ++i) {
    const float *b = &set.boxes[4 * i];
    const float x1 = std::clamp(std::round(b[0]), 0.0f, float(width));
    const float y1 = std::clamp(std::round(b[1]), 0.0f, float(height));
    const float x2 = std::clamp(std::round(b[2]), x1, float(width));
    const float y2 = std::clamp(std::round(b[3]), y1, float(height));
    out.add(x1, y1, x2, y2, set.scores[i], set.classes[i]);
  }
  return out;
}

// The element's documented clipping rule, written out independently: boxes the library judges
// invalid and boxes within [0, width] x [0, height] stay as they are; a box sticking out of the
// frame with no area in common with it becomes invalid (NaN); the others are clamped.
inline CandidateSet clipped_to_frame(const CandidateSet &set, int width, int height) {
  CandidateSet out = set;
  for (size_t i = 0; i < out.size(); ++i) {
    float *b = &out.boxes[4 * i];
    const bool finite = std::isfinite(b[0]) && std::isfinite(b[1]) && std::isfinite(b[2]) &&
                        std::isfinite(b[3]) && std::isfinite(out.scores[i]);
    if (!finite || b[2] < b[0] || b[3] < b[1]) continue;
    if (b[0] >= 0 && b[1] >= 0 && b[2] <= width && b[3] <= height) continue;
    if (b[2] <= 0 || b[3] <= 0 || b[0] >= width || b[1] >= height) {
      b[0] = b[1] = b[2] = b[3] = NAN;
      continue;
    }
    b[0] = std::max(b[0], 0.0f);
    b[1] = std::max(b[1], 0.0f);
    b[2] = std::min(b[2], float(width));
    b[3] = std::min(b[3], float(height));
  }
  return out;
}

inline Result library_result(const CandidateSet &set, const Params &params) {
  Status status;
  auto nms = Context::create({Backend::kCpu}, &status);
  EXPECT_TRUE(status.ok()) << status.message();
  Result result;
  status = nms->run(set.view(), params, &result);
  EXPECT_TRUE(status.ok()) << status.message();
  return result;
}

// Sets the element's properties to the params.
inline void set_params(GstElement *element, const Params &p) {
  g_object_set(element, "iou-threshold", double(p.threshold), "score-threshold",
               double(p.score_threshold), "max-candidates", guint(p.max_candidates),
               "max-detections", guint(p.max_detections), "class-agnostic",
               gboolean(p.class_agnostic), NULL);
  gst_util_set_object_arg(G_OBJECT(element), "method", to_string(p.method));
  gst_util_set_object_arg(G_OBJECT(element), "overlap", to_string(p.overlap));
  gst_util_set_object_arg(G_OBJECT(element), "soft-decay", to_string(p.soft_decay));
  g_object_set(element, "sigma", double(p.sigma), "class-groups",
               class_groups_to_string(p.class_groups).c_str(), "min-neighbors",
               guint(p.min_neighbors), "group-eps", p.group_eps, NULL);
}

struct Roi {
  guint x, y, w, h;
  std::string type;
  double confidence;
  int label_id;
  double x_min, y_min, x_max, y_max;
  std::string label;  // the "detection" structure's, "" without one
  guint members = 0;  // the "detection" structure's, 0 without one
};

// The buffer's ROI metas in the order they were added.
inline std::vector<Roi> rois_of(GstBuffer *buf) {
  std::vector<GstMeta *> metas;
  gpointer state = nullptr;
  GstMeta *meta;
  while ((meta = gst_buffer_iterate_meta_filtered(buf, &state,
                                                  GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE)))
    metas.push_back(meta);
  std::sort(metas.begin(), metas.end(),
            [](GstMeta *a, GstMeta *b) { return gst_meta_get_seqnum(a) < gst_meta_get_seqnum(b); });
  std::vector<Roi> rois;
  for (GstMeta *m : metas) {
    auto *r = reinterpret_cast<GstVideoRegionOfInterestMeta *>(m);
    Roi roi{r->x, r->y, r->w, r->h, g_quark_to_string(r->roi_type), -1, -1, NAN, NAN, NAN, NAN, ""};
    if (GstStructure *d = gst_video_region_of_interest_meta_get_param(r, "detection")) {
      if (const gchar *label = gst_structure_get_string(d, "label")) roi.label = label;
      gst_structure_get_double(d, "confidence", &roi.confidence);
      gst_structure_get_int(d, "label_id", &roi.label_id);
      gst_structure_get_double(d, "x_min", &roi.x_min);
      gst_structure_get_double(d, "y_min", &roi.y_min);
      gst_structure_get_double(d, "x_max", &roi.x_max);
      gst_structure_get_double(d, "y_max", &roi.y_max);
      gst_structure_get_uint(d, "members", &roi.members);
    }
    rois.push_back(roi);
  }
  return rois;
}

// The output agrees with the expected result on `set` (already clipped as the element clips):
// the result meta holds the kept boxes and counts, and one ROI meta per kept box follows.
inline ::testing::AssertionResult output_matches(GstBuffer *out, const CandidateSet &set,
                                                 const Result &want, int width, int height) {
  GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  if (!r) return ::testing::AssertionFailure() << "no result meta";
  if (gst_buffer_get_n_meta(out, GST_CUDA_NMS_RESULT_META_API_TYPE) != 1)
    return ::testing::AssertionFailure() << "more than one result meta";
  const Counts &c = want.counts;
  if (r->candidates_in != c.in || r->invalid != c.invalid || r->dropped_score != c.below_score ||
      r->dropped_capacity != c.over_capacity || r->kept != c.kept)
    return ::testing::AssertionFailure()
           << "counts in/invalid/score/capacity/kept: got " << r->candidates_in << "/" << r->invalid
           << "/" << r->dropped_score << "/" << r->dropped_capacity << "/" << r->kept << ", want "
           << c.in << "/" << c.invalid << "/" << c.below_score << "/" << c.over_capacity << "/"
           << c.kept;
  if (r->n_kept != want.kept.size())
    return ::testing::AssertionFailure()
           << "kept " << r->n_kept << " boxes, want " << want.kept.size();
  const std::vector<Roi> rois = rois_of(out);
  if (rois.size() != want.kept.size())
    return ::testing::AssertionFailure() << rois.size() << " ROI metas, want " << want.kept.size();
  for (size_t i = 0; i < want.kept.size(); ++i) {
    const size_t k = want.kept[i];
    // Soft-NMS's decayed scores and weighted NMS's merged boxes: the library's values.
    const bool valued = !want.kept_scores.empty();
    const float *b = valued ? &want.kept_boxes[4 * i] : &set.boxes[4 * k];
    const float score = valued ? want.kept_scores[i] : set.scores[k];
    if (!std::equal(b, b + 4, r->boxes + 4 * i) || r->scores[i] != score ||
        r->class_ids[i] != set.classes[k])
      return ::testing::AssertionFailure()
             << "result box " << i << " is not candidate " << k << " {" << b[0] << "," << b[1]
             << "," << b[2] << "," << b[3] << "} score " << score;
    const Roi &roi = rois[i];
    const guint x = guint(std::max(0.0f, std::floor(b[0])));
    const guint y = guint(std::max(0.0f, std::floor(b[1])));
    const guint w = guint(std::max(float(x), std::ceil(b[2])) - x);
    const guint h = guint(std::max(float(y), std::ceil(b[3])) - y);
    if (roi.x != x || roi.y != y || roi.w != w || roi.h != h)
      return ::testing::AssertionFailure()
             << "ROI " << i << " is " << roi.x << "," << roi.y << " " << roi.w << "x" << roi.h
             << ", want " << x << "," << y << " " << w << "x" << h;
    if (roi.confidence != double(score) || roi.label_id != set.classes[k])
      return ::testing::AssertionFailure()
             << "ROI " << i << " detection " << roi.confidence << "/" << roi.label_id;
    if (width > 0 && (std::abs(roi.x_min - b[0] / double(width)) > 1e-9 ||
                      std::abs(roi.y_min - b[1] / double(height)) > 1e-9 ||
                      std::abs(roi.x_max - b[2] / double(width)) > 1e-9 ||
                      std::abs(roi.y_max - b[3] / double(height)) > 1e-9))
      return ::testing::AssertionFailure() << "ROI " << i << " normalized box is wrong";
  }
  // The points, bit for bit: the library's (kept or merged), or none.
  const size_t point_floats = 2 * size_t{r->points_per_box} * r->n_kept;
  if (want.kept_points.size() != point_floats ||
      (point_floats > 0 &&
       std::memcmp(r->points, want.kept_points.data(), point_floats * sizeof(float)) != 0))
    return ::testing::AssertionFailure() << "result points differ: " << point_floats
                                         << " floats, want " << want.kept_points.size();
  // The members, where the library counted them: its neighbours plus the box itself.
  if ((r->members != nullptr) != !want.kept_neighbors.empty())
    return ::testing::AssertionFailure() << "members " << (r->members ? "given" : "missing");
  for (size_t i = 0; r->members && i < want.kept.size(); ++i) {
    if (r->members[i] != want.kept_neighbors[i] + 1 || rois[i].members != r->members[i])
      return ::testing::AssertionFailure()
             << "box " << i << " stands for " << r->members[i] << " (ROI " << rois[i].members
             << "), want " << want.kept_neighbors[i] + 1;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace cudanms::testing
