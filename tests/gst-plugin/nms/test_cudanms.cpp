// The cudanms element: kept boxes equal the library's result through both input conventions, every
// method and rule, frames far over Dmax, buffers without candidates or not writable, and the metas
// through videoscale.
#include "cudanms_fixture.h"

namespace cudanms::testing {
namespace {

TEST_F(CudaNmsElement, PackedCandidatesMatchLibraryOnRandomSets) {
  start();
  size_t cases = 0;
  // Properties change between frames of one running element: every property path is exercised.
  for_each_random_case(run_seed() + 100, 1, 300, [&](const RandomCase &c) {
    ++cases;
    set_params(element_, c.params);
    ASSERT_TRUE(check(c.set, c.params)) << c.description;
  });
  EXPECT_GT(cases, 400u / random_case_stride());
  EXPECT_EQ(pop_messages(GST_MESSAGE_ERROR), 0u);
}

TEST_F(CudaNmsElement, RoiCandidatesMatchLibraryOnRandomSets) {
  start();
  size_t cases = 0;
  for_each_random_case(run_seed() + 101, 1, 200, [&](const RandomCase &c) {
    ++cases;
    set_params(element_, c.params);
    const CandidateSet set = integer_boxes_in_frame(c.set, kWidth, kHeight);
    ASSERT_TRUE(check(set, c.params, /*as_rois=*/true)) << c.description;
  });
  EXPECT_GT(cases, 400u / random_case_stride());
}

TEST_F(CudaNmsElement, LargeSlidingWindowFrames) {
  start();
  std::mt19937_64 rng(run_seed() + 102);
  for (size_t n : {1000u, 4000u, 10000u}) {
    Params params;
    params.max_candidates = 16384;
    set_params(element_, params);
    const CandidateSet set = tools::sliding_window_candidates(n, rng(), 5, kWidth, kHeight);
    ASSERT_TRUE(check(set, params)) << "n=" << n;
  }
}

TEST_F(CudaNmsElement, VariantsFromLaunchSyntax) {
  start("backend=cpu method=weighted iou-threshold=0.3");
  CandidateSet set;
  set.add(100, 100, 200, 200, 3.0f, 2);
  set.add(104, 100, 204, 200, 1.0f, 7);
  set.add(104, 100, 204, 200, 1.0f, 2);
  GstBuffer *out = process(packed_buffer(set));
  GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->n_kept, 2u);        // class 7 on its own
  EXPECT_EQ(r->boxes[0], 101.0f);  // (100 * 3 + 104 * 1) / 4
  EXPECT_EQ(r->scores[0], 3.0f);
  gst_buffer_unref(out);
  gst_util_set_object_arg(G_OBJECT(element_), "class-groups", "2,7");
  out = process(packed_buffer(set));
  r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_EQ(r->n_kept, 1u);
  EXPECT_EQ(r->boxes[0], 508.0f / 5);  // (100 * 3 + 104 + 104) / 5
  gst_buffer_unref(out);
  gst_util_set_object_arg(G_OBJECT(element_), "method", "soft");
  gst_util_set_object_arg(G_OBJECT(element_), "soft-decay", "linear");
  out = process(packed_buffer(set));
  r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_EQ(r->n_kept, 3u);
  EXPECT_EQ(r->scores[0], 3.0f);
  EXPECT_LT(r->scores[1], 1.0f);  // decayed by the first
  gst_buffer_unref(out);
  EXPECT_EQ(pop_messages(GST_MESSAGE_ERROR), 0u);
}

TEST_F(CudaNmsElement, BufferWithoutCandidatesPassesWithAnEmptyResult) {
  start();
  GstBuffer *in = gst_buffer_new_allocate(nullptr, 16, nullptr);
  gst_buffer_memset(in, 0, 7, 16);
  GST_BUFFER_PTS(in) = 42 * GST_MSECOND;
  GstBuffer *out = process(in);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(GST_BUFFER_PTS(out), 42 * GST_MSECOND);
  EXPECT_EQ(gst_buffer_get_size(out), 16u);
  GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->candidates_in, 0u);
  EXPECT_EQ(r->n_kept, 0u);
  EXPECT_EQ(r->kept, 0u);
  EXPECT_EQ(rois_of(out).size(), 0u);
  gst_buffer_unref(out);

  // An empty candidates meta is the same.
  out = process(packed_buffer(CandidateSet()));
  r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->candidates_in, 0u);
  EXPECT_EQ(gst_buffer_get_n_meta(out, GST_CUDA_NMS_CANDIDATES_META_API_TYPE), 0u);
  gst_buffer_unref(out);
  guint64 frames = 0;
  g_object_get(element_, "frames", &frames, NULL);
  EXPECT_EQ(frames, 2u);
}

// ---------------------------------------------------------------------------------------------
// Writability and the consumed metas.

