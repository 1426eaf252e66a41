// The cudanms element's intake (cudanmsintake.h): ROI metas without a detection, bad input and
// the frame clipping, both conventions on one buffer, device candidates downloaded once.
#include "cudanms_fixture.h"

#include <map>

namespace cudanms::testing {
namespace {

TEST_F(CudaNmsElement, RoiWithoutDetectionCountsAsScoreOneClassFromRoiType) {
  start();
  GstBuffer *in = gst_buffer_new();
  // Two overlapping "face" boxes and one overlapping "car" box: per class, both types survive.
  gst_buffer_add_video_region_of_interest_meta(in, "face", 10, 10, 100, 100);
  gst_buffer_add_video_region_of_interest_meta(in, "face", 12, 12, 100, 100);
  gst_buffer_add_video_region_of_interest_meta(in, "car", 11, 11, 100, 100);
  GstBuffer *out = process(in);
  GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->candidates_in, 3u);
  ASSERT_EQ(r->n_kept, 2u);
  const std::vector<Roi> rois = rois_of(out);
  ASSERT_EQ(rois.size(), 2u);
  // Equal scores (1.0): the first added wins.
  EXPECT_EQ(rois[0].type, "face");
  EXPECT_EQ(rois[0].x, 10u);
  EXPECT_EQ(rois[0].confidence, 1.0);
  EXPECT_EQ(rois[1].type, "car");
  // No label_id and no labels-file: no class id, in the result meta (-1) or the ROI's detection.
  EXPECT_EQ(r->class_ids[0], -1);
  EXPECT_EQ(r->class_ids[1], -1);
  EXPECT_STREQ(r->labels[1], "car");
  EXPECT_EQ(rois[1].label_id, -1);
  gst_buffer_unref(out);
}

// The class id of an ROI meta: its detection's label_id, an int or a uint as detectors write it;
// else its roi_type's line in labels-file; else none. Never a number made of the type's name.
TEST_F(CudaNmsElement, RoiClassIdsAreLabelIdsOrTheLabelsFilesLines) {
  const LabelsFile names("person\ncar\n");
  start("backend=cpu labels-file=" + names.path());
  GstBuffer *in = gst_buffer_new();
  auto add = [&](const char *type, guint x, GstStructure *detection) {
    GstVideoRegionOfInterestMeta *roi =
        gst_buffer_add_video_region_of_interest_meta(in, type, x, 10, 50, 50);
    if (detection) gst_video_region_of_interest_meta_add_param(roi, detection);
  };
  add("person", 0, gst_structure_new("detection", "confidence", G_TYPE_DOUBLE, 0.9, "label_id",
                                     G_TYPE_UINT, 7u, NULL));
  add("car", 100, nullptr);  // line 1 of the labels file
  add("truck", 200, nullptr);  // in no file: no class id
  add("bus", 300, gst_structure_new("detection", "confidence", G_TYPE_DOUBLE, 0.8, "label_id",
                                    G_TYPE_INT, 5, NULL));
  GstBuffer *out = process(in);
  GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->n_kept, 4u);
  std::map<std::string, int> ids;
  for (guint i = 0; i < r->n_kept; ++i) ids[r->labels[i]] = r->class_ids[i];
  // Classes 7 and 5, past the labels file's lines, keep their ROI types as labels.
  EXPECT_EQ(ids,
            (std::map<std::string, int>{{"person", 7}, {"car", 1}, {"truck", -1}, {"bus", 5}}))
      << "labels: " << r->labels[0] << " " << r->labels[1] << " " << r->labels[2] << " "
      << r->labels[3];
  std::map<std::string, int> roi_ids;
  for (const Roi &roi : rois_of(out)) roi_ids[roi.type] = roi.label_id;
  EXPECT_EQ(roi_ids["truck"], -1);  // the detection structure has no label_id
  EXPECT_EQ(roi_ids["car"], 1);
  gst_buffer_unref(out);
}

// ---------------------------------------------------------------------------------------------
// Bad input.

TEST_F(CudaNmsElement, NonFiniteScoresAndCoordinatesAreInvalid) {
  start();
  CandidateSet set;
  set.add(10, 10, 50, 50, kNaN, 0);
  set.add(10, 10, 50, 50, kInf, 0);
  set.add(kNaN, 10, 50, 50, 0.9f, 0);
  set.add(10, 10, kInf, 50, 0.9f, 0);
  set.add(10, -kInf, 50, 50, 0.9f, 0);
  set.add(100, 100, 150, 150, 0.5f, 0);  // the one valid box
  GstBuffer *out = process(packed_buffer(set));
  GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->candidates_in, 6u);
  EXPECT_EQ(r->invalid, 5u);
  ASSERT_EQ(r->n_kept, 1u);
  EXPECT_EQ(r->boxes[0], 100.0f);
  gst_buffer_unref(out);
  Params params;
  EXPECT_TRUE(check(set, params));
}

TEST_F(CudaNmsElement, NegativeSizesAreInvalid) {
  start();
  CandidateSet set;
  set.add(50, 10, 10, 50, 0.9f);  // x2 < x1
  set.add(10, 50, 50, 10, 0.9f);  // y2 < y1
  set.add(10, 10, 10, 50, 0.8f);  // zero width: valid
  GstBuffer *out = process(packed_buffer(set));
  GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->invalid, 2u);
  EXPECT_EQ(r->kept, 1u);
  gst_buffer_unref(out);
  EXPECT_TRUE(check(set, Params()));
}

