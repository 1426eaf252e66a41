// The cudanms element driven by GstHarness. Every expectation is computed independently: the
// documented frame clipping written out in the test, then the NMS library run directly.
#include <glib/gstdio.h>
#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>
#include <gst/check/gstharness.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <random>
#include <thread>

#include "cudanms/bounded_file.h"
#include "cudanmscontexts.h"
#include "plugins/element_support.h"
#include "kernels/random_sets.h"
#include "support/seed.h"
#include "support/unreadable_files.h"
#include "synthetic.h"

namespace cudanms::testing {
namespace {

constexpr int kWidth = 640;
constexpr int kHeight = 480;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
const char *const kCaps = "video/x-raw,format=GRAY8,width=640,height=480,framerate=30/1";

class CudaNmsElement : public ::testing::Test {
 protected:
  void SetUp() override { init_gstreamer_once(); }

  void TearDown() override {
    // Messages left on the bus hold the element, and the element holds the bus.
    if (bus_) gst_bus_set_flushing(bus_, TRUE);
    if (h_) gst_harness_teardown(h_);
    if (element_) gst_object_unref(element_);
    if (bus_) gst_object_unref(bus_);
  }

  // cudanms with `properties` (gst-launch syntax), a bus to watch, in a playing harness.
  void start(const std::string &properties = "backend=cpu", const char *caps = kCaps) {
    element_ = gst_element_factory_make("cudanms", "nms");
    ASSERT_NE(element_, nullptr);
    gst_object_ref_sink(element_);
    for (const std::string &assignment : split(properties)) {
      const size_t eq = assignment.find('=');
      gst_util_set_object_arg(G_OBJECT(element_), assignment.substr(0, eq).c_str(),
                              assignment.substr(eq + 1).c_str());
    }
    bus_ = gst_bus_new();
    gst_element_set_bus(element_, bus_);
    h_ = gst_harness_new_with_element(element_, "sink", "src");
    gst_harness_set_src_caps_str(h_, caps);
  }

  static std::vector<std::string> split(const std::string &s) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start < s.size()) {
      size_t end = s.find(' ', start);
      if (end == std::string::npos) end = s.size();
      if (end > start) out.push_back(s.substr(start, end - start));
      start = end + 1;
    }
    return out;
  }

  GstBuffer *process(GstBuffer *in) {
    EXPECT_EQ(gst_harness_push(h_, in), GST_FLOW_OK);
    return gst_harness_pull(h_);
  }

  // Pushes the set (packed or as ROI metas) and checks the output against the library.
  ::testing::AssertionResult check(const CandidateSet &set, const Params &params,
                                   bool as_rois = false) {
    GstBuffer *in = gst_buffer_new();
    if (as_rois) {
      add_roi_candidates(in, set);
    } else {
      gst_buffer_unref(in);
      in = packed_buffer(set);
    }
    GstBuffer *out = process(in);
    if (!out) return ::testing::AssertionFailure() << "no output buffer";
    const CandidateSet clipped = clipped_to_frame(set, kWidth, kHeight);
    auto result = output_matches(out, clipped, library_result(clipped, params), kWidth, kHeight);
    gst_buffer_unref(out);
    return result;
  }

  size_t pop_messages(GstMessageType type, std::vector<std::string> *texts = nullptr) {
    size_t n = 0;
    while (GstMessage *m = gst_bus_pop_filtered(bus_, type)) {
      ++n;
      if (texts) {
        GError *error = nullptr;
        gchar *debug = nullptr;
        if (type == GST_MESSAGE_WARNING) gst_message_parse_warning(m, &error, &debug);
        if (type == GST_MESSAGE_ERROR) gst_message_parse_error(m, &error, &debug);
        if (error) texts->push_back(std::string(error->message) + " | " + (debug ? debug : ""));
        g_clear_error(&error);
        g_free(debug);
      }
      gst_message_unref(m);
    }
    return n;
  }

  // The errors posted when an element with `property` set to `value` fails to start.
  std::vector<std::string> errors_at_start(const char *property, const char *value) {
    element_ = gst_element_factory_make("cudanms", "nms");
    EXPECT_NE(element_, nullptr);
    gst_object_ref_sink(element_);
    g_object_set(element_, property, value, NULL);
    bus_ = gst_bus_new();
    gst_element_set_bus(element_, bus_);
    EXPECT_EQ(gst_element_set_state(element_, GST_STATE_PAUSED), GST_STATE_CHANGE_FAILURE);
    std::vector<std::string> errors;
    pop_messages(GST_MESSAGE_ERROR, &errors);
    gst_element_set_state(element_, GST_STATE_NULL);
    return errors;
  }

  GstHarness *h_ = nullptr;
  GstElement *element_ = nullptr;
  GstBus *bus_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Kept boxes equal the library's result, through both input conventions.

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

// Without any label known, a kept box is named by its class id.
TEST_F(CudaNmsElement, KeptRoisNameTheirClass) {
  start();
  CandidateSet set;
  set.add(10, 10, 50, 50, 0.9f, 3);
  GstBuffer *out = process(packed_buffer(set));
  const std::vector<Roi> rois = rois_of(out);
  ASSERT_EQ(rois.size(), 1u);
  EXPECT_EQ(rois[0].type, "3");
  EXPECT_EQ(rois[0].label, "3");
  EXPECT_STREQ(gst_buffer_get_cuda_nms_result_meta(out)->labels[0], "3");
  gst_buffer_unref(out);

  // ROI input keeps its roi_type.
  GstBuffer *in = gst_buffer_new();
  add_roi_candidates(in, set);
  out = process(in);
  const std::vector<Roi> kept = rois_of(out);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].type, "object");
  EXPECT_EQ(kept[0].label, "object");
  EXPECT_EQ(kept[0].label_id, 3);
  gst_buffer_unref(out);
}

// The labels a Python probe or an overlay reads: roi_type, "detection" label, result meta.
::testing::AssertionResult labelled(GstBuffer *out, const std::vector<std::string> &expected) {
  const std::vector<Roi> rois = rois_of(out);
  const GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  if (!r || rois.size() != expected.size() || r->n_kept != expected.size())
    return ::testing::AssertionFailure() << "expected " << expected.size() << " kept boxes";
  for (size_t i = 0; i < expected.size(); i++) {
    if (rois[i].type != expected[i] || rois[i].label != expected[i] || r->labels[i] != expected[i])
      return ::testing::AssertionFailure()
             << "box " << i << ": roi_type " << rois[i].type << ", label " << rois[i].label
             << ", result meta " << r->labels[i] << "; expected " << expected[i];
  }
  return ::testing::AssertionSuccess();
}

// Two far-apart boxes, classes 0 and 1, best first.
CandidateSet two_classes() {
  CandidateSet set;
  set.add(10, 10, 50, 50, 0.9f, 0);
  set.add(200, 200, 250, 250, 0.8f, 1);
  return set;
}

