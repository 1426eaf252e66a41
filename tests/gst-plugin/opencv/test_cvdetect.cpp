// cvdetect on real video (Debian opencv-doc's vtest.avi): tens to hundreds of raw candidates a
// frame, a few boxes per person after cudanms, and jsonmetawriter's lines matching the metas.
// Also: the formats cvdetect takes, and a missing or invalid model as an error at start.
#include <glib/gstdio.h>
#include <gst/app/gstappsink.h>
#include <gst/cudanms/cudanmsmeta.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>
#include <json-glib/json-glib.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "gst-plugin/cv_support.h"

namespace cudanms::testing {
namespace {

// The demo's detector settings.
const char *const kPeople =
    "cvdetect model=hog-people min-size=48x96 max-size=128x256 scale-factor=1.1 win-stride=8";

struct Frame {
  guint candidates = 0;       // the candidates meta cvdetect attached (kept by cudanms)
  guint64 candidates_in = 0;  // the result meta's count
  std::vector<std::array<float, 4>> kept;
  std::vector<float> scores;
  std::vector<std::string> labels;      // the result meta's
  std::vector<std::string> roi_types;   // the kept ROI metas'
  std::vector<std::string> roi_labels;  // their "detection" structures' "label"
  GstClockTime pts = GST_CLOCK_TIME_NONE;
};

// Runs `description` (ending in "appsink name=sink") for up to n frames.
std::vector<Frame> run_frames(const std::string &description, int n, std::string *error_text) {
  std::vector<Frame> frames;
  GError *error = nullptr;
  GstElement *pipeline = gst_parse_launch(description.c_str(), &error);
  if (!pipeline) {
    *error_text = error ? error->message : "parse failed";
    g_clear_error(&error);
    return frames;
  }
  GstElement *sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  for (int i = 0; i < n; i++) {
    GstSample *sample = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), 60 * GST_SECOND);
    if (!sample) break;
    GstBuffer *buf = gst_sample_get_buffer(sample);
    Frame f;
    f.pts = GST_BUFFER_PTS(buf);
    if (auto *c = gst_buffer_get_cuda_nms_candidates_meta(buf)) f.candidates = c->n;
    if (auto *r = gst_buffer_get_cuda_nms_result_meta(buf)) {
      f.candidates_in = r->candidates_in;
      for (guint k = 0; k < r->n_kept; k++) {
        f.kept.push_back(
            {r->boxes[4 * k], r->boxes[4 * k + 1], r->boxes[4 * k + 2], r->boxes[4 * k + 3]});
        f.scores.push_back(r->scores[k]);
        f.labels.push_back(r->labels[k]);
      }
    }
    gpointer state = nullptr;
    while (GstMeta *m = gst_buffer_iterate_meta_filtered(
               buf, &state, GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE)) {
      auto *roi = reinterpret_cast<GstVideoRegionOfInterestMeta *>(m);
      f.roi_types.push_back(g_quark_to_string(roi->roi_type));
      GstStructure *d = gst_video_region_of_interest_meta_get_param(roi, "detection");
      const gchar *label = d ? gst_structure_get_string(d, "label") : nullptr;
      f.roi_labels.push_back(label ? label : "");
    }
    frames.push_back(f);
    gst_sample_unref(sample);
  }
  GstBus *bus = gst_element_get_bus(pipeline);
  if (GstMessage *m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR)) {
    gst_message_parse_error(m, &error, nullptr);
    *error_text = error->message;
    g_clear_error(&error);
    gst_message_unref(m);
  }
  gst_object_unref(bus);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(sink);
  gst_object_unref(pipeline);
  return frames;
}

class CvDetect : public ::testing::Test {
 protected:
  void SetUp() override { init_cv_elements_once(); }
};

