// boxoverlay: a known box on a blank frame changes exactly the expected pixels.
#include <gst/check/gstharness.h>
#include <gst/cudanms/cudanmsmeta.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gst-plugin/cv_support.h"

namespace cudanms::testing {
namespace {

constexpr int kWidth = 64;
constexpr int kHeight = 48;

struct Box {
  int x, y, w, h;
};

// The outline of a box `line` pixels thick, drawn inside it, clipped to the frame: written out
// from the documented rule, independently of the element.
bool on_outline(const Box &b, int line, int x, int y) {
  if (x < b.x || y < b.y || x >= b.x + b.w || y >= b.y + b.h) return false;
  return x < b.x + line || x >= b.x + b.w - line || y < b.y + line || y >= b.y + b.h - line;
}

class BoxOverlay : public ::testing::Test {
 protected:
  void SetUp() override { init_cv_elements_once(); }
  void TearDown() override {
    if (h_) gst_harness_teardown(h_);
  }

  // Pushes a blank (all zero) frame carrying `rois` (and `candidates`) and returns the output.
  GstBuffer *draw(const char *format, const std::string &properties, const std::vector<Box> &rois,
                  const std::vector<Box> &candidates = {}) {
    h_ = gst_harness_new_parse(("boxoverlay " + properties).c_str());
    const std::string caps =
        std::string("video/x-raw,format=") + format + ",width=64,height=48,framerate=30/1";
    gst_harness_set_src_caps_str(h_, caps.c_str());
    GstVideoInfo info;
    GstCaps *c = gst_caps_from_string(caps.c_str());
    gst_video_info_from_caps(&info, c);
    gst_caps_unref(c);
    GstBuffer *buf = gst_buffer_new_allocate(nullptr, GST_VIDEO_INFO_SIZE(&info), nullptr);
    gst_buffer_memset(buf, 0, 0, GST_VIDEO_INFO_SIZE(&info));
    gst_buffer_add_video_meta_full(buf, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_INFO_FORMAT(&info),
                                   kWidth, kHeight, GST_VIDEO_INFO_N_PLANES(&info), info.offset,
                                   info.stride);
    for (const Box &b : rois) {
      GstVideoRegionOfInterestMeta *roi =
          gst_buffer_add_video_region_of_interest_meta(buf, "0", b.x, b.y, b.w, b.h);
      gst_video_region_of_interest_meta_add_param(
          roi, gst_structure_new("detection", "confidence", G_TYPE_DOUBLE, 0.9, "label_id",
                                 G_TYPE_INT, 0, NULL));
    }
    if (!candidates.empty()) {
      GstCudaNmsCandidatesMeta *m = gst_buffer_add_cuda_nms_candidates_meta(buf, 8);
      for (const Box &b : candidates)
        gst_cuda_nms_candidates_meta_append(m, b.x, b.y, b.x + b.w, b.y + b.h, 0.5f, 0);
    }
    info_ = info;
    return gst_harness_push_and_pull(h_, buf);
  }

