// The cudanms element's output (cudanmsoutput.h): points, the consumed candidate metas, an earlier
// result meta, the latency.
#include "cudanms_fixture.h"

namespace cudanms::testing {
namespace {

// Landmarks through the element: weighted NMS merges them into the result meta; candidates of
// a second meta without points bring NaN ones.
TEST_F(CudaNmsElement, PointsReachTheResultMeta) {
  start("backend=cpu method=weighted iou-threshold=0.3");
  GstBuffer *in = gst_buffer_new();
  GstCudaNmsCandidatesMeta *c = gst_buffer_add_cuda_nms_candidates_meta(in, 2);
  ASSERT_TRUE(gst_cuda_nms_candidates_meta_set_points_per_candidate(c, 1));
  const float boxes[] = {100, 100, 200, 200, 104, 100, 204, 200};
  const float scores[] = {3.0f, 1.0f};
  const float points[] = {150, 120, 154, 124};
  gst_cuda_nms_candidates_meta_append_with_points(c, boxes, scores, nullptr, points, 2);
  GstBuffer *out = process(in);
  GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->n_kept, 1u);
  ASSERT_EQ(r->points_per_box, 1u);
  EXPECT_EQ(r->points[0], 151.0f);  // (150 * 3 + 154) / 4
  EXPECT_EQ(r->points[1], 121.0f);  // (120 * 3 + 124) / 4
  gst_buffer_unref(out);

  // A second frame: its one candidate with points and one from a region-of-interest meta.
  in = gst_buffer_new();
  c = gst_buffer_add_cuda_nms_candidates_meta(in, 1);
  gst_cuda_nms_candidates_meta_set_points_per_candidate(c, 1);
  gst_cuda_nms_candidates_meta_append_with_points(c, boxes, scores, nullptr, points, 1);
  gst_buffer_add_video_region_of_interest_meta(in, "face", 400, 400, 50, 50);
  out = process(in);
  r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_EQ(r->n_kept, 2u);
  ASSERT_EQ(r->points_per_box, 1u);
  EXPECT_EQ(r->points[0], 150.0f);  // its own
  EXPECT_TRUE(std::isnan(r->points[2]));
  gst_buffer_unref(out);
  EXPECT_EQ(pop_messages(GST_MESSAGE_ERROR), 0u);
}

TEST_F(CudaNmsElement, KeepCandidates) {
  start();
  CandidateSet set;
  set.add(10, 10, 50, 50, 0.9f);
  set.add(12, 12, 52, 52, 0.8f);
  auto run = [&](bool with_rois) {
    GstBuffer *in = packed_buffer(set);
    if (with_rois) add_roi_candidates(in, set);
    return process(in);
  };
  GstBuffer *out = run(true);  // default: consumed metas are removed
  EXPECT_EQ(gst_buffer_get_n_meta(out, GST_CUDA_NMS_CANDIDATES_META_API_TYPE), 0u);
  EXPECT_EQ(rois_of(out).size(), 1u);  // only the kept box
  gst_buffer_unref(out);

  g_object_set(element_, "keep-candidates", TRUE, NULL);
  out = run(true);
  ASSERT_EQ(gst_buffer_get_n_meta(out, GST_CUDA_NMS_CANDIDATES_META_API_TYPE), 1u);
  EXPECT_EQ(gst_buffer_get_cuda_nms_candidates_meta(out)->n, 2u);
  EXPECT_EQ(rois_of(out).size(), 2u + 1u);  // the two candidates and the kept one
  gst_buffer_unref(out);
}

TEST_F(CudaNmsElement, AnEarlierResultMetaIsReplaced) {
  start();
  CandidateSet set;
  set.add(10, 10, 50, 50, 0.9f);
  GstBuffer *in = packed_buffer(set);
  gst_buffer_add_cuda_nms_result_meta(in, 5);
  GstBuffer *out = process(in);
  EXPECT_EQ(gst_buffer_get_n_meta(out, GST_CUDA_NMS_RESULT_META_API_TYPE), 1u);
  EXPECT_EQ(gst_buffer_get_cuda_nms_result_meta(out)->n_kept, 1u);
  gst_buffer_unref(out);
}

TEST_F(CudaNmsElement, LatencyIsInTheResultMeta) {
  start();
  std::mt19937_64 rng(run_seed() + 107);
  GstBuffer *out =
      process(packed_buffer(tools::sliding_window_candidates(2000, rng(), 1, kWidth, kHeight)));
  GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(r, nullptr);
  EXPECT_GT(r->latency_ns, 0u);
  EXPECT_LT(r->latency_ns, 10 * GST_SECOND);
  EXPECT_STREQ(r->backend, "cpu");
  gdouble last;
  g_object_get(element_, "last-latency-us", &last, NULL);
  EXPECT_DOUBLE_EQ(last, r->latency_ns / 1000.0);
  gst_buffer_unref(out);
}

}  // namespace
}  // namespace cudanms::testing