TEST_F(CudaNmsElement, TheDetectorsLabelEventNamesKeptBoxes) {
  start();
  gst_harness_push_event(h_, gst_cuda_nms_label_event_new(0, "person"));
  GstBuffer *out = process(packed_buffer(two_classes()));
  EXPECT_TRUE(labelled(out, {"person", "1"}));
  gst_buffer_unref(out);
  // The announcement goes on downstream, for overlays and writers.
  bool forwarded = false;
  while (GstEvent *e = gst_harness_try_pull_event(h_)) {
    gint class_id;
    const gchar *label;
    forwarded |= gst_cuda_nms_label_event_parse(e, &class_id, &label) && class_id == 0;
    gst_event_unref(e);
  }
  EXPECT_TRUE(forwarded);
}

TEST_F(CudaNmsElement, TheLabelsPropertyNamesClassesByIndexAndWins) {
  start("backend=cpu labels=person,bicycle");
  gst_harness_push_event(h_, gst_cuda_nms_label_event_new(0, "pedestrian"));
  gst_harness_push_event(h_, gst_cuda_nms_label_event_new(5, "dog"));
  CandidateSet set = two_classes();
  set.add(400, 400, 450, 450, 0.7f, 5);  // beyond the list: the detector's name
  GstBuffer *out = process(packed_buffer(set));
  EXPECT_TRUE(labelled(out, {"person", "bicycle", "dog"}));
  gst_buffer_unref(out);
  // Changed while playing: from the next frame.
  g_object_set(element_, "labels", "", NULL);
  out = process(packed_buffer(set));
  EXPECT_TRUE(labelled(out, {"pedestrian", "1", "dog"}));
  gst_buffer_unref(out);
}

TEST_F(CudaNmsElement, ALabelsFileNamesClassesByLine) {
  gchar *path = nullptr;
  const int fd = g_file_open_tmp("labels-XXXXXX.names", &path, nullptr);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_TRUE(g_file_set_contents(path, "cat\n dog \n", -1, nullptr));
  start(std::string("backend=cpu labels-file=") + path);
  GstBuffer *out = process(packed_buffer(two_classes()));
  EXPECT_TRUE(labelled(out, {"cat", "dog"}));
  gst_buffer_unref(out);
  // An unreadable file while playing: a warning, and the labels stay as they were.
  g_object_set(element_, "labels-file", "/nonexistent/coco.names", NULL);
  std::vector<std::string> warnings;
  EXPECT_EQ(pop_messages(GST_MESSAGE_WARNING, &warnings), 1u);
  out = process(packed_buffer(two_classes()));
  EXPECT_TRUE(labelled(out, {"cat", "dog"}));
  gst_buffer_unref(out);
  g_unlink(path);
  g_free(path);
}

TEST_F(CudaNmsElement, AnUnreadableLabelsFileIsAnErrorAtStart) {
  const std::vector<std::string> errors = errors_at_start("labels-file", "/nonexistent/coco.names");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("/nonexistent/coco.names"), std::string::npos) << errors[0];
}

// /dev/zero used to be read forever (and a FIFO to block the open): now each refusal is at once.
TEST_F(CudaNmsElement, ALabelsFileThatCouldNeverBeReadWholeIsAnErrorAtStart) {
  UnreadableFiles files(cudanms::kLabelsFileLimit);
  for (const auto &[path, why] : files.cases()) {
    const std::vector<std::string> errors = errors_at_start("labels-file", path.c_str());
    ASSERT_EQ(errors.size(), 1u) << path;
    EXPECT_NE(errors[0].find(path), std::string::npos) << errors[0];
    EXPECT_NE(errors[0].find(why), std::string::npos) << errors[0];
    gst_bus_set_flushing(bus_, TRUE);
    gst_object_unref(element_);
    element_ = nullptr;
    gst_object_unref(bus_);
    bus_ = nullptr;
  }
}

TEST_F(CudaNmsElement, InvalidClassGroupsAreAnErrorAtStart) {
  const std::vector<std::string> errors = errors_at_start("class-groups", "1,2;2,3");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("Invalid class-groups \"1,2;2,3\""), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("class 2 is in two class groups"), std::string::npos) << errors[0];
}

// gst-launch syntax: method=weighted merges, method=soft decays, class-groups joins classes.
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

// Landmarks through the element: weighted NMS merges them into the result meta; candidates of
// a second meta without points bring NaN ones.
TEST_F(CudaNmsElement, PointsReachTheResultMeta) {
  start("backend=cpu method=weighted iou-threshold=0.3");
  GstBuffer *in = gst_buffer_new();
  GstCudaNmsCandidatesMeta *c = gst_buffer_add_cuda_nms_candidates_meta(in, 2);
  ASSERT_TRUE(gst_cuda_nms_candidates_meta_set_points_per_candidate(c, 1));
  const float boxes[] = {100, 100, 200, 200, 104, 100, 204, 200};
  const float scores[] = {3.0f, 1.0f};
  const float points[] = {150, 120, 154, 124};
  gst_cuda_nms_candidates_meta_append_with_points(c, boxes, scores, nullptr, points, 2);
  GstBuffer *out = process(in);
  GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->n_kept, 1u);
  ASSERT_EQ(r->points_per_box, 1u);
  EXPECT_EQ(r->points[0], 151.0f);  // (150 * 3 + 154) / 4
  EXPECT_EQ(r->points[1], 121.0f);  // (120 * 3 + 124) / 4
  gst_buffer_unref(out);

  // A second frame: its one candidate with points and one from a region-of-interest meta.
  in = gst_buffer_new();
  c = gst_buffer_add_cuda_nms_candidates_meta(in, 1);
  gst_cuda_nms_candidates_meta_set_points_per_candidate(c, 1);
  gst_cuda_nms_candidates_meta_append_with_points(c, boxes, scores, nullptr, points, 1);
  gst_buffer_add_video_region_of_interest_meta(in, "face", 400, 400, 50, 50);
  out = process(in);
  r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_EQ(r->n_kept, 2u);
  ASSERT_EQ(r->points_per_box, 1u);
  EXPECT_EQ(r->points[0], 150.0f);  // its own
  EXPECT_TRUE(std::isnan(r->points[2]));
  gst_buffer_unref(out);
  EXPECT_EQ(pop_messages(GST_MESSAGE_ERROR), 0u);
}

