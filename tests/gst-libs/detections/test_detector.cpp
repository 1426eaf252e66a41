// GstCudaNmsDetector, the detectors' base class, through a subclass of the test's own: the
// shared properties as a subclass installs them (its defaults applied), the labels it announces,
// and a GPU failing mid-stream: told as the cudanms-gpu-failed message, then the frame detected
// again on the CPU, or the stream stopped where the subclass cannot fall back.
#include <glib/gstdio.h>
#include <gst/check/gstharness.h>
#include <gst/cudanms/cudanmsmeta.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "detections.h"
#include "gpufailure.h"
#include "gstcudanmsdetector.h"
#include "labels.h"
#include "propertytable.h"

G_BEGIN_DECLS
#define TEST_TYPE_DETECTOR (test_detector_get_type())
G_DECLARE_FINAL_TYPE(TestDetector, test_detector, TEST, DETECTOR, GstCudaNmsDetector)
G_END_DECLS

// What the fake GPU does; set by each test before it starts the element.
struct FakeGpu {
  int fail_on_frame = -1;     // the frame (from 0) whose detection fails on the GPU; -1: none
  bool can_fall_back = true;  // whether the subclass can move to the CPU
};
FakeGpu fake_gpu;

struct _TestDetector {
  GstCudaNmsDetector parent;
  int frames;
  int cpu_frames;
  guint boxes_per_frame;  // its own property's, under the base's lock
};

G_DEFINE_TYPE(TestDetector, test_detector, GST_TYPE_CUDA_NMS_DETECTOR)

int fake_cuda_context;  // its address stands for a CUcontext no buffer's memory is in

static gboolean open_detector(GstCudaNmsDetector *self, const GstCudaNmsDetectorSettings &s) {
  TEST_DETECTOR(self)->frames = TEST_DETECTOR(self)->cpu_frames = 0;
  const bool cuda = s.backend != GST_CUDA_NMS_BACKEND_CPU;
  gst_cuda_nms_detector_set_device(self, cuda ? "cuda:fake" : "cpu",
                                   cuda ? &fake_cuda_context : nullptr);
  return TRUE;
}

static void close_detector(GstCudaNmsDetector *) {}

// boxes-per-frame candidates a frame, scored with the threshold, of class-id.
static GstCudaNmsDetection detect_on_host(GstCudaNmsDetector *self, GstBuffer *buffer,
                                          GstVideoFrame *, const GstCudaNmsDetectorSettings &s) {
  TestDetector *test = TEST_DETECTOR(self);
  if (gst_cuda_nms_detector_on_cuda(self) && test->frames == fake_gpu.fail_on_frame)
    return GstCudaNmsDetection::gpu_failed("an illegal memory access was encountered (fake)");
  test->frames++;
  if (!gst_cuda_nms_detector_on_cuda(self)) test->cpu_frames++;
  guint n = 0;
  {
    auto lock = gst_cuda_nms_detector_lock(self);
    n = test->boxes_per_frame;
  }
  std::vector<float> boxes, scores;
  for (guint i = 0; i < n; ++i) {
    boxes.insert(boxes.end(), {1, 2, 11, 12});
    scores.push_back(static_cast<float>(s.threshold));
  }
  gst_cv_attach_candidates(buffer, boxes, scores, s.detected.class_id);
  return GstCudaNmsDetection::done();
}

static gboolean fall_back_to_cpu(GstCudaNmsDetector *self, const GstCudaNmsDetectorSettings &) {
  if (!fake_gpu.can_fall_back) return FALSE;
  gst_cuda_nms_detector_set_device(self, "cpu", nullptr);
  return TRUE;
}

static std::string default_label(GstCudaNmsDetector *, const GstCudaNmsDetectorSettings &) {
  return "thing";
}

