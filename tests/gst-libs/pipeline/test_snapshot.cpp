// A stream's annotated picture (snapshot.h): at most 640 wide, the boxes drawn where they are
// on the frame (the frame is made small before it is drawn on), paced, and none while no one
// wants them. The frames are 1280 x 720, black, with one kept box put on each by the test.
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "snapshot.h"

namespace {

// The box on every frame (x, y, width, height in its pixels), as cudanms gives its kept boxes
// to boxoverlay: a region-of-interest meta.
GstPadProbeReturn add_box(GstPad *, GstPadProbeInfo *info, gpointer) {
  GstBuffer *buffer = gst_buffer_make_writable(GST_PAD_PROBE_INFO_BUFFER(info));
  gst_buffer_add_video_region_of_interest_meta(buffer, "face", 640, 360, 160, 120);
  GST_PAD_PROBE_INFO_DATA(info) = buffer;
  return GST_PAD_PROBE_OK;
}

struct Picture {
  int width = 0, height = 0;
  std::vector<guint8> rgb;
  bool drawn_at(int x, int y) const {  // boxoverlay's box: a saturated colour, not black
    const guint8 *p = &rgb[3 * (static_cast<size_t>(y) * width + x)];
    return std::max({p[0], p[1], p[2]}) > 120;
  }
};

// The JPEG decoded to RGB by GStreamer's own decoder.
Picture decode(GstBuffer *jpeg) {
  GstElement *pipeline = gst_parse_launch(
      "appsrc name=in caps=image/jpeg ! jpegdec ! videoconvert ! video/x-raw,format=RGB ! "
      "appsink name=out",
      nullptr);
  GstElement *in = gst_bin_get_by_name(GST_BIN(pipeline), "in");
  GstElement *out = gst_bin_get_by_name(GST_BIN(pipeline), "out");
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstFlowReturn flow;
  g_signal_emit_by_name(in, "push-buffer", jpeg, &flow);
  g_signal_emit_by_name(in, "end-of-stream", &flow);
  GstSample *sample = nullptr;
  g_signal_emit_by_name(out, "pull-sample", &sample);
  Picture picture;
  if (sample) {
    GstStructure *s = gst_caps_get_structure(gst_sample_get_caps(sample), 0);
    gst_structure_get_int(s, "width", &picture.width);
    gst_structure_get_int(s, "height", &picture.height);
    GstMapInfo map;
    gst_buffer_map(gst_sample_get_buffer(sample), &map, GST_MAP_READ);
    const size_t stride = ((picture.width * 3) + 3) & ~3u;  // RGB rows are 4-byte aligned
    for (int y = 0; y < picture.height; ++y)
      picture.rgb.insert(picture.rgb.end(), map.data + y * stride,
                         map.data + y * stride + picture.width * 3);
    gst_buffer_unmap(gst_sample_get_buffer(sample), &map);
    gst_sample_unref(sample);
  }
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(in);
  gst_object_unref(out);
  gst_object_unref(pipeline);
  return picture;
}

// `frames` frames through a stream with the branch; the pictures it made.
std::vector<GstBuffer *> run(int frames, double interval_s, bool wanted) {
  gst_init(nullptr, nullptr);
  const std::string description =
      "videotestsrc pattern=black num-buffers=" + std::to_string(frames) +
      " ! video/x-raw,width=1280,height=720,format=I420,framerate=30/1 ! identity name=mark "
      "! tee name=split " +
      gst_cv_snapshot_branch("split", "picture") + " split. ! fakesink sync=false";
  GError *error = nullptr;
  GstElement *pipeline = gst_parse_launch(description.c_str(), &error);
  EXPECT_EQ(error, nullptr) << (error ? error->message : "");
  if (!pipeline) return {};
  GstElement *mark = gst_bin_get_by_name(GST_BIN(pipeline), "mark");
  GstPad *pad = gst_element_get_static_pad(mark, "src");
  gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, add_box, nullptr, nullptr);
  gst_object_unref(pad);
  gst_object_unref(mark);
  auto *pictures = new std::vector<GstBuffer *>;
  EXPECT_TRUE(gst_cv_snapshot_attach(
      pipeline, "picture", interval_s,
      [pictures](GstBuffer *jpeg) { pictures->push_back(gst_buffer_ref(jpeg)); },
      [wanted] { return wanted; }));
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstBus *bus = gst_element_get_bus(pipeline);
  GstMessage *end = gst_bus_timed_pop_filtered(
      bus, 30 * GST_SECOND, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  EXPECT_NE(end, nullptr) << "no end of the stream in 30 s";
  if (end) {
    EXPECT_EQ(GST_MESSAGE_TYPE(end), GST_MESSAGE_EOS);
    gst_message_unref(end);
  }
  gst_object_unref(bus);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
  std::vector<GstBuffer *> out = *pictures;
  delete pictures;
  return out;
}

// The branch encodes with gst-plugins-good's jpegenc; a GPU host's unpacked packages may lack it.
bool have_jpegenc() {
  gst_init(nullptr, nullptr);
  GstElementFactory *factory = gst_element_factory_find("jpegenc");
  if (factory) gst_object_unref(factory);
  return factory != nullptr;
}

TEST(Snapshot, APictureIs640WideWithTheBoxWhereItIsOnTheFrame) {
  if (!have_jpegenc()) GTEST_SKIP() << "no jpegenc here (gst-plugins-good, libjpeg)";
  const std::vector<GstBuffer *> pictures = run(5, 0, true);
  ASSERT_FALSE(pictures.empty());
  const Picture picture = decode(pictures.back());
  ASSERT_EQ(picture.width, 640);
  ASSERT_EQ(picture.height, 360);
  // The box's edges, halved with the frame: (320, 180) to (400, 240).
  int on_edges = 0, elsewhere = 0;
  for (int y = 0; y < picture.height; ++y)
    for (int x = 0; x < picture.width; ++x) {
      if (!picture.drawn_at(x, y)) continue;
      const bool near_box = x >= 316 && x <= 404 && y >= 150 && y <= 244;  // its tag above it
      (near_box ? on_edges : elsewhere)++;
    }

  EXPECT_GT(on_edges, 2 * (80 + 60)) << "the box is not drawn at (320, 180)-(400, 240)";
  EXPECT_EQ(elsewhere, 0) << "drawn away from the box";
  for (GstBuffer *b : pictures) gst_buffer_unref(b);
}

TEST(Snapshot, PicturesArePacedAndNoneIsMadeUnwanted) {
  if (!have_jpegenc()) GTEST_SKIP() << "no jpegenc here (gst-plugins-good, libjpeg)";
  // 30 frames a second of stream time, but made as fast as the CPU goes: pacing is in wall
  // time, so 60 frames in well under 10 s give a picture, then none before 10 s have passed.
  std::vector<GstBuffer *> pictures = run(60, 10, true);
  EXPECT_EQ(pictures.size(), 1u);
  for (GstBuffer *b : pictures) gst_buffer_unref(b);
  pictures = run(60, 0, false);
  EXPECT_TRUE(pictures.empty());
}

}  // namespace