TEST_F(CudaNmsElement, RoiWithoutDetectionCountsAsScoreOneClassFromRoiType) {
  start();
  GstBuffer *in = gst_buffer_new();
  // Two overlapping "face" boxes and one overlapping "car" box: per class, both types survive.
  gst_buffer_add_video_region_of_interest_meta(in, "face", 10, 10, 100, 100);
  gst_buffer_add_video_region_of_interest_meta(in, "face", 12, 12, 100, 100);
  gst_buffer_add_video_region_of_interest_meta(in, "car", 11, 11, 100, 100);
  GstBuffer *out = process(in);
  GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->candidates_in, 3u);
  ASSERT_EQ(r->n_kept, 2u);
  const std::vector<Roi> rois = rois_of(out);
  ASSERT_EQ(rois.size(), 2u);
  // Equal scores (1.0): the first added wins.
  EXPECT_EQ(rois[0].type, "face");
  EXPECT_EQ(rois[0].x, 10u);
  EXPECT_EQ(rois[0].confidence, 1.0);
  EXPECT_EQ(rois[1].type, "car");
  EXPECT_NE(r->class_ids[0], r->class_ids[1]);
  gst_buffer_unref(out);
}

// ---------------------------------------------------------------------------------------------
// Bad input.

TEST_F(CudaNmsElement, NonFiniteScoresAndCoordinatesAreInvalid) {
  start();
  CandidateSet set;
  set.add(10, 10, 50, 50, kNaN, 0);
  set.add(10, 10, 50, 50, kInf, 0);
  set.add(kNaN, 10, 50, 50, 0.9f, 0);
  set.add(10, 10, kInf, 50, 0.9f, 0);
  set.add(10, -kInf, 50, 50, 0.9f, 0);
  set.add(100, 100, 150, 150, 0.5f, 0);  // the one valid box
  GstBuffer *out = process(packed_buffer(set));
  GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->candidates_in, 6u);
  EXPECT_EQ(r->invalid, 5u);
  ASSERT_EQ(r->n_kept, 1u);
  EXPECT_EQ(r->boxes[0], 100.0f);
  gst_buffer_unref(out);
  Params params;
  EXPECT_TRUE(check(set, params));
}

TEST_F(CudaNmsElement, NegativeSizesAreInvalid) {
  start();
  CandidateSet set;
  set.add(50, 10, 10, 50, 0.9f);  // x2 < x1
  set.add(10, 50, 50, 10, 0.9f);  // y2 < y1
  set.add(10, 10, 10, 50, 0.8f);  // zero width: valid
  GstBuffer *out = process(packed_buffer(set));
  GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->invalid, 2u);
  EXPECT_EQ(r->kept, 1u);
  gst_buffer_unref(out);
  EXPECT_TRUE(check(set, Params()));
}

TEST_F(CudaNmsElement, BoxesPartlyOutsideAreClipped) {
  start();
  CandidateSet set;
  set.add(-20, -10, 40, 30, 0.9f);      // top left corner
  set.add(600, 450, 700, 520, 0.8f);    // bottom right corner
  set.add(-100, 100, 1000, 200, 0.7f);  // wider than the frame
  GstBuffer *out = process(packed_buffer(set));
  GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->n_kept, 3u);
  EXPECT_EQ(std::vector<float>(r->boxes, r->boxes + 12),
            (std::vector<float>{0, 0, 40, 30, 600, 450, 640, 480, 0, 100, 640, 200}));
  const std::vector<Roi> rois = rois_of(out);
  ASSERT_EQ(rois.size(), 3u);
  EXPECT_EQ(rois[1].x + rois[1].w, 640u);
  EXPECT_EQ(rois[1].y + rois[1].h, 480u);
  EXPECT_DOUBLE_EQ(rois[1].x_max, 1.0);
  gst_buffer_unref(out);
  EXPECT_TRUE(check(set, Params()));
}

TEST_F(CudaNmsElement, BoxesWhollyOutsideAreInvalid) {
  start();
  CandidateSet set;
  set.add(-50, 10, -10, 50, 0.9f);        // left
  set.add(700, 10, 800, 50, 0.9f);        // right
  set.add(10, -90, 50, -1, 0.9f);         // above
  set.add(10, 480, 50, 600, 0.9f);        // below, touching the bottom edge
  set.add(1e9f, 1e9f, 2e9f, 2e9f, 0.9f);  // far away
  set.add(10, 10, 50, 50, 0.1f);          // inside
  GstBuffer *out = process(packed_buffer(set));
  GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->invalid, 5u);
  ASSERT_EQ(r->n_kept, 1u);
  EXPECT_EQ(r->scores[0], 0.1f);
  gst_buffer_unref(out);
  EXPECT_TRUE(check(set, Params()));
}

TEST_F(CudaNmsElement, NoClippingWithoutAFrameSize) {
  start("backend=cpu", "video/x-raw");  // no width/height: nothing to clip against
  CandidateSet set;
  set.add(-50, 10, -10, 50, 0.9f);
  GstBuffer *out = process(packed_buffer(set));
  GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->invalid, 0u);
  ASSERT_EQ(r->n_kept, 1u);
  EXPECT_EQ(r->boxes[0], -50.0f);
  const std::vector<Roi> rois = rois_of(out);
  ASSERT_EQ(rois.size(), 1u);
  EXPECT_EQ(rois[0].x, 0u);                // ROI coordinates are unsigned
  EXPECT_TRUE(std::isnan(rois[0].x_min));  // no normalized box without a frame size
  gst_buffer_unref(out);
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

TEST_F(CudaNmsElement, CandidatesMetaAndRoiMetasOnOneBufferAreBothUsed) {
  start();
  std::mt19937_64 rng(run_seed() + 103);
  const CandidateSet packed = tools::sliding_window_candidates(300, rng(), 3, kWidth, kHeight);
  const CandidateSet as_rois = integer_boxes_in_frame(
      tools::sliding_window_candidates(200, rng(), 3, kWidth, kHeight), kWidth, kHeight);
  GstBuffer *in = packed_buffer(packed);
  add_roi_candidates(in, as_rois);
  GstBuffer *out = process(in);
  // Numbered: the candidates meta's, then the ROI metas in the order they were added.
  CandidateSet all = packed;
  for (size_t i = 0; i < as_rois.size(); ++i)
    all.add(as_rois.boxes[4 * i], as_rois.boxes[4 * i + 1], as_rois.boxes[4 * i + 2],
            as_rois.boxes[4 * i + 3], as_rois.scores[i], as_rois.classes[i]);
  const CandidateSet clipped = clipped_to_frame(all, kWidth, kHeight);
  EXPECT_TRUE(output_matches(out, clipped, library_result(clipped, Params()), kWidth, kHeight));
  EXPECT_EQ(gst_buffer_get_cuda_nms_result_meta(out)->candidates_in, 500u);
  gst_buffer_unref(out);
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

// Device candidates reaching a CPU context (or another CUDA context) are downloaded once, through
// the producer's function, and give the host result. Host memory stands in for the device.
gboolean download_set(gpointer data, guint *n, gfloat **boxes, gfloat **scores, gint32 **classes,
                      gchar **) {
  const auto *set = static_cast<const CandidateSet *>(data);
  *n = static_cast<guint>(set->size());
  *boxes = static_cast<gfloat *>(g_memdup2(set->boxes.data(), set->boxes.size() * 4));
  *scores = static_cast<gfloat *>(g_memdup2(set->scores.data(), set->scores.size() * 4));
  *classes = static_cast<gint32 *>(g_memdup2(set->classes.data(), set->classes.size() * 4));
  return TRUE;
}

TEST_F(CudaNmsElement, DeviceCandidatesAreDownloadedOnceWhereNmsRunsOnTheCpu) {
  start();
  g_object_set(element_, "keep-candidates", TRUE, NULL);
  std::mt19937_64 rng(run_seed() + 120);
  const CandidateSet set = integer_boxes_in_frame(
      tools::sliding_window_candidates(500, rng(), 3, kWidth, kHeight), kWidth, kHeight);
  GstBuffer *in = gst_buffer_new();
  GstCudaNmsDeviceCandidates *dc = gst_cuda_nms_device_candidates_new();
  dc->capacity = static_cast<guint>(set.size());
  dc->download = download_set;
  dc->user_data = const_cast<CandidateSet *>(&set);
  ASSERT_TRUE(
      gst_cuda_nms_candidates_meta_set_device(gst_buffer_add_cuda_nms_candidates_meta(in, 0), dc));
  GstBuffer *out = process(in);
  EXPECT_TRUE(output_matches(out, set, library_result(set, Params()), kWidth, kHeight));
  GstCudaNmsCandidatesMeta *c = gst_buffer_get_cuda_nms_candidates_meta(out);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->downloads, 1u);
  gst_buffer_unref(out);
}