static void test_detector_class_init(TestDetectorClass *klass) {
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstCudaNmsDetectorClass *detector_class = GST_CUDA_NMS_DETECTOR_CLASS(klass);
  GstCudaNmsDetectorProperties shared;
  shared.label_blurb = "label";
  shared.threshold_name = "hit-threshold";
  shared.threshold_blurb = "threshold";
  shared.threshold_min = -10, shared.threshold_max = 10, shared.threshold_default = 0.25;
  shared.labels_file_blurb = "labels";
  shared.backend_blurb = "backend";
  shared.device_candidates_blurb = "device candidates";
  gst_cuda_nms_detector_class_install_properties(detector_class, shared);
  // Its own property, declared as any element declares one; the shared ones are the base's.
  PropertyTable<TestDetector>(
      gobject_class,
      [](GObject *object) {
        return Locked<TestDetector>{TEST_DETECTOR(object), gst_cuda_nms_detector_mutex(object)};
      })
      .field(
          g_param_spec_uint("boxes-per-frame", "Boxes per frame", "Candidates a frame", 0, 8, 1,
                            static_cast<GParamFlags>(G_PARAM_READWRITE | GST_PARAM_MUTABLE_PLAYING |
                                                     G_PARAM_STATIC_STRINGS)),
          [](auto &s) -> auto & { return s.boxes_per_frame; });
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  gst_element_class_set_static_metadata(element_class, "Test detector", "Filter/Analyzer/Video",
                                        "The base class's test subclass", "cudanms");
  GstCaps *caps = gst_caps_from_string("video/x-raw,format=GRAY8");
  gst_element_class_add_pad_template(
      element_class, gst_pad_template_new("sink", GST_PAD_SINK, GST_PAD_ALWAYS, caps));
  gst_element_class_add_pad_template(
      element_class, gst_pad_template_new("src", GST_PAD_SRC, GST_PAD_ALWAYS, caps));
  gst_caps_unref(caps);
  detector_class->open = open_detector;
  detector_class->close = close_detector;
  detector_class->detect_on_host = detect_on_host;
  detector_class->fall_back_to_cpu = fall_back_to_cpu;
  detector_class->default_label = default_label;
}

static void test_detector_init(TestDetector *self) { self->boxes_per_frame = 1; }

namespace {

class Detector : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    gst_init(nullptr, nullptr);
    gst_element_register(nullptr, "testdetector", GST_RANK_NONE, TEST_TYPE_DETECTOR);
  }
  void SetUp() override { fake_gpu = FakeGpu(); }
  void TearDown() override { stop(); }

  // A new element with a bus of its own; the caller sets its properties, then start()s it.
  GstElement *make() {
    stop();
    element_ = GST_ELEMENT(gst_object_ref_sink(gst_element_factory_make("testdetector", nullptr)));
    bus_ = gst_bus_new();
    gst_element_set_bus(element_, bus_);
    return element_;
  }
  // The harness plays it.
  void start() {
    harness_ = gst_harness_new_with_element(element_, "sink", "src");
    gst_harness_set_src_caps_str(harness_,
                                 "video/x-raw,format=GRAY8,width=16,height=16,framerate=10/1");
  }
  void stop() {
    if (harness_) gst_harness_teardown(harness_);
    if (element_) {
      gst_element_set_state(element_, GST_STATE_NULL);
      gst_object_unref(element_);
    }
    if (bus_) gst_object_unref(bus_);
    harness_ = nullptr;
    element_ = nullptr;
    bus_ = nullptr;
  }
  GstFlowReturn push_frame() {
    return gst_harness_push(harness_, gst_buffer_new_allocate(nullptr, 256, nullptr));
  }

  // The messages of @type on the element's bus so far.
  std::vector<GstMessage *> messages(GstMessageType type) {
    std::vector<GstMessage *> found;
    while (GstMessage *m = gst_bus_pop(bus_)) {
      if (GST_MESSAGE_TYPE(m) & type)
        found.push_back(m);
      else
        gst_message_unref(m);
    }
    return found;
  }

  GstElement *element_ = nullptr;
  GstHarness *harness_ = nullptr;
  GstBus *bus_ = nullptr;
};

std::string string_property(GstElement *element, const char *name) {
  gchar *value = nullptr;
  g_object_get(element, name, &value, NULL);
  std::string text = value ? value : "";
  g_free(value);
  return text;
}

TEST_F(Detector, TheSubclassDefaultsAreApplied) {
  GstElement *element = make();
  gdouble threshold = 0;
  g_object_get(element, "hit-threshold", &threshold, NULL);
  EXPECT_DOUBLE_EQ(threshold, 0.25);
  EXPECT_EQ(string_property(element, "label"), "");
  EXPECT_EQ(string_property(element, "device"), "");
  EXPECT_EQ(g_object_class_find_property(G_OBJECT_GET_CLASS(element), "score-threshold"), nullptr);
}

