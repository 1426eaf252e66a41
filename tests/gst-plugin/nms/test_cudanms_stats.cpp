// The cudanms element's statistics (cudanmsstats.h): stats messages, and the rate-limited warning
// about candidates past max-candidates.
#include "cudanms_fixture.h"

namespace cudanms::testing {
namespace {

TEST_F(CudaNmsElement, StatsMessages) {
  start("backend=cpu stats-interval=10");
  std::mt19937_64 rng(run_seed() + 108);
  guint64 in = 0, kept = 0;
  for (int i = 0; i < 25; ++i) {
    const CandidateSet set = tools::sliding_window_candidates(100, rng(), 1, kWidth, kHeight);
    const Result want = library_result(clipped_to_frame(set, kWidth, kHeight), Params());
    if (i < 10) {
      in += want.counts.in;
      kept += want.counts.kept;
    }
    gst_buffer_unref(process(packed_buffer(set)));
  }
  std::vector<const GstStructure *> stats;
  std::vector<GstMessage *> messages;
  while (GstMessage *m = gst_bus_pop_filtered(bus_, GST_MESSAGE_ELEMENT)) {
    if (gst_message_has_name(m, "cudanms-stats")) {
      messages.push_back(m);
      stats.push_back(gst_message_get_structure(m));
    } else {
      gst_message_unref(m);
    }
  }
  ASSERT_EQ(stats.size(), 2u);  // after frames 10 and 20
  guint64 frames = 0, c_in = 0, c_out = 0;
  guint interval = 0;
  double p50 = -1, p99 = -1;
  ASSERT_TRUE(gst_structure_get(stats[0], "frames", G_TYPE_UINT64, &frames, "interval-frames",
                                G_TYPE_UINT, &interval, "candidates-in", G_TYPE_UINT64, &c_in,
                                "detections-out", G_TYPE_UINT64, &c_out, "latency-p50-us",
                                G_TYPE_DOUBLE, &p50, "latency-p99-us", G_TYPE_DOUBLE, &p99, NULL));
  EXPECT_EQ(frames, 10u);
  EXPECT_EQ(interval, 10u);
  EXPECT_EQ(c_in, in);
  EXPECT_EQ(c_out, kept);
  EXPECT_GT(p50, 0.0);
  EXPECT_GE(p99, p50);
  EXPECT_STREQ(gst_structure_get_string(stats[0], "backend"), "cpu");
  gst_structure_get_uint64(stats[1], "frames", &frames);
  EXPECT_EQ(frames, 20u);
  for (GstMessage *m : messages) gst_message_unref(m);

  g_object_set(element_, "stats-interval", 0, NULL);  // off, while playing
  for (int i = 0; i < 20; ++i) gst_buffer_unref(process(packed_buffer(CandidateSet())));
  EXPECT_EQ(pop_messages(GST_MESSAGE_ELEMENT), 0u);
}

// ---------------------------------------------------------------------------------------------
// More candidates than Dmax.

TEST_F(CudaNmsElement, MoreCandidatesThanDmax) {
  start("backend=cpu max-candidates=100");
  std::mt19937_64 rng(run_seed() + 109);
  for (int frame = 0; frame < 5; ++frame) {
    const CandidateSet set = tools::sliding_window_candidates(5000, rng(), 3, kWidth, kHeight);
    Params params;
    params.max_candidates = 100;
    const CandidateSet clipped = clipped_to_frame(set, kWidth, kHeight);
    const Result want = library_result(clipped, params);
    ASSERT_GT(want.counts.over_capacity, 4000u);
    GstBuffer *out = process(packed_buffer(set));
    ASSERT_TRUE(output_matches(out, clipped, want, kWidth, kHeight)) << "frame " << frame;
    EXPECT_EQ(gst_buffer_get_cuda_nms_result_meta(out)->dropped_capacity,
              want.counts.over_capacity);
    gst_buffer_unref(out);
  }
  // One warning for the five frames: rate-limited, never silent.
  std::vector<std::string> texts;
  EXPECT_EQ(pop_messages(GST_MESSAGE_WARNING, &texts), 1u);
  ASSERT_EQ(texts.size(), 1u);
  EXPECT_NE(texts[0].find("max-candidates=100"), std::string::npos) << texts[0];
  EXPECT_EQ(pop_messages(GST_MESSAGE_ERROR), 0u);
}

}  // namespace
}  // namespace cudanms::testing