TEST_F(CudaNmsElement, KeepCandidates) {
  start();
  CandidateSet set;
  set.add(10, 10, 50, 50, 0.9f);
  set.add(12, 12, 52, 52, 0.8f);
  auto run = [&](bool with_rois) {
    GstBuffer *in = packed_buffer(set);
    if (with_rois) add_roi_candidates(in, set);
    return process(in);
  };
  GstBuffer *out = run(true);  // default: consumed metas are removed
  EXPECT_EQ(gst_buffer_get_n_meta(out, GST_CUDA_NMS_CANDIDATES_META_API_TYPE), 0u);
  EXPECT_EQ(rois_of(out).size(), 1u);  // only the kept box
  gst_buffer_unref(out);

  g_object_set(element_, "keep-candidates", TRUE, NULL);
  out = run(true);
  ASSERT_EQ(gst_buffer_get_n_meta(out, GST_CUDA_NMS_CANDIDATES_META_API_TYPE), 1u);
  EXPECT_EQ(gst_buffer_get_cuda_nms_candidates_meta(out)->n, 2u);
  EXPECT_EQ(rois_of(out).size(), 2u + 1u);  // the two candidates and the kept one
  gst_buffer_unref(out);
}

TEST_F(CudaNmsElement, AnEarlierResultMetaIsReplaced) {
  start();
  CandidateSet set;
  set.add(10, 10, 50, 50, 0.9f);
  GstBuffer *in = packed_buffer(set);
  gst_buffer_add_cuda_nms_result_meta(in, 5);
  GstBuffer *out = process(in);
  EXPECT_EQ(gst_buffer_get_n_meta(out, GST_CUDA_NMS_RESULT_META_API_TYPE), 1u);
  EXPECT_EQ(gst_buffer_get_cuda_nms_result_meta(out)->n_kept, 1u);
  gst_buffer_unref(out);
}

// ---------------------------------------------------------------------------------------------
// Properties.

TEST_F(CudaNmsElement, PropertyDefaults) {
  GstElement *e = gst_element_factory_make("cudanms", nullptr);
  ASSERT_NE(e, nullptr);
  gdouble iou, score, latency;
  guint max_candidates, max_detections, stats;
  gboolean agnostic, keep;
  gint gpu;
  guint64 frames, candidates, detections;
  g_object_get(e, "iou-threshold", &iou, "score-threshold", &score, "max-candidates",
               &max_candidates, "max-detections", &max_detections, "class-agnostic", &agnostic,
               "gpu-id", &gpu, "keep-candidates", &keep, "stats-interval", &stats, "frames",
               &frames, "candidates-total", &candidates, "detections-total", &detections,
               "last-latency-us", &latency, NULL);
  EXPECT_EQ(iou, 0.5);
  EXPECT_EQ(score, 0.0);
  EXPECT_EQ(max_candidates, 4096u);
  EXPECT_EQ(max_detections, 0u);
  EXPECT_FALSE(agnostic);
  EXPECT_EQ(gpu, 0);
  EXPECT_FALSE(keep);
  EXPECT_EQ(stats, 0u);
  EXPECT_EQ(frames, 0u);
  EXPECT_EQ(candidates, 0u);
  EXPECT_EQ(detections, 0u);
  EXPECT_EQ(latency, 0.0);
  auto enum_nick = [&](const char *name) -> std::string {
    GParamSpec *spec = g_object_class_find_property(G_OBJECT_GET_CLASS(e), name);
    gint value = -1;
    g_object_get(e, name, &value, NULL);
    GEnumClass *klass = G_ENUM_CLASS(g_type_class_ref(spec->value_type));
    const GEnumValue *v = g_enum_get_value(klass, value);
    std::string nick = v ? v->value_nick : "?";
    g_type_class_unref(klass);
    return nick;
  };
  EXPECT_EQ(enum_nick("overlap"), "iou");
  EXPECT_EQ(enum_nick("method"), "greedy");
  EXPECT_EQ(enum_nick("backend"), "auto");
  EXPECT_EQ(enum_nick("soft-decay"), "gaussian");
  gdouble sigma = 0;
  gchar *groups = nullptr;
  g_object_get(e, "sigma", &sigma, "class-groups", &groups, NULL);
  EXPECT_EQ(sigma, 0.5);
  EXPECT_STREQ(groups, "");
  g_free(groups);

  // Every property is documented and the writable ones are changeable while PLAYING.
  guint n_props = 0;
  GParamSpec **props = g_object_class_list_properties(G_OBJECT_GET_CLASS(e), &n_props);
  const std::vector<std::string> ours = {"iou-threshold",    "overlap",          "method",
                                         "score-threshold",  "max-candidates",   "max-detections",
                                         "class-agnostic",   "backend",          "gpu-id",
                                         "keep-candidates",  "stats-interval",   "frames",
                                         "candidates-total", "detections-total", "last-latency-us",
                                         "class-groups",     "soft-decay",       "sigma"};
  size_t found = 0;
  for (guint i = 0; i < n_props; ++i) {
    const std::string name = props[i]->name;
    if (std::find(ours.begin(), ours.end(), name) == ours.end()) continue;
    ++found;
    EXPECT_GT(strlen(g_param_spec_get_blurb(props[i])), 10u) << name;
    if (props[i]->flags & G_PARAM_WRITABLE) {
      EXPECT_TRUE(props[i]->flags & GST_PARAM_MUTABLE_PLAYING) << name;
    }
  }
  g_free(props);
  EXPECT_EQ(found, ours.size());
  gst_object_unref(e);
}

