// The labels of the cudanms element's kept boxes (cudanmslabels.h): class ids, the detector's
// label events, the labels and labels-file properties.
#include "cudanms_fixture.h"

namespace cudanms::testing {
namespace {

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
  const LabelsFile names("cat\n dog \n");
  start("backend=cpu labels-file=" + names.path());
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

}  // namespace
}  // namespace cudanms::testing