TEST_F(CvDetect, VtestCandidatesNmsAndJsonLines) {
  const std::string vtest = opencv_sample("vtest.avi");
  SKIP_WITHOUT_FILE(vtest, "opencv-doc");
  gchar *dir = g_dir_make_tmp("cvdetect-XXXXXX", nullptr);
  const std::string json = std::string(dir) + "/vtest.jsonl";
  constexpr int kFrames = 12;
  std::string error;
  const std::vector<Frame> frames = run_frames(
      "filesrc location=\"" + vtest + "\" ! decodebin ! videoconvert ! " + kPeople +
          " ! cudanms backend=cpu iou-threshold=0.3 keep-candidates=true ! jsonmetawriter "
          "location=\"" +
          json + "\" ! appsink name=sink sync=false max-buffers=" + std::to_string(kFrames) +
          " drop=false",
      kFrames, &error);
  ASSERT_EQ(frames.size(), size_t(kFrames)) << error;

  guint64 candidates = 0, kept = 0;
  for (size_t i = 0; i < frames.size(); i++) {
    const Frame &f = frames[i];
    // Tens to hundreds of raw windows a frame (vtest.avi has 3 to 8 people in view).
    EXPECT_GE(f.candidates, 10u) << "frame " << i;
    EXPECT_LE(f.candidates, 1000u) << "frame " << i;
    EXPECT_EQ(f.candidates_in, f.candidates) << "frame " << i;
    // A few boxes per person: at least one, never more than two per person in view.
    EXPECT_GE(f.kept.size(), 1u) << "frame " << i;
    EXPECT_LE(f.kept.size(), 16u) << "frame " << i;
    for (const auto &b : f.kept) {
      EXPECT_TRUE(b[0] >= 0 && b[1] >= 0 && b[2] <= 768 && b[3] <= 576);
      // A HOG window keeps the model's 1:2 aspect.
      EXPECT_NEAR((b[3] - b[1]) / (b[2] - b[0]), 2.0, 0.05);
    }
    // cvdetect announces "person" for class 0: what a probe reading the ROI metas sees.
    EXPECT_EQ(f.roi_types, std::vector<std::string>(f.kept.size(), "person")) << "frame " << i;
    EXPECT_EQ(f.roi_labels, std::vector<std::string>(f.kept.size(), "person")) << "frame " << i;
    EXPECT_EQ(f.labels, std::vector<std::string>(f.kept.size(), "person")) << "frame " << i;
    candidates += f.candidates;
    kept += f.kept.size();
  }
  // NMS removes most of the windows.
  EXPECT_LT(kept * 5, candidates);

  // The JSON lines: one per frame, parsing, their counts and boxes those of the metas.
  std::ifstream in(json);
  std::string line;
  size_t n = 0;
  JsonParser *parser = json_parser_new();
  while (n < frames.size() && std::getline(in, line)) {
    const Frame &f = frames[n];
    GError *e = nullptr;
    ASSERT_TRUE(json_parser_load_from_data(parser, line.c_str(), -1, &e))
        << "line " << n << ": " << (e ? e->message : "") << "\n"
        << line;
    JsonObject *o = json_node_get_object(json_parser_get_root(parser));
    EXPECT_EQ(json_object_get_int_member(o, "frame"), gint64(n));
    EXPECT_EQ(guint64(json_object_get_int_member(o, "pts")), f.pts);
    EXPECT_EQ(json_object_get_int_member(o, "width"), 768);
    EXPECT_EQ(json_object_get_int_member(o, "height"), 576);
    EXPECT_EQ(guint64(json_object_get_int_member(o, "candidates")), f.candidates_in);
    EXPECT_EQ(size_t(json_object_get_int_member(o, "kept")), f.kept.size());
    EXPECT_STREQ(json_object_get_string_member(o, "backend"), "cpu");
    JsonArray *boxes = json_object_get_array_member(o, "boxes");
    ASSERT_EQ(json_array_get_length(boxes), f.kept.size()) << "line " << n;
    for (guint k = 0; k < json_array_get_length(boxes); k++) {
      JsonObject *b = json_array_get_object_element(boxes, k);
      EXPECT_STREQ(json_object_get_string_member(b, "label"), "person");
      EXPECT_EQ(json_object_get_int_member(b, "class_id"), 0);
      EXPECT_FLOAT_EQ(float(json_object_get_double_member(b, "score")), f.scores[k]);
      EXPECT_FLOAT_EQ(float(json_object_get_double_member(b, "x")), f.kept[k][0]);
      EXPECT_FLOAT_EQ(float(json_object_get_double_member(b, "y")), f.kept[k][1]);
      EXPECT_NEAR(json_object_get_double_member(b, "w"), f.kept[k][2] - f.kept[k][0], 1e-3);
      EXPECT_NEAR(json_object_get_double_member(b, "h"), f.kept[k][3] - f.kept[k][1], 1e-3);
    }
    n++;
  }
  EXPECT_EQ(n, frames.size());
  g_object_unref(parser);
  g_unlink(json.c_str());
  g_rmdir(dir);
  g_free(dir);
}