TEST_F(CudaNmsElement, ANonWritableBufferIsCopiedNotLosingMetas) {
  start();
  CandidateSet set;
  set.add(10, 10, 50, 50, 0.9f, 1);
  set.add(12, 12, 52, 52, 0.8f, 1);
  set.add(200, 200, 250, 250, 0.7f, 2);
  GstBuffer *in = packed_buffer(set);
  GstBuffer *held = gst_buffer_ref(in);  // a second reference: not writable
  GstBuffer *out = process(in);
  ASSERT_NE(out, held);
  EXPECT_TRUE(output_matches(out, set, library_result(set, Params()), kWidth, kHeight));
  // The held buffer is untouched.
  EXPECT_EQ(gst_buffer_get_cuda_nms_result_meta(held), nullptr);
  ASSERT_NE(gst_buffer_get_cuda_nms_candidates_meta(held), nullptr);
  EXPECT_EQ(gst_buffer_get_cuda_nms_candidates_meta(held)->n, 3u);
  gst_buffer_unref(out);
  gst_buffer_unref(held);
}

TEST_F(CudaNmsElement, HugeFrameFarOverDmax) {
  start("backend=cpu max-candidates=64");
  std::mt19937_64 rng(run_seed() + 110);
  const CandidateSet set = tools::sliding_window_candidates(200000, rng(), 1, kWidth, kHeight);
  Params params;
  params.max_candidates = 64;
  EXPECT_TRUE(check(set, params));
}

// ---------------------------------------------------------------------------------------------
// Through videoscale: the candidates are rescaled on the way in, the results on the way out.

TEST_F(CudaNmsElement, MetasThroughVideoscale) {
  GstHarness *h = gst_harness_new_parse(
      "videoscale ! capsfilter caps=video/x-raw,width=1280,height=960 ! cudanms backend=cpu ! "
      "videoscale ! capsfilter caps=video/x-raw,width=320,height=240");
  gst_harness_set_src_caps_str(h, kCaps);
  CandidateSet set;
  set.add(10, 20, 110, 220, 0.9f, 1);
  set.add(12, 22, 112, 222, 0.8f, 1);  // suppressed
  set.add(300, 200, 400, 300, 0.7f, 2);
  set.add(600, 400, 700, 500, 0.6f, 2);  // partly outside the 640x480 frame
  GstBuffer *in = gst_harness_create_buffer(h, kWidth * kHeight);
  GstCudaNmsCandidatesMeta *meta = gst_buffer_add_cuda_nms_candidates_meta(in, 4);
  gst_cuda_nms_candidates_meta_append_many(meta, set.boxes.data(), set.scores.data(),
                                           set.classes.data(), 4);
  ASSERT_EQ(gst_harness_push(h, in), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull(h);
  ASSERT_NE(out, nullptr);

  // cudanms saw the candidates at 1280x960: each coordinate doubled, then clipped.
  CandidateSet scaled;
  for (size_t i = 0; i < set.size(); ++i)
    scaled.add(set.boxes[4 * i] * 2, set.boxes[4 * i + 1] * 2, set.boxes[4 * i + 2] * 2,
               set.boxes[4 * i + 3] * 2, set.scores[i], set.classes[i]);
  const CandidateSet clipped = clipped_to_frame(scaled, 1280, 960);
  const Result want = library_result(clipped, Params());
  ASSERT_EQ(want.kept.size(), 3u);

  // And the result leaves at 320x240: a quarter of that.
  GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->n_kept, 3u);
  for (size_t i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) {
      EXPECT_FLOAT_EQ(r->boxes[4 * i + j], clipped.boxes[4 * want.kept[i] + j] / 4)
          << "box " << i << " coordinate " << j;
    }
  }
  EXPECT_EQ(std::vector<float>(r->boxes + 8, r->boxes + 12),
            (std::vector<float>{300, 200, 320, 240}));
  // The ROI metas went through videoscale's own ROI transform: 320x240 pixels.
  const std::vector<Roi> rois = rois_of(out);
  ASSERT_EQ(rois.size(), 3u);
  EXPECT_EQ(rois[0].x, 5u);
  EXPECT_EQ(rois[0].y, 10u);
  EXPECT_EQ(rois[0].w, 50u);
  EXPECT_EQ(rois[0].h, 100u);
  EXPECT_EQ(rois[2].x + rois[2].w, 320u);
  // GStreamer 1.22's own ROI scale transform drops the param structures ("detection"), so
  // scores and classes survive scaling only in the result meta, checked above.
  EXPECT_EQ(r->scores[2], 0.6f);
  EXPECT_EQ(r->class_ids[2], 2);
  gst_buffer_unref(out);
  gst_harness_teardown(h);
}

}  // namespace
}  // namespace cudanms::testing
