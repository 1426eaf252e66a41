// jsonmetawriter when its file cannot be written: a full disk or a file size limit stops the
// stream with an element error carrying the OS's reason; no JSON line is lost silently. And the
// points, members and class ids of kept boxes in its lines.
#include <glib/gstdio.h>
#include <gst/check/gstharness.h>
#include <gst/cudanms/cudanmsmeta.h>
#include <gst/gst.h>
#include <gtest/gtest.h>
#include <json-glib/json-glib.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <string>

#include "detectionsjson.h"
#include "gst-plugin/cv_support.h"

namespace cudanms::testing {
namespace {

struct Ending {
  bool error = false;
  std::string text;  // the error's message and debug text
};

Ending run_to_end(const std::string &description) {
  Ending ending;
  GError *parse_error = nullptr;
  GstElement *pipeline = gst_parse_launch(description.c_str(), &parse_error);
  EXPECT_NE(pipeline, nullptr) << (parse_error ? parse_error->message : "");
  if (!pipeline) return ending;
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstBus *bus = gst_element_get_bus(pipeline);
  GstMessage *m = gst_bus_timed_pop_filtered(
      bus, 30 * GST_SECOND, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  EXPECT_NE(m, nullptr) << "neither EOS nor an error within 30 s";
  if (m && GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR) {
    GError *error = nullptr;
    gchar *debug = nullptr;
    gst_message_parse_error(m, &error, &debug);
    ending.error = true;
    ending.text = std::string(error->message) + " | " + (debug ? debug : "");
    g_clear_error(&error);
    g_free(debug);
  }
  if (m) gst_message_unref(m);
  gst_object_unref(bus);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
  return ending;
}

std::string writer_pipeline(const std::string &location) {
  return "videotestsrc num-buffers=30 ! video/x-raw,width=64,height=48 ! cudanms backend=cpu ! "
         "jsonmetawriter location=\"" +
         location + "\" ! fakesink";
}

class JsonMetaWriter : public ::testing::Test {
 protected:
  void SetUp() override { init_cv_elements_once(); }
};

// jsonmetawriter only reads the metadata: the frame leaves untouched, the very buffer, and its
// line is written all the same; cudanms and boxtrack add to it: a frame they may not write is
// copied first.
TEST_F(JsonMetaWriter, ReadersPassTheFrameItselfAndWritersAWritableCopy) {
  gchar *dir = g_dir_make_tmp("jsonmetawriter-XXXXXX", nullptr);
  const std::string path = std::string(dir) + "/lines.jsonl";
  EXPECT_TRUE(passes_the_frame_itself("jsonmetawriter location=" + path));
  gchar *text = nullptr;
  ASSERT_TRUE(g_file_get_contents(path.c_str(), &text, nullptr, nullptr));
  EXPECT_EQ(std::count(text, text + strlen(text), '\n'), 1) << text;
  g_free(text);
  g_unlink(path.c_str());
  g_rmdir(dir);
  g_free(dir);
  EXPECT_FALSE(passes_the_frame_itself("cudanms backend=cpu"));
  EXPECT_FALSE(passes_the_frame_itself("boxtrack"));
}

TEST_F(JsonMetaWriter, AFullDiskIsAnErrorThatStopsTheStream) {
  struct stat st;
  if (stat("/dev/full", &st) != 0 || !S_ISCHR(st.st_mode))
    GTEST_SKIP() << "/dev/full is not the full device here";
  const Ending ending = run_to_end(writer_pipeline("/dev/full"));
  EXPECT_TRUE(ending.error);
  EXPECT_NE(ending.text.find("Could not write to /dev/full"), std::string::npos) << ending.text;
  EXPECT_NE(ending.text.find("No space left on device"), std::string::npos) << ending.text;
}

// The same failure on any machine: the process may not grow a file past 200 bytes, about two
// lines, so the third line fails with EFBIG.
TEST_F(JsonMetaWriter, AShortWriteIsAnErrorThatStopsTheStream) {
  gchar *dir = g_dir_make_tmp("jsonmetawriter-XXXXXX", nullptr);
  const std::string path = std::string(dir) + "/lines.jsonl";
  struct rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  const struct rlimit limited = {200, saved.rlim_max};
  auto *previous_handler = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limited), 0);
  const Ending ending = run_to_end(writer_pipeline(path));
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previous_handler);
  EXPECT_TRUE(ending.error);
  EXPECT_NE(ending.text.find("Could not write to " + path), std::string::npos) << ending.text;
  EXPECT_NE(ending.text.find("File too large"), std::string::npos) << ending.text;
  g_unlink(path.c_str());
  g_rmdir(dir);
  g_free(dir);
}

TEST_F(JsonMetaWriter, AnUnwritableLocationIsAnErrorAtStart) {
  const Ending ending = run_to_end(writer_pipeline("/nonexistent/dir/lines.jsonl"));
  EXPECT_TRUE(ending.error);
  EXPECT_NE(ending.text.find("/nonexistent/dir/lines.jsonl"), std::string::npos) << ending.text;
}