TEST_F(CvDetect, AcceptsTheCommonFormats) {
  const std::string vtest = opencv_sample("vtest.avi");
  SKIP_WITHOUT_FILE(vtest, "opencv-doc");
  std::vector<guint> counts;
  for (const char *format : {"BGR", "BGRx", "RGBx", "I420", "NV12", "GRAY8"}) {
    std::string error;
    const std::vector<Frame> frames =
        run_frames("filesrc location=\"" + vtest +
                       "\" ! decodebin ! videoconvert ! video/x-raw,format=" + format + " ! " +
                       kPeople + " ! appsink name=sink sync=false",
                   1, &error);
    ASSERT_EQ(frames.size(), 1u) << format << ": " << error;
    EXPECT_GE(frames[0].candidates, 10u) << format;
    counts.push_back(frames[0].candidates);
  }
  // The same frame in any format: the same people, about the same windows.
  for (guint c : counts) EXPECT_NEAR(double(c), double(counts[0]), 0.25 * counts[0] + 3);
}

TEST_F(CvDetect, FaceCascadeOnMegamind) {
  const std::string video = opencv_sample("Megamind.avi");
  const std::string cascade = "/usr/share/opencv4/haarcascades/haarcascade_frontalface_default.xml";
  SKIP_WITHOUT_FILE(video, "opencv-doc");
  SKIP_WITHOUT_FILE(cascade, "opencv-data");
  std::string error;
  const std::vector<Frame> frames =
      run_frames("filesrc location=\"" + video +
                     "\" ! decodebin ! videoconvert ! cvdetect model=\"" + cascade +
                     "\" min-size=40x40 ! cudanms backend=cpu iou-threshold=0.3 "
                     "keep-candidates=true ! appsink name=sink sync=false",
                 10, &error);
  ASSERT_EQ(frames.size(), 10u) << error;
  guint candidates = 0;
  size_t kept = 0;
  for (const Frame &f : frames) {
    candidates += f.candidates;
    kept += f.kept.size();
    // The face and a few weak false positives the cascade lets through at hit-threshold 0.
    EXPECT_LE(f.kept.size(), 10u);
  }
  EXPECT_GE(candidates, 10u * 10);  // ungrouped: many windows on the face
  EXPECT_GE(kept, 5u);
  EXPECT_LT(kept * 2, candidates);
}

TEST_F(CvDetect, MissingModelIsAnErrorAtStart) {
  const std::string text = start_error("cvdetect model=/nonexistent/cascade.xml");
  EXPECT_NE(text.find("/nonexistent/cascade.xml"), std::string::npos) << text;
  EXPECT_NE(text.find("cannot be read: No such file or directory"), std::string::npos) << text;
}

TEST_F(CvDetect, AModelThatCouldNeverBeReadWholeIsAnErrorAtStart) {
  expect_unreadable_models_refused("cvdetect");
}

TEST_F(CvDetect, InvalidModelIsAnErrorAtStart) {
  gchar *path = nullptr;
  const int fd = g_file_open_tmp("cvdetect-XXXXXX.xml", &path, nullptr);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "<not a cascade>", 15), 15);
  close(fd);
  const std::string text = start_error(std::string("cvdetect model=\"") + path + "\"");
  EXPECT_NE(text.find("not a valid cascade"), std::string::npos) << text;
  g_unlink(path);
  g_free(path);
}

}  // namespace
}  // namespace cudanms::testing