// Each NMS property changed while PLAYING takes effect on the next buffer.
TEST_F(CudaNmsElement, PropertiesChangedWhilePlaying) {
  start();
  std::mt19937_64 rng(run_seed() + 104);
  const CandidateSet set = tools::sliding_window_candidates(800, rng(), 4, kWidth, kHeight);
  Params p;
  ASSERT_TRUE(check(set, p));
  p.threshold = 0.3f;
  set_params(element_, p);
  ASSERT_TRUE(check(set, p));
  p.overlap = Overlap::kIoMin;
  set_params(element_, p);
  ASSERT_TRUE(check(set, p));
  p.method = Method::kMatrix;
  set_params(element_, p);
  ASSERT_TRUE(check(set, p));
  p.score_threshold = 0.5f;
  set_params(element_, p);
  ASSERT_TRUE(check(set, p));
  p.class_agnostic = true;
  set_params(element_, p);
  ASSERT_TRUE(check(set, p));
  p.max_candidates = 100;
  set_params(element_, p);
  ASSERT_TRUE(check(set, p));
  p.max_detections = 3;
  set_params(element_, p);
  ASSERT_TRUE(check(set, p));
  p = Params();
  set_params(element_, p);
  ASSERT_TRUE(check(set, p));
  // backend: auto on a host whose CUDA cannot be used runs on the CPU just the same.
  g_object_set(element_, "gpu-id", 0, NULL);
  gst_util_set_object_arg(G_OBJECT(element_), "backend", cuda_available() ? "cuda" : "auto");
  ASSERT_TRUE(check(set, p));
  gst_util_set_object_arg(G_OBJECT(element_), "backend", "cpu");
  ASSERT_TRUE(check(set, p));
}

// Properties set from another thread while frames flow: each frame sees one consistent value.
TEST_F(CudaNmsElement, PropertiesChangedFromAnotherThread) {
  start();
  std::mt19937_64 rng(run_seed() + 105);
  const CandidateSet set = clipped_to_frame(
      tools::sliding_window_candidates(500, rng(), 2, kWidth, kHeight), kWidth, kHeight);
  Params low, high;
  low.threshold = 0.3f;
  high.threshold = 0.7f;
  const Result want_low = library_result(set, low), want_high = library_result(set, high);
  ASSERT_NE(want_low.kept.size(), want_high.kept.size());
  g_object_set(element_, "iou-threshold", 0.7, NULL);
  std::atomic<bool> stop{false};
  std::thread setter([&] {
    for (int i = 0; !stop; ++i) g_object_set(element_, "iou-threshold", i % 2 ? 0.3 : 0.7, NULL);
  });
  size_t saw_low = 0, saw_high = 0;
  for (int i = 0; i < 300; ++i) {
    GstBuffer *out = process(packed_buffer(set));
    const ::testing::AssertionResult is_low = output_matches(out, set, want_low, kWidth, kHeight);
    if (is_low) {
      ++saw_low;
    } else {
      EXPECT_TRUE(output_matches(out, set, want_high, kWidth, kHeight))
          << "frame " << i << "; as low: " << is_low.message();
      ++saw_high;
    }
    gst_buffer_unref(out);
  }
  stop = true;
  setter.join();
  EXPECT_EQ(saw_low + saw_high, 300u);
}

TEST_F(CudaNmsElement, ReadOnlyTotals) {
  start();
  std::mt19937_64 rng(run_seed() + 106);
  guint64 in = 0, kept = 0;
  for (int i = 0; i < 20; ++i) {
    const CandidateSet set = tools::sliding_window_candidates(50 * i, rng(), 2, kWidth, kHeight);
    const Result want = library_result(clipped_to_frame(set, kWidth, kHeight), Params());
    in += want.counts.in;
    kept += want.counts.kept;
    gst_buffer_unref(process(packed_buffer(set)));
  }
  guint64 frames, candidates, detections;
  gdouble latency;
  g_object_get(element_, "frames", &frames, "candidates-total", &candidates, "detections-total",
               &detections, "last-latency-us", &latency, NULL);
  EXPECT_EQ(frames, 20u);
  EXPECT_EQ(candidates, in);
  EXPECT_EQ(detections, kept);
  EXPECT_GT(latency, 0.0);
  EXPECT_LT(latency, 1e6);
}

TEST_F(CudaNmsElement, LatencyIsInTheResultMeta) {
  start();
  std::mt19937_64 rng(run_seed() + 107);
  GstBuffer *out =
      process(packed_buffer(tools::sliding_window_candidates(2000, rng(), 1, kWidth, kHeight)));
  GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
  ASSERT_NE(r, nullptr);
  EXPECT_GT(r->latency_ns, 0u);
  EXPECT_LT(r->latency_ns, 10 * GST_SECOND);
  EXPECT_STREQ(r->backend, "cpu");
  gdouble last;
  g_object_get(element_, "last-latency-us", &last, NULL);
  EXPECT_DOUBLE_EQ(last, r->latency_ns / 1000.0);
  gst_buffer_unref(out);
}

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

TEST_F(CudaNmsElement, HugeFrameFarOverDmax) {
  start("backend=cpu max-candidates=64");
  std::mt19937_64 rng(run_seed() + 110);
  const CandidateSet set = tools::sliding_window_candidates(200000, rng(), 1, kWidth, kHeight);
  Params params;
  params.max_candidates = 64;
  EXPECT_TRUE(check(set, params));
}

// ---------------------------------------------------------------------------------------------
// Backends.

// A "CUDA" context for tests without a GPU: the CPU backend's results, reported as CUDA, and
// failing on demand from the given frame on.
// Many streams: one pipeline of `streams` branches appsrc ! cudanms ! appsink, each branch fed
// from a thread of its own, as pipelines/streams runs cameras.

