// A frame through the chain a site runs for counting, cudanms ! boxtrack ! boxcount, takes no
// lock of GLib's quark table: one lock for the whole process, which a waiting thread sleeps on.
// 32 cameras' threads took it ~20 times a frame each (ROI params named by string, labels and line
// names interned a frame), and on a host with idle CPUs each sleep on it costs a wake through the
// hypervisor (docs/performance.md, session 35). The table's entry points are wrapped here: the
// executable exports them (export_dynamic), so GStreamer's own libraries call these too.
#include <dlfcn.h>
#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>

#include "track_support.h"

namespace {

std::atomic<guint64> lookups{0};

template <typename Function>
Function real(const char *name) {
  return reinterpret_cast<Function>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

GQuark g_quark_from_string(const gchar *string) {
  static const auto next = real<GQuark (*)(const gchar *)>("g_quark_from_string");
  lookups++;
  return next(string);
}

GQuark g_quark_try_string(const gchar *string) {
  static const auto next = real<GQuark (*)(const gchar *)>("g_quark_try_string");
  lookups++;
  return next(string);
}

const gchar *g_intern_string(const gchar *string) {
  static const auto next = real<const gchar *(*)(const gchar *)>("g_intern_string");
  lookups++;
  return next(string);
}

}  // extern "C"

namespace cudanms::testing {
namespace {

constexpr int kPeriod = 50;  // frames a walk takes; then two new people start at the top

// Two people walking down through the door line, one on into the zone, again every kPeriod
// frames (events with the same names again); a third box standing. The labels come from the
// element's table ("person") or, for class 1, are its number, as a detector without labels
// gives them.
GstBuffer *walking_frame(int f) {
  const float t = static_cast<float>(f % kPeriod);
  GstBuffer *buf = frame_of({{200.0f, 150.0f + 6.0f * t}, {400.0f, 120.0f + 6.0f * t}}, f * kFrame);
  GstCudaNmsCandidatesMeta *c = gst_buffer_get_cuda_nms_candidates_meta(buf);
  gst_cuda_nms_candidates_meta_append(c, 500, 300, 540, 400, 0.8f, 1);
  return buf;
}

TEST(ChainLocks, AFrameTakesNoQuarkTableLock) {
  init_track_elements_once();
  const std::string launch =
      std::string("appsrc name=src format=time caps=\"") + kCaps +
      "\" ! cudanms labels=person ! boxtrack ! boxcount lines=\"door:100,240,540,240\" "
      "zones=\"waiting:100,400 540,400 540,470 100,470\" ! appsink name=out sync=false";
  GError *error = nullptr;
  GstElement *pipeline = gst_parse_launch(launch.c_str(), &error);
  ASSERT_NE(pipeline, nullptr) << (error ? error->message : "");
  GstElement *src = gst_bin_get_by_name(GST_BIN(pipeline), "src");
  GstElement *out = gst_bin_get_by_name(GST_BIN(pipeline), "out");
  ASSERT_EQ(gst_element_set_state(pipeline, GST_STATE_PLAYING), GST_STATE_CHANGE_ASYNC);

  // Every name (labels, the line's, the zone's, the events') first seen in the first walk: a
  // thread looks each up once. Then two more walks.
  constexpr int kWarmUp = kPeriod, kFrames = 2 * kPeriod;
  guint64 before = 0, rois = 0, crossed = 0;
  for (int f = 0; f < kWarmUp + kFrames; f++) {
    ASSERT_EQ(gst_app_src_push_buffer(GST_APP_SRC(src), walking_frame(f)), GST_FLOW_OK);
    GstSample *sample = gst_app_sink_pull_sample(GST_APP_SINK(out));
    ASSERT_NE(sample, nullptr);
    GstBuffer *buf = gst_sample_get_buffer(sample);
    /* The frame took the chain's whole path: boxes as ROI metas with ids, counts, events. */
    rois += roi_ids(buf).size();
    if (const GstCudaNmsCountsMeta *counts = gst_buffer_get_cuda_nms_counts_meta(buf)) {
      EXPECT_EQ(counts->n_lines, 1u);
      EXPECT_EQ(counts->n_zones, 1u);
      crossed = counts->lines[0].in;
    }
    gst_sample_unref(sample);
    if (f == kWarmUp - 1) before = lookups.load();
  }
  const guint64 during = lookups.load() - before;
  gst_app_src_end_of_stream(GST_APP_SRC(src));
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(src);
  gst_object_unref(out);
  gst_object_unref(pipeline);

  EXPECT_EQ(rois, 3u * (kWarmUp + kFrames));
  EXPECT_EQ(crossed, 6u) << "both walkers cross the door on each of the three walks";
  EXPECT_EQ(during, 0u) << "quark-table lookups over " << kFrames << " frames";
}

}  // namespace
}  // namespace cudanms::testing