TEST_F(CudaNmsElement, BoxesPartlyOutsideAreClipped) {
  start();
  CandidateSet set;
  set.add(-20, -10, 40, 30, 0.9f);      // top left corner
  set.add(600, 450, 700, 520, 0.8f);    // bottom right corner
  set.add(-100, 100, 1000, 200, 0.7f);  // wider than the frame
  GstBuffer *out = process(packed_buffer(set));
  GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->n_kept, 3u);
  EXPECT_EQ(std::vector<float>(r->boxes, r->boxes + 12),
            (std::vector<float>{0, 0, 40, 30, 600, 450, 640, 480, 0, 100, 640, 200}));
  const std::vector<Roi> rois = rois_of(out);
  ASSERT_EQ(rois.size(), 3u);
  EXPECT_EQ(rois[1].x + rois[1].w, 640u);
  EXPECT_EQ(rois[1].y + rois[1].h, 480u);
  EXPECT_DOUBLE_EQ(rois[1].x_max, 1.0);
  gst_buffer_unref(out);
  EXPECT_TRUE(check(set, Params()));
}

TEST_F(CudaNmsElement, BoxesWhollyOutsideAreInvalid) {
  start();
  CandidateSet set;
  set.add(-50, 10, -10, 50, 0.9f);        // left
  set.add(700, 10, 800, 50, 0.9f);        // right
  set.add(10, -90, 50, -1, 0.9f);         // above
  set.add(10, 480, 50, 600, 0.9f);        // below, touching the bottom edge
  set.add(1e9f, 1e9f, 2e9f, 2e9f, 0.9f);  // far away
  set.add(10, 10, 50, 50, 0.1f);          // inside
  GstBuffer *out = process(packed_buffer(set));
  GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->invalid, 5u);
  ASSERT_EQ(r->n_kept, 1u);
  EXPECT_EQ(r->scores[0], 0.1f);
  gst_buffer_unref(out);
  EXPECT_TRUE(check(set, Params()));
}

TEST_F(CudaNmsElement, NoClippingWithoutAFrameSize) {
  start("backend=cpu", "video/x-raw");  // no width/height: nothing to clip against
  CandidateSet set;
  set.add(-50, 10, -10, 50, 0.9f);
  GstBuffer *out = process(packed_buffer(set));
  GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->invalid, 0u);
  ASSERT_EQ(r->n_kept, 1u);
  EXPECT_EQ(r->boxes[0], -50.0f);
  const std::vector<Roi> rois = rois_of(out);
  ASSERT_EQ(rois.size(), 1u);
  EXPECT_EQ(rois[0].x, 0u);                // ROI coordinates are unsigned
  EXPECT_TRUE(std::isnan(rois[0].x_min));  // no normalized box without a frame size
  gst_buffer_unref(out);
}

TEST_F(CudaNmsElement, CandidatesMetaAndRoiMetasOnOneBufferAreBothUsed) {
  start();
  std::mt19937_64 rng(run_seed() + 103);
  const CandidateSet packed = tools::sliding_window_candidates(300, rng(), 3, kWidth, kHeight);
  const CandidateSet as_rois = integer_boxes_in_frame(
      tools::sliding_window_candidates(200, rng(), 3, kWidth, kHeight), kWidth, kHeight);
  GstBuffer *in = packed_buffer(packed);
  add_roi_candidates(in, as_rois);
  GstBuffer *out = process(in);
  // Numbered: the candidates meta's, then the ROI metas in the order they were added.
  CandidateSet all = packed;
  for (size_t i = 0; i < as_rois.size(); ++i)
    all.add(as_rois.boxes[4 * i], as_rois.boxes[4 * i + 1], as_rois.boxes[4 * i + 2],
            as_rois.boxes[4 * i + 3], as_rois.scores[i], as_rois.classes[i]);
  const CandidateSet clipped = clipped_to_frame(all, kWidth, kHeight);
  EXPECT_TRUE(output_matches(out, clipped, library_result(clipped, Params()), kWidth, kHeight));
  EXPECT_EQ(gst_buffer_get_cuda_nms_result_meta(out)->candidates_in, 500u);
  gst_buffer_unref(out);
}

// Device candidates reaching a CPU context (or another CUDA context) are downloaded once, through
// the producer's function, and give the host result.
TEST_F(CudaNmsElement, DeviceCandidatesAreDownloadedOnceWhereNmsRunsOnTheCpu) {
  start();
  g_object_set(element_, "keep-candidates", TRUE, NULL);
  std::mt19937_64 rng(run_seed() + 120);
  const CandidateSet set = integer_boxes_in_frame(
      tools::sliding_window_candidates(500, rng(), 3, kWidth, kHeight), kWidth, kHeight);
  GstBuffer *in = gst_buffer_new();
  GstCudaNmsDeviceCandidates *dc = gst_cuda_nms_device_candidates_new();
  dc->capacity = static_cast<guint>(set.size());
  dc->download = download_set;
  dc->user_data = const_cast<CandidateSet *>(&set);
  ASSERT_TRUE(
      gst_cuda_nms_candidates_meta_set_device(gst_buffer_add_cuda_nms_candidates_meta(in, 0), dc));
  GstBuffer *out = process(in);
  EXPECT_TRUE(output_matches(out, set, library_result(set, Params()), kWidth, kHeight));
  GstCudaNmsCandidatesMeta *c = gst_buffer_get_cuda_nms_candidates_meta(out);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->downloads, 1u);
  gst_buffer_unref(out);
}

}  // namespace
}  // namespace cudanms::testing