// Every output is its own frame's library result (random methods and rules per stream), computed
// on `backend`; `properties` go to every cudanms.
void expect_streams_match_library(const std::string &properties, int streams, int frames,
                                  uint64_t seed, const char *backend) {
  std::string description;
  for (int k = 0; k < streams; ++k) {
    const std::string n = std::to_string(k);
    description += "appsrc name=src" + n + " format=time caps=" + kCaps + " ! cudanms name=nms" +
                   n + " " + properties + " ! appsink name=sink" + n + " sync=false ";
  }
  GError *error = nullptr;
  GstElement *pipeline = gst_parse_launch(description.c_str(), &error);
  ASSERT_NE(pipeline, nullptr) << (error ? error->message : "");
  ASSERT_NE(gst_element_set_state(pipeline, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  std::vector<RandomCase> cases;
  for_each_random_case(seed, 1, 400, [&](const RandomCase &c) {
    if (c.params.max_candidates >= c.set.size()) cases.push_back(c);  // no capacity warnings
  });
  std::vector<std::thread> threads;
  for (int k = 0; k < streams; ++k) {
    threads.emplace_back([&, k] {
      const std::string n = std::to_string(k);
      GstElement *src = gst_bin_get_by_name(GST_BIN(pipeline), ("src" + n).c_str());
      GstElement *sink = gst_bin_get_by_name(GST_BIN(pipeline), ("sink" + n).c_str());
      GstElement *nms = gst_bin_get_by_name(GST_BIN(pipeline), ("nms" + n).c_str());
      for (int i = 0; i < frames; ++i) {
        const RandomCase &c = cases[(size_t(k) * frames + i) % cases.size()];
        set_params(nms, c.params);
        GstBuffer *buf = packed_buffer(c.set);
        GST_BUFFER_PTS(buf) = i * GST_SECOND / 30;
        ASSERT_EQ(gst_app_src_push_buffer(GST_APP_SRC(src), buf), GST_FLOW_OK);
        GstSample *sample = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), 10 * GST_SECOND);
        ASSERT_NE(sample, nullptr) << "stream " << k << " frame " << i;
        GstBuffer *out = gst_sample_get_buffer(sample);
        const CandidateSet clipped = clipped_to_frame(c.set, kWidth, kHeight);
        EXPECT_TRUE(
            output_matches(out, clipped, library_result(clipped, c.params), kWidth, kHeight))
            << "stream " << k << " frame " << i << ": " << c.description;
        EXPECT_STREQ(gst_buffer_get_cuda_nms_result_meta(out)->backend, backend);
        gst_sample_unref(sample);
      }
      gst_object_unref(nms);
      gst_object_unref(sink);
      gst_object_unref(src);
    });
  }
  for (std::thread &t : threads) t.join();
  GstBus *bus = gst_element_get_bus(pipeline);
  while (GstMessage *m = gst_bus_pop_filtered(
             bus, static_cast<GstMessageType>(GST_MESSAGE_ERROR | GST_MESSAGE_WARNING))) {
    GError *e = nullptr;
    if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR) gst_message_parse_error(m, &e, nullptr);
    if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING) gst_message_parse_warning(m, &e, nullptr);
    ADD_FAILURE() << GST_MESSAGE_TYPE_NAME(m) << ": " << (e ? e->message : "?");
    g_clear_error(&e);
    gst_message_unref(m);
  }
  gst_object_unref(bus);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
}

class FakeCudaContext : public Context {
 public:
  static std::atomic<int> fail_from_frame;
  static std::atomic<int> created;
  static std::atomic<int> runs;
  static std::atomic<int> batched;       // frames that ran in batches of more than one
  static std::atomic<int> run_delay_us;  // each frame's run takes at least this long
  // Which context (1 for the first made) ran the last host frame, the last device frame.
  static std::atomic<int> last_host_runner;
  static std::atomic<int> last_device_runner;
  // The stand-in CUcontext of every fake context: device candidates naming it run in place, on
  // "device memory" that is host memory.
  static int device;

  FakeCudaContext(std::unique_ptr<Context> cpu, int id) : cpu_(std::move(cpu)), id_(id) {}
  Backend backend() const override { return Backend::kCuda; }
  std::string device_name() const override { return "cuda:fake"; }
  void *cuda_context() const override { return &device; }

 private:
  Status run_device_checked(const DeviceCandidatesView &c, const Params &p, Result *r) override {
    last_device_runner = id_;
    const Status s = cpu_->run({c.boxes, c.scores, c.class_ids, *c.count}, p, r);
    for (uint32_t k : r->kept) {  // the kept values come back with device candidates
      r->kept_boxes.insert(r->kept_boxes.end(), c.boxes + 4 * k, c.boxes + 4 * k + 4);
      r->kept_scores.push_back(c.scores[k]);
      r->kept_class_ids.push_back(c.class_ids ? c.class_ids[k] : 0);
    }
    return s;
  }
  Status run_checked(const CandidatesView &c, const Params &p, Result *r) override {
    last_host_runner = id_;
    const int frame = runs++;
    if (fail_from_frame >= 0 && frame >= fail_from_frame)
      return Status::Error("cudaErrorLaunchFailure (injected)");
    std::this_thread::sleep_for(std::chrono::microseconds(run_delay_us));
    return cpu_->run(c, p, r);
  }
  Status run_batch_checked(const std::vector<Frame> &frames,
                           std::vector<Result> *results) override {
    if (frames.size() > 1) batched += static_cast<int>(frames.size());
    for (size_t k = 0; k < frames.size(); ++k) {
      const Status s = run_checked(frames[k].candidates, frames[k].params, &(*results)[k]);
      if (!s.ok()) return s;
    }
    return Status::Ok();
  }
  std::unique_ptr<Context> cpu_;
  int id_;
};
std::atomic<int> FakeCudaContext::fail_from_frame{-1};
std::atomic<int> FakeCudaContext::last_host_runner{0};
std::atomic<int> FakeCudaContext::last_device_runner{0};
int FakeCudaContext::device = 0;
std::atomic<int> FakeCudaContext::created{0};
std::atomic<int> FakeCudaContext::runs{0};
std::atomic<int> FakeCudaContext::batched{0};
std::atomic<int> FakeCudaContext::run_delay_us{0};

class FakeCuda : public CudaNmsElement {
 protected:
  void SetUp() override {
    CudaNmsElement::SetUp();
    FakeCudaContext::fail_from_frame = -1;
    FakeCudaContext::created = 0;
    FakeCudaContext::runs = 0;
    FakeCudaContext::batched = 0;
    FakeCudaContext::run_delay_us = 0;
    FakeCudaContext::last_host_runner = 0;
    FakeCudaContext::last_device_runner = 0;
    GstCudaNmsBackendHooks fake = {
        [](std::string *) { return true; },
        [](const ContextOptions &options, Status *status) -> std::unique_ptr<Context> {
          const int id = ++FakeCudaContext::created;
          ContextOptions cpu = options;
          cpu.backend = Backend::kCpu;
          return std::make_unique<FakeCudaContext>(Context::create(cpu, status), id);
        }};
    previous_ = gst_cuda_nms_set_backend_hooks_for_testing(&fake);
  }
  void TearDown() override {
    CudaNmsElement::TearDown();
    gst_cuda_nms_set_backend_hooks_for_testing(&previous_);
  }
  GstCudaNmsBackendHooks previous_;
};