// A subclass's own property beside the shared ones: each reads back, and the frame has both.
TEST_F(Detector, ASubclassesOwnPropertySitsBesideTheSharedOnes) {
  GstElement *element = make();
  g_object_set(element, "boxes-per-frame", 3u, "hit-threshold", 0.5, "label", "cell", NULL);
  guint boxes = 0;
  gdouble threshold = 0;
  g_object_get(element, "boxes-per-frame", &boxes, "hit-threshold", &threshold, NULL);
  EXPECT_EQ(boxes, 3u);
  EXPECT_DOUBLE_EQ(threshold, 0.5);
  EXPECT_EQ(string_property(element, "label"), "cell");
  start();
  ASSERT_EQ(push_frame(), GST_FLOW_OK);
  GstBuffer *out = gst_harness_pull(harness_);
  GstCudaNmsCandidatesMeta *meta = gst_buffer_get_cuda_nms_candidates_meta(out);
  ASSERT_NE(meta, nullptr);
  EXPECT_EQ(meta->n, 3u);
  EXPECT_FLOAT_EQ(meta->scores[2], 0.5f);
  gst_buffer_unref(out);
}

// Frames share one copy of the settings until a property changes: the next frame has the new
// value, and so do the ones after it.
TEST_F(Detector, APropertyChangedWhilePlayingReachesTheNextFrame) {
  GstElement *element = make();
  start();
  auto next_score = [&] {
    EXPECT_EQ(push_frame(), GST_FLOW_OK);
    GstBuffer *out = gst_harness_pull(harness_);
    GstCudaNmsCandidatesMeta *meta = gst_buffer_get_cuda_nms_candidates_meta(out);
    const float score = meta && meta->n == 1 ? meta->scores[0] : -1.0f;
    gst_buffer_unref(out);
    return score;
  };
  EXPECT_FLOAT_EQ(next_score(), 0.25f);
  EXPECT_FLOAT_EQ(next_score(), 0.25f);
  g_object_set(element, "hit-threshold", 0.5, NULL);
  EXPECT_FLOAT_EQ(next_score(), 0.5f);
  EXPECT_FLOAT_EQ(next_score(), 0.5f);
  g_object_set(element, "hit-threshold", -1.0, NULL);
  EXPECT_FLOAT_EQ(next_score(), -1.0f);
}

TEST_F(Detector, AGpuFailureIsToldThenTheFrameIsDetectedOnTheCpu) {
  fake_gpu.fail_on_frame = 2;
  GstElement *element = make();
  g_object_set(element, "gpu-id", 3, "class-id", 5, NULL);
  start();
  EXPECT_EQ(string_property(element, "device"), "cuda:fake");
  for (int i = 0; i < 4; i++) {
    ASSERT_EQ(push_frame(), GST_FLOW_OK) << "frame " << i;
    GstBuffer *out = gst_harness_pull(harness_);
    GstCudaNmsCandidatesMeta *meta = gst_buffer_get_cuda_nms_candidates_meta(out);
    ASSERT_NE(meta, nullptr) << "frame " << i;  // every frame, the failing one too
    EXPECT_EQ(meta->n, 1u);
    gst_buffer_unref(out);
  }
  EXPECT_EQ(string_property(element, "device"), "cpu");
  EXPECT_EQ(TEST_DETECTOR(element)->cpu_frames, 2);  // the failing frame and the next

  std::vector<GstMessage *> told =
      messages(GstMessageType(GST_MESSAGE_ELEMENT | GST_MESSAGE_WARNING | GST_MESSAGE_ERROR));
  int gpu_failed = 0, warnings = 0, errors = 0;
  for (GstMessage *m : told) {
    int gpu = -1;
    std::string error;
    if (gst_cv_parse_gpu_failed(m, &gpu, &error)) {
      gpu_failed++;
      EXPECT_EQ(gpu, 3);
      EXPECT_NE(error.find("illegal memory access"), std::string::npos) << error;
    }
    warnings += GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING;
    errors += GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR;
    gst_message_unref(m);
  }
  EXPECT_EQ(gpu_failed, 1);
  EXPECT_EQ(warnings, 1);
  EXPECT_EQ(errors, 0);
}

