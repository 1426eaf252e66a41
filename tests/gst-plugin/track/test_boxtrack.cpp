// boxtrack through GstHarness behind a real cudanms: ids on the result meta and on each ROI meta
// (DL Streamer's object_id), time by PTS, resets, bounds, and inputs it must survive.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "track_support.h"

namespace cudanms::testing {
namespace {

// cudanms ! boxtrack, with a bus to read boxtrack's messages.
struct Chain {
  GstHarness *h;
  GstBus *bus;
  GstElement *track;

  explicit Chain(const std::string &track_properties = "") {
    init_track_elements_once();
    h = gst_harness_new_parse(("cudanms ! boxtrack name=track " + track_properties).c_str());
    gst_harness_set_src_caps_str(h, kCaps);
    bus = gst_bus_new();
    gst_element_set_bus(h->element, bus);
    track = gst_bin_get_by_name(GST_BIN(h->element), "track");
  }
  ~Chain() {
    gst_object_unref(track);
    gst_element_set_bus(h->element, nullptr);
    gst_object_unref(bus);
    gst_harness_teardown(h);
  }
  // Pushes a frame, returns what came out (owned by the caller).
  GstBuffer *push(GstBuffer *buf) {
    EXPECT_EQ(gst_harness_push(h, buf), GST_FLOW_OK);
    return gst_harness_pull(h);
  }
  std::vector<guint64> ids_of(const std::vector<Person> &people, int frame) {
    GstBuffer *out = push(frame_of(people, frame * kFrame));
    const std::vector<guint64> ids = result_ids(out);
    EXPECT_EQ(ids, roi_ids(out)) << "frame " << frame;  // the ROI metas agree
    gst_buffer_unref(out);
    return ids;
  }
};

TEST(BoxTrack, IdsOnTheResultAndEveryRoiMeta) {
  Chain c;
  std::vector<guint64> last;
  for (int f = 0; f < 30; f++) {
    // Two people walking apart; cudanms keeps them best score first.
    last = c.ids_of({{100.0f + 5 * f, 300, 0.9f}, {500.0f - 5 * f, 200, 0.8f}}, f);
    ASSERT_EQ(last, (std::vector<guint64>{1, 2})) << "frame " << f;  // first frame: at once
  }
}

TEST(BoxTrack, NewPeopleGetIdsAfterMinHits) {
  Chain c("min-hits=3");
  c.ids_of({{100, 300}}, 0);
  EXPECT_EQ(c.ids_of({{105, 300}, {400, 300, 0.7f}}, 1), (std::vector<guint64>{1, 0}));
  EXPECT_EQ(c.ids_of({{110, 300}, {400, 300, 0.7f}}, 2), (std::vector<guint64>{1, 0}));
  EXPECT_EQ(c.ids_of({{115, 300}, {400, 300, 0.7f}}, 3), (std::vector<guint64>{1, 2}));
}

// A frame without boxes, or with no meta at all, ages the tracks: by PTS, not by buffers.
TEST(BoxTrack, TimeIsThePts) {
  Chain c("track-buffer=30");
  for (int f = 0; f < 10; f++) c.ids_of({{100, 300}}, f);
  // One buffer 20 frames later: within the buffer, the same person.
  EXPECT_EQ(c.ids_of({{100, 300}}, 30), (std::vector<guint64>{1}));
  // One buffer 40 frames later, with a frame without any meta on the way: a new track.
  GstBuffer *bare = gst_buffer_new();
  GST_BUFFER_PTS(bare) = 50 * kFrame;
  gst_buffer_unref(c.push(bare));
  EXPECT_EQ(c.ids_of({{100, 300}}, 61), (std::vector<guint64>{0}));
  EXPECT_EQ(c.ids_of({{100, 300}}, 62), (std::vector<guint64>{0}));
  EXPECT_EQ(c.ids_of({{100, 300}}, 63), (std::vector<guint64>{2}));
}

TEST(BoxTrack, PtsGoingBackwardsResetsAndIdsGoOn) {
  Chain c;
  for (int f = 10; f < 20; f++) ASSERT_EQ(c.ids_of({{100, 300}}, f), (std::vector<guint64>{1}));
  EXPECT_EQ(c.ids_of({{100, 300}}, 0), (std::vector<guint64>{2}));  // confirmed at once again
  GstStructure *reset = element_message(c.bus, "boxtrack-reset");
  ASSERT_NE(reset, nullptr);
  EXPECT_STREQ(gst_structure_get_string(reset, "reason"), "time went backwards");
  gst_structure_free(reset);
  guint64 resets = 0;
  g_object_get(c.track, "resets", &resets, NULL);
  EXPECT_EQ(resets, 1u);
}

TEST(BoxTrack, NextIdCarriesIdsOn) {
  Chain c("next-id=1000");
  EXPECT_EQ(c.ids_of({{100, 300}}, 0), (std::vector<guint64>{1000}));
  g_object_set(c.track, "next-id", guint64(5), NULL);  // never lowered
  guint64 next = 0;
  g_object_get(c.track, "next-id", &next, NULL);
  EXPECT_EQ(next, 1001u);
}

TEST(BoxTrack, MaxTracksWarnsAndBoundsTheState) {
  Chain c("max-tracks=2");
  std::vector<Person> crowd;
  for (int i = 0; i < 5; i++) crowd.push_back({60.0f + 100 * i, 300});
  for (int f = 0; f < 3; f++) c.ids_of(crowd, f);
  guint64 tracks = 0, refused = 0;
  g_object_get(c.track, "tracks", &tracks, "refused", &refused, NULL);
  EXPECT_EQ(tracks, 2u);
  EXPECT_EQ(refused, 3u * 3);
  bool warned = false;
  while (GstMessage *m = gst_bus_pop(c.bus)) {
    warned |= GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING;
    gst_message_unref(m);
  }
  EXPECT_TRUE(warned);
}

// Another detector's ROI metas, without a result meta: tracked all the same.
TEST(BoxTrack, RoiMetasAlone) {
  init_track_elements_once();
  GstHarness *h = gst_harness_new("boxtrack");
  gst_harness_set_src_caps_str(h, kCaps);
  for (int f = 0; f < 5; f++) {
    GstBuffer *buf = gst_buffer_new();
    GST_BUFFER_PTS(buf) = f * kFrame;
    for (int k = 0; k < 2; k++) {
      GstVideoRegionOfInterestMeta *roi =
          gst_buffer_add_video_region_of_interest_meta(buf, "face", 100 + 200 * k + f, 100, 50, 60);
      gst_video_region_of_interest_meta_add_param(
          roi, gst_structure_new("detection", "confidence", G_TYPE_DOUBLE, 0.9, NULL));
    }
    ASSERT_EQ(gst_harness_push(h, buf), GST_FLOW_OK);
    GstBuffer *out = gst_harness_pull(h);
    EXPECT_EQ(roi_ids(out), (std::vector<guint64>{1, 2})) << "frame " << f;
    gst_buffer_unref(out);
  }
  gst_harness_teardown(h);
}

// 10 000 kept boxes a frame (a result meta of another producer): every one tracked.
TEST(BoxTrack, TenThousandBoxes) {
  init_track_elements_once();
  GstHarness *h = gst_harness_new("boxtrack");
  gst_harness_set_src_caps_str(h, "video/x-raw,format=GRAY8,width=4000,height=2500,framerate=25/1");
  const guint n = 10000;
  for (int f = 0; f < 3; f++) {
    GstBuffer *buf = gst_buffer_new();
    GST_BUFFER_PTS(buf) = f * kFrame;
    GstCudaNmsResultMeta *r = gst_buffer_add_cuda_nms_result_meta(buf, n);
    for (guint i = 0; i < n; i++) {
      const float x = 40.0f * (i % 100) + f, y = 25.0f * (i / 100);
      const float box[4] = {x, y, x + 30, y + 20};
      std::copy(box, box + 4, r->boxes + 4 * i);
      r->scores[i] = 0.9f;
      r->labels[i] = "thing";
    }
    ASSERT_EQ(gst_harness_push(h, buf), GST_FLOW_OK);
    GstBuffer *out = gst_harness_pull(h);
    const std::vector<guint64> ids = result_ids(out);
    ASSERT_EQ(ids.size(), n);
    for (guint i = 0; i < n; i++) ASSERT_EQ(ids[i], i + 1u) << "frame " << f << " box " << i;
    gst_buffer_unref(out);
  }
  gst_harness_teardown(h);
}

// Every property takes the ends of its range, and reads them back.
TEST(BoxTrack, PropertiesAtTheirRangesEnds) {
  init_track_elements_once();
  GstElement *e = gst_element_factory_make("boxtrack", nullptr);
  g_object_set(e, "track-thresh", 0.0, "high-thresh", 1.0, "match-thresh", 0.0, "low-thresh", 1.0,
               "track-buffer", 0u, "min-hits", 1000u, "max-tracks", 1u, NULL);
  gdouble track = -1, high = -1;
  guint buffer = 7, hits = 0, max = 0;
  g_object_get(e, "track-thresh", &track, "high-thresh", &high, "track-buffer", &buffer, "min-hits",
               &hits, "max-tracks", &max, NULL);
  EXPECT_EQ(track, 0.0);
  EXPECT_EQ(high, 1.0);
  EXPECT_EQ(buffer, 0u);
  EXPECT_EQ(hits, 1000u);
  EXPECT_EQ(max, 1u);
  gst_object_unref(e);
  // And runs with them.
  Chain c("track-thresh=1 high-thresh=1 match-thresh=0 track-buffer=0 min-hits=1000 max-tracks=1");
  for (int f = 0; f < 5; f++) EXPECT_EQ(c.ids_of({{100, 300}, {300, 300}}, f).size(), 2u);
}

// A 640 x 480 GRAY8 frame of a blocky texture, the picture moved `offset` px to the right,
// with the people's boxes.
GstBuffer *textured_frame(const std::vector<Person> &people, int frame, int offset) {
  GstBuffer *buf = frame_of(people, frame * kFrame);
  GstMapInfo map;
  GstMemory *memory = gst_allocator_alloc(nullptr, 640 * 480, nullptr);
  gst_memory_map(memory, &map, GST_MAP_WRITE);
  for (int y = 0; y < 480; y++)
    for (int x = 0; x < 640; x++) {
      const guint32 block = static_cast<guint32>((x - offset + 1000) / 8) * 7919u +
                            static_cast<guint32>(y / 8) * 104729u;
      map.data[y * 640 + x] = static_cast<guint8>((block * 2654435761u) >> 24);
    }
  gst_memory_unmap(memory, &map);
  gst_buffer_append_memory(buf, memory);
  return buf;
}

// A camera panning in jerks past three people standing still (their boxes move 80 px, twice
// their width, every other frame): camera-motion keeps one id a person; without, ids change.
TEST(BoxTrack, CameraMotionFollowsAPanningCamera) {
  auto ids_per_person = [](const char *properties) {
    Chain c(properties);
    std::vector<std::set<guint64>> ids(3);
    for (int f = 0; f < 16; f++) {
      const int offset = 80 * (f / 2);
      std::vector<Person> people;
      const float scores[] = {0.95f, 0.9f, 0.85f};  // cudanms keeps them in this order
      for (int p = 0; p < 3; p++)
        people.push_back({static_cast<float>(60 + 150 * p + offset) - 480, 300, scores[p]});
      for (Person &p : people) p.x += 480;
      GstBuffer *out = c.push(textured_frame(people, f, offset));
      const std::vector<guint64> got = result_ids(out);
      gst_buffer_unref(out);
      for (size_t p = 0; p < got.size() && p < 3; p++)
        if (got[p]) ids[p].insert(got[p]);
    }
    return ids;
  };
#ifdef CUDANMS_CAMERA_MOTION
  for (const auto &person : ids_per_person("camera-motion=true")) EXPECT_EQ(person.size(), 1u);
#endif
  size_t without = 0;
  for (const auto &person : ids_per_person("")) without += person.size();
  EXPECT_GT(without, 3u) << "the scene must defeat the tracker without camera-motion";
}

// Frames camera-motion cannot read stop the stream at negotiation, with the reason.
TEST(BoxTrack, CameraMotionRefusesFramesItCannotRead) {
  init_track_elements_once();
  const char *cases[][2] = {
      {"video/x-raw(memory:CUDAMemory),format=NV12,width=640,height=480,framerate=25/1",
       "system memory"},
      {"video/x-raw,format=GRAY16_LE,width=640,height=480,framerate=25/1", "GRAY16_LE"}};
  for (const auto &[caps, reason] : cases) {
    GstHarness *h = gst_harness_new_parse("boxtrack camera-motion=true");
    GstBus *bus = gst_bus_new();
    gst_element_set_bus(h->element, bus);
    gst_harness_set_src_caps_str(h, caps);
    EXPECT_NE(gst_harness_push(h, frame_of({}, 0)), GST_FLOW_OK) << caps;
    GstMessage *error = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR);
    ASSERT_NE(error, nullptr) << caps;
    GError *e = nullptr;
    gchar *debug = nullptr;
    gst_message_parse_error(error, &e, &debug);
#ifdef CUDANMS_CAMERA_MOTION
    EXPECT_NE(std::string(debug).find(reason), std::string::npos) << debug;
#else
    EXPECT_NE(std::string(debug).find("OpenCV"), std::string::npos) << debug;
#endif
    g_error_free(e);
    g_free(debug);
    gst_message_unref(error);
    gst_element_set_bus(h->element, nullptr);
    gst_object_unref(bus);
    gst_harness_teardown(h);
  }
}

TEST(BoxTrack, BadBoxesAreIgnored) {
  init_track_elements_once();
  GstHarness *h = gst_harness_new("boxtrack");
  gst_harness_set_src_caps_str(h, kCaps);
  GstBuffer *buf = gst_buffer_new();
  GST_BUFFER_PTS(buf) = 0;
  GstCudaNmsResultMeta *r = gst_buffer_add_cuda_nms_result_meta(buf, 3);
  const float boxes[12] = {NAN, 0, 10, 10, 5, 5, 1, 1, 0, 0, 1e30f, 1e30f};
  std::copy(boxes, boxes + 12, r->boxes);
  for (int i = 0; i < 3; i++) r->scores[i] = 0.9f;
  ASSERT_EQ(gst_harness_push(h, buf), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull(h);
  EXPECT_EQ(result_ids(out), (std::vector<guint64>{0, 0, 1}));
  gst_buffer_unref(out);
  gst_harness_teardown(h);
}

}  // namespace
}  // namespace cudanms::testing
