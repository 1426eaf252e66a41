// appsrc ! cudanms ! appsink: 1000 frames through a real pipeline, every count checked against
// the NMS library run directly on the same candidates.
#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "cudanmscontexts.h"
#include "gst-plugin/element_support.h"
#include "support/seed.h"
#include "synthetic.h"

namespace cudanms::testing {
namespace {

constexpr int kWidth = 1280;
constexpr int kHeight = 720;
constexpr int kFrames = 1000;

TEST(Pipeline, ThousandFramesCountsChecked) {
  init_gstreamer_once();
  GError *error = nullptr;
  GstElement *pipeline = gst_parse_launch(
      "appsrc name=src format=time caps=video/x-raw,format=NV12,width=1280,height=720,"
      "framerate=30/1 ! cudanms name=nms iou-threshold=0.45 score-threshold=0.05 "
      "max-candidates=1500 stats-interval=100 ! appsink name=sink sync=false",
      &error);
  ASSERT_NE(pipeline, nullptr) << (error ? error->message : "");
  GstElement *src = gst_bin_get_by_name(GST_BIN(pipeline), "src");
  GstElement *nms = gst_bin_get_by_name(GST_BIN(pipeline), "nms");
  GstElement *sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
  ASSERT_NE(gst_element_set_state(pipeline, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);

  // The frames and their expected results, computed up front from the library.
  std::mt19937_64 rng(run_seed() + 200);
  Params params;
  params.threshold = 0.45f;
  params.score_threshold = 0.05f;
  params.max_candidates = 1500;
  std::vector<CandidateSet> frames(kFrames);
  std::vector<Counts> want(kFrames);
  Counts total;
  for (int i = 0; i < kFrames; ++i) {
    // Frame 5 is empty at every seed (it ran nowhere: backend=auto names the CPU for it).
    const size_t n = i == 5 ? 0 : std::uniform_int_distribution<size_t>(0, 2000)(rng);
    frames[i] = tools::sliding_window_candidates(n, rng(), 4, kWidth, kHeight);
    if (i % 7 == 0 && n > 0) frames[i].scores[0] = NAN;    // bad input now and then
    if (i % 11 == 0 && n > 1) frames[i].boxes[4] = -1e6f;  // far outside: clipped
    want[i] = library_result(clipped_to_frame(frames[i], kWidth, kHeight), params).counts;
    total.in += want[i].in;
    total.kept += want[i].kept;
    total.invalid += want[i].invalid;
    total.below_score += want[i].below_score;
    total.over_capacity += want[i].over_capacity;
  }
  ASSERT_GT(total.over_capacity, 0u);  // Dmax overflow happens along the way

  // backend=auto: on a host with a usable CUDA device every frame must have run there, but for
  // those of too few candidates to be worth the trip (cudanmscontexts.h).
  auto want_backend = [&](int frame) {
    return cuda_available() && frames[frame].size() > kCpuFrameCandidates ? "cuda" : "cpu";
  };
  const gint64 started = g_get_monotonic_time();
  std::thread feeder([&] {
    for (int i = 0; i < kFrames; ++i) {
      GstBuffer *buf = packed_buffer(frames[i]);
      GST_BUFFER_PTS(buf) = gst_util_uint64_scale(i, GST_SECOND, 30);
      GST_BUFFER_DURATION(buf) = gst_util_uint64_scale(1, GST_SECOND, 30);
      EXPECT_EQ(gst_app_src_push_buffer(GST_APP_SRC(src), buf), GST_FLOW_OK);
    }
    gst_app_src_end_of_stream(GST_APP_SRC(src));
  });

  Counts seen;
  int n = 0;
  while (GstSample *sample = gst_app_sink_pull_sample(GST_APP_SINK(sink))) {
    GstBuffer *buf = gst_sample_get_buffer(sample);
    GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(buf);
    EXPECT_NE(r, nullptr) << "frame " << n;
    if (r && n < kFrames) {
      EXPECT_EQ(GST_BUFFER_PTS(buf), gst_util_uint64_scale(n, GST_SECOND, 30));
      EXPECT_STREQ(r->backend, want_backend(n)) << "frame " << n;
      EXPECT_EQ(r->candidates_in, want[n].in) << "frame " << n;
      EXPECT_EQ(r->kept, want[n].kept) << "frame " << n;
      EXPECT_EQ(r->invalid, want[n].invalid) << "frame " << n;
      EXPECT_EQ(r->dropped_score, want[n].below_score) << "frame " << n;
      EXPECT_EQ(r->dropped_capacity, want[n].over_capacity) << "frame " << n;
      EXPECT_EQ(gst_buffer_get_n_meta(buf, GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE),
                want[n].kept);
      EXPECT_EQ(gst_buffer_get_n_meta(buf, GST_CUDA_NMS_CANDIDATES_META_API_TYPE), 0u);
      seen.in += r->candidates_in;
      seen.kept += r->kept;
    }
    ++n;
    gst_sample_unref(sample);
  }
  feeder.join();
  const gint64 elapsed_s = (g_get_monotonic_time() - started) / G_USEC_PER_SEC;
  EXPECT_EQ(n, kFrames);
  EXPECT_EQ(seen.in, total.in);
  EXPECT_EQ(seen.kept, total.kept);

  guint64 frames_prop, candidates, detections;
  g_object_get(nms, "frames", &frames_prop, "candidates-total", &candidates, "detections-total",
               &detections, NULL);
  EXPECT_EQ(frames_prop, guint64(kFrames));
  EXPECT_EQ(candidates, total.in);
  EXPECT_EQ(detections, total.kept);

  // The bus: ten stats messages whose counts add up, one warning about max-candidates (and, on
  // a host without CUDA, the one saying NMS runs on the CPU), no error.
  GstBus *bus = gst_element_get_bus(pipeline);
  guint64 stats_in = 0, stats_out = 0;
  int stats = 0, warnings = 0, capacity_warnings = 0, errors = 0;
  while (GstMessage *m = gst_bus_pop(bus)) {
    if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_ELEMENT && gst_message_has_name(m, "cudanms-stats")) {
      const GstStructure *s = gst_message_get_structure(m);
      guint64 in = 0, out = 0;
      gst_structure_get_uint64(s, "candidates-in", &in);
      gst_structure_get_uint64(s, "detections-out", &out);
      stats_in += in;
      stats_out += out;
      ++stats;
    } else if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING) {
      GError *e = nullptr;
      gst_message_parse_warning(m, &e, nullptr);
      ++warnings;
      if (std::string(e->message).find("max-candidates") != std::string::npos) ++capacity_warnings;
      g_error_free(e);
    } else if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR) {
      ++errors;
    }
    gst_message_unref(m);
  }
  EXPECT_EQ(stats, kFrames / 100);
  EXPECT_EQ(stats_in, total.in);
  EXPECT_EQ(stats_out, total.kept);
  // Rate-limited: the first, then at most one every 10 s.
  EXPECT_GE(capacity_warnings, 1);
  EXPECT_LE(capacity_warnings, 1 + elapsed_s / 10);
  EXPECT_LE(warnings, capacity_warnings + 1);
  EXPECT_EQ(errors, 0);

  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(src);
  gst_object_unref(nms);
  gst_object_unref(sink);
  gst_object_unref(pipeline);
}

}  // namespace
}  // namespace cudanms::testing