TEST_F(FakeCuda, CudaFailureMidStreamWarnsOnceAndFallsBackToCpu) {
  FakeCudaContext::fail_from_frame = 3;
  start("backend=cuda");
  EXPECT_EQ(FakeCudaContext::created, 1);
  std::mt19937_64 rng(run_seed() + 111);
  for (int frame = 0; frame < 10; ++frame) {
    const CandidateSet set = tools::sliding_window_candidates(400, rng(), 2, kWidth, kHeight);
    GstBuffer *out = process(packed_buffer(set));
    ASSERT_NE(out, nullptr);
    const CandidateSet clipped = clipped_to_frame(set, kWidth, kHeight);
    EXPECT_TRUE(output_matches(out, clipped, library_result(clipped, Params()), kWidth, kHeight))
        << "frame " << frame;
    EXPECT_STREQ(gst_buffer_get_cuda_nms_result_meta(out)->backend, frame < 3 ? "cuda" : "cpu");
    gst_buffer_unref(out);
  }
  std::vector<std::string> texts;
  EXPECT_EQ(pop_messages(GST_MESSAGE_WARNING, &texts), 1u);
  ASSERT_EQ(texts.size(), 1u);
  EXPECT_NE(texts[0].find("injected"), std::string::npos) << texts[0];
  EXPECT_EQ(pop_messages(GST_MESSAGE_ERROR), 0u);
  guint64 frames;
  g_object_get(element_, "frames", &frames, NULL);
  EXPECT_EQ(frames, 10u);
}

TEST_F(FakeCuda, BackendAndGpuIdChangesRecreateTheContext) {
  start("backend=cpu");
  CandidateSet set;
  set.add(10, 10, 50, 50, 0.9f);
  auto backend_of_next = [&] {
    GstBuffer *out = process(packed_buffer(set));
    std::string b = gst_buffer_get_cuda_nms_result_meta(out)->backend;
    gst_buffer_unref(out);
    return b;
  };
  EXPECT_EQ(backend_of_next(), "cpu");
  EXPECT_EQ(FakeCudaContext::created, 0);
  gst_util_set_object_arg(G_OBJECT(element_), "backend", "cuda");
  EXPECT_EQ(backend_of_next(), "cuda");
  EXPECT_EQ(FakeCudaContext::created, 1);
  EXPECT_EQ(backend_of_next(), "cuda");
  EXPECT_EQ(FakeCudaContext::created, 1);  // reused per frame
  g_object_set(element_, "gpu-id", 1, NULL);
  EXPECT_EQ(backend_of_next(), "cuda");
  EXPECT_EQ(FakeCudaContext::created, 2);
  gst_util_set_object_arg(G_OBJECT(element_), "backend", "auto");
  EXPECT_EQ(backend_of_next(), "cuda");
  EXPECT_EQ(FakeCudaContext::created, 3);
  gst_util_set_object_arg(G_OBJECT(element_), "backend", "cpu");
  EXPECT_EQ(backend_of_next(), "cpu");
  EXPECT_EQ(pop_messages(GST_MESSAGE_WARNING), 0u);
}

// Elements with batch-streams=true share one context: frames that meet there (each run made to
// take 2 ms) go as one batch, and each stream still gets its own frames' results.
TEST_F(FakeCuda, BatchStreamsShareOneContextAndBatchTheirFrames) {
  FakeCudaContext::run_delay_us = 2000;
  expect_streams_match_library("backend=cuda batch-streams=true", 4, 25, run_seed() + 113, "cuda");
  EXPECT_EQ(FakeCudaContext::created, 1);
  EXPECT_GT(FakeCudaContext::batched, 0);
}

TEST_F(FakeCuda, WithoutBatchStreamsEachElementHasItsOwnContext) {
  FakeCudaContext::run_delay_us = 2000;
  expect_streams_match_library("backend=cuda", 3, 10, run_seed() + 114, "cuda");
  EXPECT_EQ(FakeCudaContext::created, 3);
  EXPECT_EQ(FakeCudaContext::batched, 0);
}

// Device candidates (cudacascade's) do not batch: with batch-streams they run in place on a
// context of the element's own, made at the first of them, not in turn with the other streams'
// frames on the shared one; host frames go on to the shared one.
TEST_F(FakeCuda, BatchStreamsRunDeviceCandidatesOnTheElementsOwnContext) {
  std::mt19937_64 rng(run_seed() + 117);
  const CandidateSet set = integer_boxes_in_frame(
      tools::sliding_window_candidates(300, rng(), 3, kWidth, kHeight), kWidth, kHeight);
  const guint32 count = static_cast<guint32>(set.size());
  const Result want = library_result(set, Params());
  auto device_frame = [&] {
    GstBuffer *in = gst_buffer_new();
    GstCudaNmsDeviceCandidates *dc = gst_cuda_nms_device_candidates_new();
    dc->cuda_context = &FakeCudaContext::device;
    dc->boxes = set.boxes.data();
    dc->scores = set.scores.data();
    dc->class_ids = set.classes.data();
    dc->count = &count;
    dc->capacity = count;
    dc->download = download_set;
    dc->user_data = const_cast<CandidateSet *>(&set);
    EXPECT_TRUE(gst_cuda_nms_candidates_meta_set_device(
        gst_buffer_add_cuda_nms_candidates_meta(in, 0), dc));
    return in;
  };
  start("backend=cuda batch-streams=true keep-candidates=true");
  EXPECT_EQ(FakeCudaContext::created, 1);
  for (int round = 0; round < 2; ++round) {
    GstBuffer *out = process(packed_buffer(set));
    EXPECT_TRUE(output_matches(out, set, want, kWidth, kHeight));
    EXPECT_EQ(FakeCudaContext::last_host_runner, 1) << "round " << round;
    gst_buffer_unref(out);
    out = process(device_frame());
    EXPECT_TRUE(output_matches(out, set, want, kWidth, kHeight));
    EXPECT_EQ(gst_buffer_get_cuda_nms_candidates_meta(out)->downloads, 0u);  // in place
    EXPECT_EQ(FakeCudaContext::last_device_runner, 2) << "round " << round;
    EXPECT_EQ(FakeCudaContext::created, 2) << "round " << round;
    gst_buffer_unref(out);
  }
  // Without batch-streams the element's one context takes both.
  g_object_set(element_, "batch-streams", FALSE, NULL);
  gst_buffer_unref(process(device_frame()));
  EXPECT_EQ(FakeCudaContext::created, 3);
  EXPECT_EQ(FakeCudaContext::last_device_runner, 3);
  gst_buffer_unref(process(packed_buffer(set)));
  EXPECT_EQ(FakeCudaContext::last_host_runner, 3);
  EXPECT_EQ(pop_messages(GST_MESSAGE_WARNING), 0u);
}