TEST_F(Detector, WithoutAFallbackAGpuFailureStopsTheStream) {
  fake_gpu.fail_on_frame = 0;
  fake_gpu.can_fall_back = false;
  make();
  start();
  EXPECT_EQ(push_frame(), GST_FLOW_ERROR);
  int gpu_failed = 0, errors = 0;
  for (GstMessage *m : messages(GstMessageType(GST_MESSAGE_ELEMENT | GST_MESSAGE_ERROR))) {
    gpu_failed += gst_cv_parse_gpu_failed(m, nullptr, nullptr);
    errors += GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR;
    gst_message_unref(m);
  }
  EXPECT_EQ(gpu_failed, 1);
  EXPECT_EQ(errors, 1);
}

TEST_F(Detector, OnTheCpuBackendNothingIsToldAndNoContextIsUsed) {
  fake_gpu.fail_on_frame = 0;  // only a detector on CUDA can fail so
  GstElement *element = make();
  gst_util_set_object_arg(G_OBJECT(element), "backend", "cpu");
  start();
  EXPECT_EQ(push_frame(), GST_FLOW_OK);
  EXPECT_EQ(string_property(element, "device"), "cpu");
  gst_buffer_unref(gst_harness_pull(harness_));
  EXPECT_TRUE(messages(GstMessageType(GST_MESSAGE_ELEMENT | GST_MESSAGE_WARNING)).empty());
}

// The labels the element announces before its first frame, by class id.
std::vector<std::pair<int, std::string>> announced(GstHarness *harness) {
  std::vector<std::pair<int, std::string>> labels;
  while (GstEvent *event = gst_harness_try_pull_event(harness)) {
    gint class_id = -1;
    std::string label;
    if (gst_cv_label_event_parse(event, &class_id, &label)) labels.emplace_back(class_id, label);
    gst_event_unref(event);
  }
  return labels;
}

TEST_F(Detector, ItAnnouncesTheLabelTheDefaultLabelOrTheLabelsFile) {
  using Labels = std::vector<std::pair<int, std::string>>;
  {
    GstElement *element = make();
    g_object_set(element, "class-id", 2, NULL);
    start();
    ASSERT_EQ(push_frame(), GST_FLOW_OK);
    gst_buffer_unref(gst_harness_pull(harness_));
    EXPECT_EQ(announced(harness_), (Labels{{2, "thing"}}));
    g_object_set(element, "label", "widget", NULL);  // changed while playing: announced again
    ASSERT_EQ(push_frame(), GST_FLOW_OK);
    gst_buffer_unref(gst_harness_pull(harness_));
    EXPECT_EQ(announced(harness_), (Labels{{2, "widget"}}));
  }
  gchar *path = nullptr;
  const gint fd = g_file_open_tmp("labels-XXXXXX.txt", &path, nullptr);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_TRUE(g_file_set_contents(path, "person\n\ncar\r\n", -1, nullptr));
  GstElement *element = make();
  g_object_set(element, "labels-file", path, "label", "ignored", NULL);
  start();
  ASSERT_EQ(push_frame(), GST_FLOW_OK);
  gst_buffer_unref(gst_harness_pull(harness_));
  EXPECT_EQ(announced(harness_), (Labels{{0, "person"}, {2, "car"}}));
  g_remove(path);
  g_free(path);
}

TEST_F(Detector, AnUnreadableLabelsFileFailsTheStart) {
  GstElement *element = make();
  g_object_set(element, "labels-file", "/nonexistent/labels.txt", NULL);
  EXPECT_EQ(gst_element_set_state(element, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  std::vector<GstMessage *> errors = messages(GST_MESSAGE_ERROR);  // the one of its start
  ASSERT_EQ(errors.size(), 1u);
  GError *error = nullptr;
  gst_message_parse_error(errors[0], &error, nullptr);
  EXPECT_NE(std::string(error->message).find("/nonexistent/labels.txt"), std::string::npos);
  g_clear_error(&error);
  gst_message_unref(errors[0]);
}

}  // namespace
