// boxoverlay with tracking: tags that never cover one another (TagPlacer, on crowds), each
// tracked box in its track's color with its trail, and boxcount's lines and zones.
#include <gst/check/gstharness.h>
#include <gst/cudanms/cudanmsmeta.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>

#include <random>

#include "canvas.h"
#include "keptboxes.h"
#include "gst-plugin/cv_support.h"
#include "support/seed.h"
#include "tagplacer.h"

namespace cudanms::testing {
namespace {

// A crowd of boxes, many overlapping, tags of varied width: no two placed tags overlap, and all
// stay in the frame, while there is room for them.
TEST(TagPlacer, TagsOfACrowdNeverOverlap) {
  std::mt19937_64 rng(run_seed());
  const cv::Size frame(768, 576);
  for (int trial = 0; trial < 200; trial++) {
    TagPlacer placer(frame);
    std::vector<cv::Rect> placed;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; i++) {
      const cv::Rect box(static_cast<int>(rng() % 300) + 200, static_cast<int>(rng() % 200) + 150,
                         40 + static_cast<int>(rng() % 40), 80 + static_cast<int>(rng() % 60));
      const cv::Rect tag = placer.place(box, cv::Size(60 + static_cast<int>(rng() % 60), 14));
      EXPECT_TRUE((tag & cv::Rect(cv::Point(), frame)) == tag) << "trial " << trial;
      for (const cv::Rect &other : placed)
        ASSERT_EQ((tag & other).area(), 0) << "trial " << trial << " tag " << i;
      placed.push_back(tag);
    }
  }
}

TEST(TagPlacer, AloneATagGoesAboveTheBox) {
  TagPlacer placer(cv::Size(100, 100));
  EXPECT_EQ(placer.place(cv::Rect(10, 40, 20, 20), cv::Size(30, 10)), cv::Rect(10, 30, 30, 10));
  // At the frame's top: inside the box's top. At its right edge: moved in.
  EXPECT_EQ(placer.place(cv::Rect(80, 0, 20, 20), cv::Size(30, 10)), cv::Rect(70, 0, 30, 10));
}

constexpr int kWidth = 64, kHeight = 48;

struct Drawn {
  GstHarness *h;
  std::vector<std::vector<guint8>> frames;  // RGBA of each frame drawn
  ~Drawn() { gst_harness_teardown(h); }
  const guint8 *pixel(size_t frame, int x, int y) const {
    return &frames[frame][4 * (y * kWidth + x)];
  }
};

// Blank RGBA frames through boxoverlay, each with the ROI metas (tracked when id > 0) that
// `add(frame, buffer)` puts on it.
std::unique_ptr<Drawn> draw_frames(const std::string &properties, int n,
                                   const std::function<void(int, GstBuffer *)> &add) {
  init_cv_elements_once();
  auto d = std::make_unique<Drawn>();
  d->h = gst_harness_new_parse(("boxoverlay " + properties).c_str());
  gst_harness_set_src_caps_str(d->h, "video/x-raw,format=RGBA,width=64,height=48,framerate=30/1");
  for (int f = 0; f < n; f++) {
    GstBuffer *buf = gst_buffer_new_allocate(nullptr, kWidth * kHeight * 4, nullptr);
    gst_buffer_memset(buf, 0, 0, kWidth * kHeight * 4);
    GST_BUFFER_PTS(buf) = f * GST_SECOND / 30;
    add(f, buf);
    GstBuffer *out = gst_harness_push_and_pull(d->h, buf);
    GstMapInfo map;
    gst_buffer_map(out, &map, GST_MAP_READ);
    d->frames.emplace_back(map.data, map.data + map.size);
    gst_buffer_unmap(out, &map);
    gst_buffer_unref(out);
  }
  return d;
}

void add_tracked_box(GstBuffer *buf, guint x, guint y, guint w, guint h, guint64 id) {
  GstVideoRegionOfInterestMeta *roi =
      gst_buffer_add_video_region_of_interest_meta(buf, "0", x, y, w, h);
  if (id) gst_cv_roi_set_track_id(roi, id);
}

bool is(const guint8 *p, Rgb c) { return p[0] == c.r && p[1] == c.g && p[2] == c.b && p[3] == 255; }

TEST(TracksOverlay, ATrackedBoxInItsTrackColorWithItsTrail) {
  // A box walking right 4 px a frame: on the last frame, the trail runs through the centres it
  // had.
  const auto d =
      draw_frames("line-width=1 draw-labels=false trail-length=10", 6,
                  [](int f, GstBuffer *b) { add_tracked_box(b, 10 + 4 * f, 10, 8, 20, 7); });
  const Rgb seven = track_color(7);
  EXPECT_TRUE(is(d->pixel(5, 30, 10), seven));  // the box's top-left corner on the last frame
  // The centre went from x = 14 to x = 34 along y = 20: the trail covers it.
  int trail = 0;
  for (int x = 14; x <= 34; x++) trail += is(d->pixel(5, x, 20), seven);
  EXPECT_GE(trail, 18);
  // Without trails: nothing behind the box.
  const auto none =
      draw_frames("line-width=1 draw-labels=false trail-length=0", 6,
                  [](int f, GstBuffer *b) { add_tracked_box(b, 10 + 4 * f, 10, 8, 20, 7); });
  EXPECT_FALSE(is(none->pixel(5, 16, 20), seven));
  // A trail of 3 frames: the centres of the last 3 (x = 26, 30, 34), none of the ones before.
  const auto short_trail =
      draw_frames("line-width=1 draw-labels=false trail-length=3", 6,
                  [](int f, GstBuffer *b) { add_tracked_box(b, 10 + 4 * f, 10, 8, 20, 7); });
  for (int x = 26; x <= 29; x++) EXPECT_TRUE(is(short_trail->pixel(5, x, 20), seven)) << x;
  for (int x = 14; x <= 24; x++) EXPECT_FALSE(is(short_trail->pixel(5, x, 20), seven)) << x;
}

TEST(TracksOverlay, TheTagSaysTheId) {
  // A tag with "#1234 ..." is wider than one without.
  auto width_of_tag = [](guint64 id) {
    const auto d = draw_frames("line-width=1 font-scale=0.3 trail-length=0", 1,
                               [id](int, GstBuffer *b) { add_tracked_box(b, 2, 30, 10, 10, id); });
    int rightmost = 0;
    for (int y = 0; y < 30; y++)
      for (int x = 0; x < kWidth; x++)
        if (d->pixel(0, x, y)[3] != 0) rightmost = std::max(rightmost, x);
    return rightmost;
  };
  EXPECT_GT(width_of_tag(1234), width_of_tag(0) + 10);
}

TEST(TracksOverlay, LinesAndZonesOfTheCountsMeta) {
  const auto d = draw_frames("line-width=1 draw-labels=false", 1, [](int, GstBuffer *b) {
    GstCudaNmsCountsMeta *m = gst_buffer_add_cuda_nms_counts_meta(b, 0, 1, 1);
    m->lines[0] = {g_intern_string("door"), 5, 40, 60, 40, 3, 1, 0, nullptr};
    const gfloat square[8] = {5, 5, 20, 5, 20, 20, 5, 20};
    gst_cuda_nms_counts_meta_set_zone(m, 0, "z", square, 4, nullptr, 0);
  });
  const Rgb yellow{255, 220, 0};
  int line = 0, zone = 0;
  for (int x = 5; x <= 60; x++) line += is(d->pixel(0, x, 40), yellow);
  for (int x = 5; x <= 20; x++) zone += is(d->pixel(0, x, 20), yellow);
  EXPECT_GE(line, 50);
  EXPECT_GE(zone, 14);
  // Without draw-counts: nothing.
  const auto off = draw_frames("line-width=1 draw-counts=false", 1, [](int, GstBuffer *b) {
    GstCudaNmsCountsMeta *m = gst_buffer_add_cuda_nms_counts_meta(b, 0, 1, 0);
    m->lines[0] = {g_intern_string("door"), 5, 40, 60, 40, 3, 1, 0, nullptr};
  });
  EXPECT_FALSE(is(off->pixel(0, 30, 40), yellow));
}

TEST(TracksOverlay, AnEventsTrackStandsOutAndTheOthersAreFaint) {
  // Tracks 3 and 4; track 4 crosses a line on this frame.
  auto frame = [](bool event) {
    return [event](int, GstBuffer *b) {
      add_tracked_box(b, 4, 4, 20, 20, 3);
      add_tracked_box(b, 34, 4, 20, 20, 4);
      GstCudaNmsCountsMeta *m = gst_buffer_add_cuda_nms_counts_meta(b, event ? 1 : 0, 0, 0);
      if (event) m->events[0] = {GST_CUDA_NMS_COUNT_LINE_CROSSED, g_intern_string("door"), 1, 4,
                                 g_intern_string("person"), 0};
    };
  };
  const Rgb three = track_color(3), four = track_color(4);
  const auto d = draw_frames("line-width=3 draw-labels=false trail-length=0 highlight-events=true",
                             1, frame(true));
  EXPECT_TRUE(is(d->pixel(0, 35, 14), four));         // 3 px thick, its own color
  EXPECT_TRUE(is(d->pixel(0, 4, 14), light(three)));  // 1 px, light
  EXPECT_FALSE(is(d->pixel(0, 5, 14), light(three)));
  EXPECT_FALSE(is(d->pixel(0, 5, 14), three));
  // A frame without events: both as always.
  const auto quiet = draw_frames(
      "line-width=3 draw-labels=false trail-length=0 highlight-events=true", 1, frame(false));
  EXPECT_TRUE(is(quiet->pixel(0, 5, 14), three));
  EXPECT_TRUE(is(quiet->pixel(0, 35, 14), four));
  // Off (the default): both as always, events or not.
  const auto off =
      draw_frames("line-width=3 draw-labels=false trail-length=0", 1, frame(true));
  EXPECT_TRUE(is(off->pixel(0, 5, 14), three));
}

}  // namespace
}  // namespace cudanms::testing