// A kept box's points (blazeface's keypoints through cudanms) as [[x, y], ...]; an unknown (NaN)
// point as null, since JSON has no NaN.
TEST_F(JsonMetaWriter, PointsAndMembersOfAKeptBox) {
  gchar *dir = g_dir_make_tmp("jsonpoints-XXXXXX", nullptr);
  const std::string path = std::string(dir) + "/lines.jsonl";
  GstHarness *h = gst_harness_new_parse(("jsonmetawriter location=\"" + path + "\"").c_str());
  gst_harness_set_src_caps_str(h, "video/x-raw,format=GRAY8,width=64,height=48,framerate=30/1");
  GstBuffer *buf = gst_buffer_new_allocate(nullptr, 64 * 48, nullptr);
  GstCudaNmsResultMeta *r = gst_buffer_add_cuda_nms_result_meta(buf, 1);
  const float box[] = {10, 12, 30, 40};
  std::copy(box, box + 4, r->boxes);
  r->scores[0] = 0.75f;
  gst_cuda_nms_result_meta_set_points_per_box(r, 2);
  const float points[] = {15.5f, 20.25f, NAN, NAN};
  std::copy(points, points + 4, r->points);
  gst_cuda_nms_result_meta_set_members(r);
  r->members[0] = 7;
  gst_buffer_unref(gst_harness_push_and_pull(h, buf));
  gst_harness_teardown(h);  // closes the file

  gchar *text = nullptr;
  ASSERT_TRUE(g_file_get_contents(path.c_str(), &text, nullptr, nullptr));
  JsonParser *parser = json_parser_new();
  ASSERT_TRUE(json_parser_load_from_data(parser, text, -1, nullptr)) << text;
  JsonObject *o = json_node_get_object(json_parser_get_root(parser));
  JsonObject *b = json_array_get_object_element(json_object_get_array_member(o, "boxes"), 0);
  JsonArray *p = json_object_get_array_member(b, "points");
  ASSERT_NE(p, nullptr) << text;
  ASSERT_EQ(json_array_get_length(p), 2u);
  JsonArray *first = json_array_get_array_element(p, 0);
  EXPECT_EQ(json_array_get_double_element(first, 0), 15.5);
  EXPECT_EQ(json_array_get_double_element(first, 1), 20.25);
  EXPECT_TRUE(JSON_NODE_HOLDS_NULL(json_array_get_element(p, 1)));
  EXPECT_EQ(json_object_get_int_member(b, "members"), 7) << text;
  g_object_unref(parser);
  g_free(text);
  g_unlink(path.c_str());
  g_rmdir(dir);
  g_free(dir);
}

// ROI metas of another detector, straight into the JSON (no cudanms): the class id is the
// detection's label_id, written as a uint as DL Streamer's detectors write it, and a box of an
// roi_type alone has none: no "class_id" (cudanms) or "label_id" (dlstreamer), never a number
// made of its type's name.
TEST_F(JsonMetaWriter, ClassIdsOfRoiMetasAreTheirLabelIdsOrNone) {
  GstBuffer *buf = gst_buffer_new();
  GstVideoRegionOfInterestMeta *person =
      gst_buffer_add_video_region_of_interest_meta(buf, "person", 10, 10, 20, 40);
  gst_video_region_of_interest_meta_add_param(
      person, gst_structure_new("detection", "confidence", G_TYPE_DOUBLE, 0.9, "label_id",
                                G_TYPE_UINT, 0u, NULL));
  gst_buffer_add_video_region_of_interest_meta(buf, "car", 40, 10, 20, 20);
  for (const DetectionsFormat format : {DetectionsFormat::kCudanms, DetectionsFormat::kDlStreamer}) {
    DetectionsStream stream;
    GstCaps *caps = gst_caps_from_string("video/x-raw,format=GRAY8,width=64,height=48");
    GstEvent *caps_event = gst_event_new_caps(caps);
    stream.on_event(caps_event);
    gst_event_unref(caps_event);
    gst_caps_unref(caps);
    gsize length = 0;
    gchar *text = stream.encode(nullptr, buf, format, "", nullptr, &length);
    const bool dlstreamer = format == DetectionsFormat::kDlStreamer;
    JsonParser *parser = json_parser_new();
    ASSERT_TRUE(json_parser_load_from_data(parser, text, -1, nullptr)) << text;
    JsonArray *boxes = json_object_get_array_member(json_node_get_object(json_parser_get_root(parser)),
                                                    dlstreamer ? "objects" : "boxes");
    ASSERT_EQ(json_array_get_length(boxes), 2u) << text;
    for (guint i = 0; i < 2; ++i) {
      JsonObject *box = json_array_get_object_element(boxes, i);
      if (dlstreamer) box = json_object_get_object_member(box, "detection");
      const char *id = dlstreamer ? "label_id" : "class_id";
      const std::string label = json_object_get_string_member(box, "label");
      if (label == "person") {
        EXPECT_EQ(json_object_get_int_member(box, id), 0) << text;
      } else {
        EXPECT_EQ(label, "car") << text;
        EXPECT_FALSE(json_object_has_member(box, id)) << text;
      }
    }
    g_object_unref(parser);
    g_free(text);
  }
  gst_buffer_unref(buf);
}

}  // namespace
}  // namespace cudanms::testing