  GstHarness *h_ = nullptr;
  GstVideoInfo info_;
};

// Class 0's color is (0, 230, 0); candidates get the light tint (170, 246, 170).
TEST(BoxOverlayRule, OutlineHelperCountsPixels) {
  // A 20x15 box, 3 pixels: 20*15 - 14*9 pixels.
  int n = 0;
  for (int y = 0; y < kHeight; y++)
    for (int x = 0; x < kWidth; x++) n += on_outline({10, 8, 20, 15}, 3, x, y);
  EXPECT_EQ(n, 20 * 15 - 14 * 9);
}

TEST_F(BoxOverlay, RgbaBoxChangesExactlyTheOutline) {
  const Box box{10, 8, 20, 15};
  GstBuffer *out = draw("RGBA", "line-width=3 draw-labels=false", {box});
  ASSERT_NE(out, nullptr);
  GstMapInfo map;
  ASSERT_TRUE(gst_buffer_map(out, &map, GST_MAP_READ));
  const int stride = GST_VIDEO_INFO_PLANE_STRIDE(&info_, 0);
  int changed = 0;
  for (int y = 0; y < kHeight; y++) {
    for (int x = 0; x < kWidth; x++) {
      const guint8 *p = map.data + y * stride + 4 * x;
      if (on_outline(box, 3, x, y)) {
        EXPECT_TRUE(p[0] == 0 && p[1] == 230 && p[2] == 0 && p[3] == 255)
            << "pixel " << x << "," << y << " is " << int(p[0]) << "," << int(p[1]) << ","
            << int(p[2]) << "," << int(p[3]);
        changed++;
      } else {
        EXPECT_TRUE(p[0] == 0 && p[1] == 0 && p[2] == 0 && p[3] == 0)
            << "pixel " << x << "," << y << " outside the outline changed";
      }
    }
  }
  EXPECT_EQ(changed, 20 * 15 - 14 * 9);
  gst_buffer_unmap(out, &map);
  gst_buffer_unref(out);
}

TEST_F(BoxOverlay, BgrxChannelOrderAndClippingAtTheFrameEdge) {
  const Box box{50, 40, 30, 20};  // sticks out of the 64x48 frame at the right and bottom
  GstBuffer *out = draw("BGRx", "line-width=2 draw-labels=false", {box});
  ASSERT_NE(out, nullptr);
  GstMapInfo map;
  ASSERT_TRUE(gst_buffer_map(out, &map, GST_MAP_READ));
  const int stride = GST_VIDEO_INFO_PLANE_STRIDE(&info_, 0);
  for (int y = 0; y < kHeight; y++) {
    for (int x = 0; x < kWidth; x++) {
      const guint8 *p = map.data + y * stride + 4 * x;
      if (on_outline(box, 2, x, y)) {
        EXPECT_TRUE(p[0] == 0 && p[1] == 230 && p[2] == 0) << "pixel " << x << "," << y;
      } else {
        EXPECT_TRUE(p[0] == 0 && p[1] == 0 && p[2] == 0 && p[3] == 0)
            << "pixel " << x << "," << y << " outside the outline changed";
      }
    }
  }
  gst_buffer_unmap(out, &map);
  gst_buffer_unref(out);
}

TEST_F(BoxOverlay, CandidatesThinAndLightUnderTheKeptBox) {
  const Box kept{10, 8, 20, 15}, candidate{30, 20, 12, 10};
  GstBuffer *out =
      draw("RGBx", "line-width=3 draw-labels=false draw-candidates=true", {kept}, {candidate});
  ASSERT_NE(out, nullptr);
  GstMapInfo map;
  ASSERT_TRUE(gst_buffer_map(out, &map, GST_MAP_READ));
  const int stride = GST_VIDEO_INFO_PLANE_STRIDE(&info_, 0);
  for (int y = 0; y < kHeight; y++) {
    for (int x = 0; x < kWidth; x++) {
      const guint8 *p = map.data + y * stride + 4 * x;
      const std::string where = std::to_string(x) + "," + std::to_string(y);
      if (on_outline(kept, 3, x, y)) {
        EXPECT_TRUE(p[0] == 0 && p[1] == 230 && p[2] == 0) << where;
      } else if (on_outline(candidate, 1, x, y)) {
        EXPECT_TRUE(p[0] == 170 && p[1] == 246 && p[2] == 170) << where;
      } else {
        EXPECT_TRUE(p[0] == 0 && p[1] == 0 && p[2] == 0) << where << " changed";
      }
    }
  }
  gst_buffer_unmap(out, &map);
  gst_buffer_unref(out);
}

// The result meta's points: a (2 * line-width + 1)-pixel square centred on each point's pixel,
// in the box's class color, clipped at the frame's edge; NaN points are not drawn.
TEST_F(BoxOverlay, ResultPointsAsSmallSquares) {
  h_ = gst_harness_new_parse("boxoverlay line-width=1 draw-labels=false");
  gst_harness_set_src_caps_str(h_, "video/x-raw,format=RGBA,width=64,height=48,framerate=30/1");
  GstBuffer *buf = gst_buffer_new_allocate(nullptr, kWidth * kHeight * 4, nullptr);
  gst_buffer_memset(buf, 0, 0, kWidth * kHeight * 4);
  GstCudaNmsResultMeta *r = gst_buffer_add_cuda_nms_result_meta(buf, 1);
  gst_cuda_nms_result_meta_set_points_per_box(r, 3);
  const float points[] = {20.5f, 10.9f, NAN, NAN, 0.0f, 47.2f};
  std::copy(points, points + 6, r->points);
  GstBuffer *out = gst_harness_push_and_pull(h_, buf);
  ASSERT_NE(out, nullptr);
  GstMapInfo map;
  ASSERT_TRUE(gst_buffer_map(out, &map, GST_MAP_READ));
  auto in_square = [](int x, int y, int cx, int cy) {
    return x >= cx - 1 && x <= cx + 1 && y >= cy - 1 && y <= cy + 1;
  };
  int changed = 0;
  for (int y = 0; y < kHeight; y++) {
    for (int x = 0; x < kWidth; x++) {
      const guint8 *p = map.data + (y * kWidth + x) * 4;
      const bool drawn = p[1] == 230;
      EXPECT_EQ(drawn, in_square(x, y, 20, 10) || in_square(x, y, 0, 47)) << x << "," << y;
      changed += p[0] != 0 || p[1] != 0 || p[2] != 0;
    }
  }
  EXPECT_EQ(changed, 9 + 4);  // the second square clipped to its 2x2 inside the frame
  gst_buffer_unmap(out, &map);
  gst_buffer_unref(out);
}

TEST_F(BoxOverlay, I420LumaExactChromaWithinTheTouchedBlocks) {
  const Box box{11, 7, 20, 15};  // odd corner: chroma blocks straddle the outline
  GstBuffer *out = draw("I420", "line-width=3 draw-labels=false", {box});
  ASSERT_NE(out, nullptr);
  GstVideoFrame frame;
  ASSERT_TRUE(gst_video_frame_map(&frame, &info_, out, GST_MAP_READ));
  const guint8 *y_plane = static_cast<const guint8 *>(GST_VIDEO_FRAME_PLANE_DATA(&frame, 0));
  const int y_stride = GST_VIDEO_FRAME_PLANE_STRIDE(&frame, 0);
  const int luma = 16 + 0.504 * 230 + 0.5;  // BT.601 of (0, 230, 0)
  for (int y = 0; y < kHeight; y++)
    for (int x = 0; x < kWidth; x++)
      EXPECT_EQ(y_plane[y * y_stride + x], on_outline(box, 3, x, y) ? luma : 0) << x << "," << y;
  for (int p = 1; p <= 2; p++) {
    const guint8 *c = static_cast<const guint8 *>(GST_VIDEO_FRAME_PLANE_DATA(&frame, p));
    const int stride = GST_VIDEO_FRAME_PLANE_STRIDE(&frame, p);
    for (int cy = 0; cy < kHeight / 2; cy++) {
      for (int cx = 0; cx < kWidth / 2; cx++) {
        bool touched = false;
        for (int dy = 0; dy < 2; dy++)
          for (int dx = 0; dx < 2; dx++) touched |= on_outline(box, 3, 2 * cx + dx, 2 * cy + dy);
        EXPECT_EQ(c[cy * stride + cx] != 0, touched) << "plane " << p << " " << cx << "," << cy;
      }
    }
  }
  gst_video_frame_unmap(&frame);
  gst_buffer_unref(out);
}

TEST_F(BoxOverlay, LabelTagStaysAboveTheBox) {
  const Box box{10, 30, 20, 15};
  GstBuffer *out = draw("RGBA", "line-width=1 draw-labels=true font-scale=0.3", {box});
  ASSERT_NE(out, nullptr);
  GstMapInfo map;
  ASSERT_TRUE(gst_buffer_map(out, &map, GST_MAP_READ));
  const int stride = GST_VIDEO_INFO_PLANE_STRIDE(&info_, 0);
  int tag_pixels = 0;
  for (int y = 0; y < kHeight; y++) {
    for (int x = 0; x < kWidth; x++) {
      const guint8 *p = map.data + y * stride + 4 * x;
      const bool changed = p[3] != 0;
      if (on_outline(box, 1, x, y)) {
        EXPECT_TRUE(changed) << x << "," << y;
      } else if (changed) {
        // Only the tag, which starts at the box's left edge and ends at its top.
        EXPECT_TRUE(y < box.y && x >= box.x) << x << "," << y;
        tag_pixels++;
      }
    }
  }
  EXPECT_GT(tag_pixels, 50);  // "0 0.90" in a filled tag
  gst_buffer_unmap(out, &map);
  gst_buffer_unref(out);
}

}  // namespace
}  // namespace cudanms::testing