// The CPU backend gains nothing from one context: each element keeps its own, in parallel.
TEST_F(FakeCuda, BatchStreamsLeaveTheCpuBackendAlone) {
  expect_streams_match_library("backend=cpu batch-streams=true", 3, 10, run_seed() + 116, "cpu");
  EXPECT_EQ(FakeCudaContext::created, 0);
}

// The registry behind batch-streams: one context per GPU, CUDA context and time-gpu, made once
// and gone with its last holder.
TEST(SharedNmsContexts, OnePerDeviceCudaContextAndTiming) {
  int made = 0;
  const NmsContextFactory factory = [&made](const ContextOptions &, Status *status) {
    ++made;
    ContextOptions cpu;
    cpu.backend = Backend::kCpu;
    return Context::create(cpu, status);
  };
  Status status;
  ContextOptions options;
  int cuda_context = 0;  // a stand-in CUcontext
  auto first = gst_cuda_nms_shared_context(options, &cuda_context, factory, &status);
  ASSERT_NE(first, nullptr) << status.message();
  EXPECT_EQ(gst_cuda_nms_shared_context(options, &cuda_context, factory, &status), first);
  EXPECT_EQ(made, 1);
  ContextOptions timed = options;
  timed.time_device = true;
  ContextOptions other_gpu = options;
  other_gpu.device = 1;
  int other_cuda_context = 0;
  auto a = gst_cuda_nms_shared_context(timed, &cuda_context, factory, &status);
  auto b = gst_cuda_nms_shared_context(other_gpu, &cuda_context, factory, &status);
  auto c = gst_cuda_nms_shared_context(options, &other_cuda_context, factory, &status);
  EXPECT_EQ(made, 4);
  EXPECT_NE(a, first);
  EXPECT_NE(b, first);
  EXPECT_NE(c, first);
  first.reset();  // the last holder: the next asks for a new one
  EXPECT_NE(gst_cuda_nms_shared_context(options, &cuda_context, factory, &status), nullptr);
  EXPECT_EQ(made, 5);
  // A factory that fails: no context, its status, and nothing kept.
  const NmsContextFactory failing = [](const ContextOptions &, Status *s) {
    *s = Status::Error("no device (injected)");
    return std::unique_ptr<Context>();
  };
  ContextOptions fourth = options;
  fourth.device = 3;
  EXPECT_EQ(gst_cuda_nms_shared_context(fourth, nullptr, failing, &status), nullptr);
  EXPECT_EQ(status.message(), "no device (injected)");
  EXPECT_NE(gst_cuda_nms_shared_context(fourth, nullptr, factory, &status), nullptr);
}

// Without a usable device (the real check): auto warns once and runs on the CPU.
TEST_F(CudaNmsElement, AutoWithoutCudaWarnsOnceAndRunsOnCpu) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is usable here";
  start("backend=auto");
  CandidateSet set;
  set.add(10, 10, 50, 50, 0.9f);
  for (int i = 0; i < 5; ++i) {
    GstBuffer *out = process(packed_buffer(set));
    EXPECT_STREQ(gst_buffer_get_cuda_nms_result_meta(out)->backend, "cpu");
    gst_buffer_unref(out);
  }
  std::vector<std::string> texts;
  EXPECT_EQ(pop_messages(GST_MESSAGE_WARNING, &texts), 1u);
  for (const auto &t : texts) EXPECT_NE(t.find("CPU"), std::string::npos) << t;
}

// backend=cuda without a usable device: an element error at the state change, no crash.
TEST_F(CudaNmsElement, CudaWithoutDeviceFailsTheStateChange) {
  std::string why;
  GstElement *e = gst_element_factory_make("cudanms", nullptr);
  gst_object_ref_sink(e);
  gst_util_set_object_arg(G_OBJECT(e), "backend", "cuda");
  const bool usable = cuda_available(&why);
  if (usable) g_object_set(e, "gpu-id", 1000, NULL);  // a device that is not there
  GstBus *bus = gst_bus_new();
  gst_element_set_bus(e, bus);
  EXPECT_EQ(gst_element_set_state(e, GST_STATE_PAUSED), GST_STATE_CHANGE_FAILURE);
  GstMessage *m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR);
  ASSERT_NE(m, nullptr);
  GError *error = nullptr;
  gchar *debug = nullptr;
  gst_message_parse_error(m, &error, &debug);
  EXPECT_NE(std::string(error->message).find("backend=cuda"), std::string::npos) << error->message;
  g_error_free(error);
  g_free(debug);
  gst_message_unref(m);
  gst_element_set_state(e, GST_STATE_NULL);
  gst_bus_set_flushing(bus, TRUE);
  gst_object_unref(bus);
  gst_object_unref(e);
}

// backend=cuda chosen while playing, with no usable device: a flow error, no crash.
TEST_F(CudaNmsElement, SwitchingToCudaWithoutDeviceIsAFlowError) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is usable here";
  start("backend=cpu");
  gst_util_set_object_arg(G_OBJECT(element_), "backend", "cuda");
  EXPECT_EQ(gst_harness_push(h_, packed_buffer(CandidateSet())), GST_FLOW_ERROR);
  EXPECT_EQ(pop_messages(GST_MESSAGE_ERROR), 1u);
}

// The real CUDA path: only on a host with a usable device.
TEST_F(CudaNmsElement, CudaPathMatchesLibrary) {
  std::string why;
  if (!cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  start("backend=cuda");
  size_t cases = 0;
  for_each_random_case(run_seed() + 112, 1, 300, [&](const RandomCase &c) {
    ++cases;
    set_params(element_, c.params);
    GstBuffer *out = process(packed_buffer(c.set));
    ASSERT_NE(out, nullptr);
    GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(out);
    ASSERT_NE(r, nullptr);
    ASSERT_STREQ(r->backend, "cuda") << c.description;  // it ran on the GPU, no fallback
    const CandidateSet clipped = clipped_to_frame(c.set, kWidth, kHeight);
    ASSERT_TRUE(output_matches(out, clipped, library_result(clipped, c.params), kWidth, kHeight))
        << c.description;
    gst_buffer_unref(out);
  });
  EXPECT_GT(cases, 400u / random_case_stride());
  // Random cases cap Dmax below n now and then, which rightly warns; nothing may say CUDA failed.
  std::vector<std::string> warnings;
  pop_messages(GST_MESSAGE_WARNING, &warnings);
  for (const std::string &w : warnings) EXPECT_EQ(w.find("CUDA"), std::string::npos) << w;
  EXPECT_EQ(pop_messages(GST_MESSAGE_ERROR), 0u);
}

// Eight streams with batch-streams=true on the GPU: one context, frames batched as they meet,
// every output its own frame's library result.
TEST_F(CudaNmsElement, CudaBatchStreamsMatchLibrary) {
  std::string why;
  if (!cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  expect_streams_match_library("backend=cuda batch-streams=true", 8, 60, run_seed() + 115, "cuda");
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
