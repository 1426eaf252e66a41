// boxcount behind cudanms ! boxtrack: its settings' errors as a user meets them, the counts meta,
// the counts property, normalized lines, the class filter, and inputs it must survive.
#include <gtest/gtest.h>

#include "track_support.h"

namespace cudanms::testing {
namespace {

// The error a pipeline with this boxcount posts when it starts; "" when it starts.
std::string start_error(const std::string &count) {
  init_track_elements_once();
  GstElement *pipeline = gst_parse_launch(
      ("videotestsrc num-buffers=2 ! video/x-raw,width=64,height=48 ! " + count + " ! fakesink")
          .c_str(),
      nullptr);
  EXPECT_NE(pipeline, nullptr);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstBus *bus = gst_element_get_bus(pipeline);
  std::string text;
  GstMessage *m = gst_bus_timed_pop_filtered(
      bus, 10 * GST_SECOND, static_cast<GstMessageType>(GST_MESSAGE_ERROR | GST_MESSAGE_EOS));
  if (m && GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR) {
    GError *error = nullptr;
    gst_message_parse_error(m, &error, nullptr);
    text = error->message;
    g_clear_error(&error);
  }
  if (m) gst_message_unref(m);
  gst_object_unref(bus);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
  return text;
}

TEST(BoxCount, GarbageLinesAndZonesAreClearErrors) {
  EXPECT_EQ(start_error("boxcount lines=\"door:1,2,3\""),
            "Invalid lines: line \"door\": needs 4 numbers x1,y1,x2,y2, not 3");
  EXPECT_EQ(start_error("boxcount lines=\"door:5,5,5,5\""),
            "Invalid lines: line \"door\": its two ends are the same point: it has no length");
  EXPECT_EQ(start_error("boxcount lines=garbage"),
            "Invalid lines: \"garbage\": a line is NAME:x1,y1,x2,y2");
  EXPECT_EQ(start_error("boxcount zones=\"z:0,0 10,10 10,0 0,10\""),
            "Invalid zones: zone \"z\": the polygon crosses itself: edge 1-2 meets edge 3-4");
  EXPECT_EQ(start_error("boxcount zones=\"z:0,0 1,1\""),
            "Invalid zones: zone \"z\": a polygon needs at least 3 points, not 2");
  EXPECT_EQ(start_error("boxcount normalized=true lines=\"a:0,0,2,1\""),
            "Invalid lines: line \"a\": 2 is outside 0..1 (normalized=true)");
  EXPECT_EQ(start_error("boxcount lines=\"a:0,0,2,1;b:0,1,1,0\" zones=\"z:0,0 9,0 9,9\""), "");
}

// cudanms ! boxtrack ! boxcount in a harness.
struct Chain {
  GstHarness *h;
  GstBus *bus;
  GstElement *count;

  // `counts`: boxcount's counts property, set before the frames' caps come (as the camera
  // service sets it before a connection's first frame).
  explicit Chain(const std::string &count_properties, const char *counts = nullptr) {
    init_track_elements_once();
    h = gst_harness_new_parse(
        ("cudanms ! boxtrack ! boxcount name=count " + count_properties).c_str());
    count = gst_bin_get_by_name(GST_BIN(h->element), "count");
    if (counts) {
      GstStructure *resume = gst_structure_from_string(counts, nullptr);
      EXPECT_NE(resume, nullptr);
      g_object_set(count, "counts", resume, NULL);
      gst_structure_free(resume);
    }
    gst_harness_set_src_caps_str(h, kCaps);
    bus = gst_bus_new();
    gst_element_set_bus(h->element, bus);
  }
  ~Chain() {
    gst_object_unref(count);
    gst_element_set_bus(h->element, nullptr);
    gst_object_unref(bus);
    gst_harness_teardown(h);
  }
  // Pushes a frame; the counts meta of what came out is copied into *counts.
  std::vector<GstCudaNmsLineCount> push(GstBuffer *buf,
                                        std::vector<GstCudaNmsCountEvent> *events = nullptr) {
    EXPECT_EQ(gst_harness_push(h, buf), GST_FLOW_OK);
    GstBuffer *out = gst_harness_pull(h);
    const GstCudaNmsCountsMeta *m = gst_buffer_get_cuda_nms_counts_meta(out);
    EXPECT_NE(m, nullptr);
    std::vector<GstCudaNmsLineCount> lines;
    if (m) {
      lines.assign(m->lines, m->lines + m->n_lines);
      if (events) events->assign(m->events, m->events + m->n_events);
    }
    gst_buffer_unref(out);
    for (GstCudaNmsLineCount &line : lines) line.labels = nullptr;  // the meta's, freed with it
    return lines;
  }
  // Pushes a frame; its first line's counts by label: label -> (in, out).
  std::map<std::string, std::pair<guint64, guint64>> push_for_labels(GstBuffer *buf) {
    EXPECT_EQ(gst_harness_push(h, buf), GST_FLOW_OK);
    GstBuffer *out = gst_harness_pull(h);
    const GstCudaNmsCountsMeta *m = gst_buffer_get_cuda_nms_counts_meta(out);
    std::map<std::string, std::pair<guint64, guint64>> labels;
    if (m && m->n_lines)
      for (guint k = 0; k < m->lines[0].n_labels; k++)
        labels[m->lines[0].labels[k].label] = {m->lines[0].labels[k].in, m->lines[0].labels[k].out};
    gst_buffer_unref(out);
    return labels;
  }
};

// One person walking down across y = 240 over 40 frames.
void walk_down(Chain &c, int first_frame = 0, std::vector<GstCudaNmsCountEvent> *all = nullptr) {
  for (int f = 0; f < 40; f++) {
    std::vector<GstCudaNmsCountEvent> events;
    c.push(frame_of({{320, 160.0f + 4 * f}}, (first_frame + f) * kFrame), &events);
    if (all) all->insert(all->end(), events.begin(), events.end());
  }
}

TEST(BoxCount, CountsMetaAndEvents) {
  Chain c("lines=\"mid:0,240,640,240\" zones=\"low:0,300 640,300 640,480 0,480\"");
  std::vector<GstCudaNmsCountEvent> events;
  walk_down(c, 0, &events);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, GST_CUDA_NMS_COUNT_LINE_CROSSED);
  EXPECT_STREQ(events[0].name, "mid");
  EXPECT_EQ(events[0].direction, 1);  // y grows: s = 640 (py - 240) goes from < 0 to > 0
  EXPECT_EQ(events[0].track_id, 1u);
  EXPECT_STREQ(events[0].label, "0");  // cudanms names class 0 "0" without labels
  EXPECT_EQ(events[1].kind, GST_CUDA_NMS_COUNT_ZONE_ENTERED);
  EXPECT_STREQ(events[1].name, "low");
  const auto lines = c.push(frame_of({}, 40 * kFrame));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].in, 1u);
  EXPECT_EQ(lines[0].out, 0u);
  EXPECT_EQ(lines[0].x2, 640.0f);
}

TEST(BoxCount, NormalizedLinesAreInFramePixels) {
  Chain c("normalized=true lines=\"mid:0,0.5,1,0.5\"");
  const auto lines = c.push(frame_of({}, 0));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].y1, 240.0f);
  EXPECT_EQ(lines[0].x2, 640.0f);
  walk_down(c, 1);
  EXPECT_EQ(c.push(frame_of({}, 41 * kFrame))[0].in, 1u);
}

TEST(BoxCount, CountsPropertyReadsAndResumes) {
  Chain c("lines=\"mid:0,240,640,240\"");
  GstStructure *resume = gst_structure_from_string(
      "counts, mid=(structure)\"line\\,\\ in\\=(guint64)10\\,\\ out\\=(guint64)4\\;\", "
      "later=(structure)\"line\\,\\ in\\=(guint64)7\\,\\ out\\=(guint64)0\\;\"",
      nullptr);
  ASSERT_NE(resume, nullptr);
  g_object_set(c.count, "counts", resume, NULL);
  gst_structure_free(resume);
  walk_down(c);
  GstStructure *counts = nullptr;
  g_object_get(c.count, "counts", &counts, NULL);
  ASSERT_NE(counts, nullptr);
  const GstStructure *mid = gst_value_get_structure(gst_structure_get_value(counts, "mid"));
  guint64 in = 0, out = 0;
  ASSERT_TRUE(gst_structure_get_uint64(mid, "in", &in));
  gst_structure_get_uint64(mid, "out", &out);
  EXPECT_EQ(in, 11u);
  EXPECT_EQ(out, 4u);
  gst_structure_free(counts);
  // A line that comes later takes the counts set for it then; the unchanged one keeps its own.
  g_object_set(c.count, "lines", "mid:0,240,640,240;later:0,100,640,100", NULL);
  const auto lines = c.push(frame_of({}, 100 * kFrame));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].in, 11u);
  EXPECT_EQ(lines[1].in, 7u);
}

// Per label: the meta's lines carry their crossings by label, which the counts property reads
// and resumes like the totals; a moved line starts them again.
TEST(BoxCount, CountsByLabel) {
  Chain c("lines=\"mid:0,240,640,240\"");
  GstStructure *zero = gst_structure_new("line", "in", G_TYPE_UINT64, guint64{3}, NULL);
  GstStructure *labels = gst_structure_new("labels", "0", GST_TYPE_STRUCTURE, zero, NULL);
  GstStructure *line = gst_structure_new("line", "in", G_TYPE_UINT64, guint64{5}, "out",
                                         G_TYPE_UINT64, guint64{1}, "labels", GST_TYPE_STRUCTURE,
                                         labels, NULL);
  GstStructure *resume = gst_structure_new("counts", "mid", GST_TYPE_STRUCTURE, line, NULL);
  g_object_set(c.count, "counts", resume, NULL);
  for (GstStructure *made : {zero, labels, line, resume}) gst_structure_free(made);
  EXPECT_EQ(c.push_for_labels(frame_of({}, 0)),
            (std::map<std::string, std::pair<guint64, guint64>>{{"0", {3, 0}}}));
  walk_down(c, 1);
  EXPECT_EQ(c.push_for_labels(frame_of({}, 41 * kFrame)),
            (std::map<std::string, std::pair<guint64, guint64>>{{"0", {4, 0}}}));
  GstStructure *counts = nullptr;
  g_object_get(c.count, "counts", &counts, NULL);
  ASSERT_NE(counts, nullptr);
  const GstStructure *mid = gst_value_get_structure(gst_structure_get_value(counts, "mid"));
  const GstStructure *read = gst_value_get_structure(gst_structure_get_value(mid, "labels"));
  guint64 in = 0;
  ASSERT_TRUE(gst_structure_get_uint64(
      gst_value_get_structure(gst_structure_get_value(read, "0")), "in", &in))
      << gst_structure_to_string(counts);
  EXPECT_EQ(in, 4u);
  gst_structure_free(counts);
  g_object_set(c.count, "lines", "mid:0,250,640,250", NULL);  // moved: counted afresh
  EXPECT_TRUE(c.push_for_labels(frame_of({}, 42 * kFrame)).empty());
}

// As the camera service sets them at a reconnection: normalized lines and their counts before
// the first frame says the frame's size.
TEST(BoxCount, NormalizedLinesResumeTheirCounts) {
  Chain c("normalized=true lines=\"mid:0,0.5,1,0.5\"",
          "counts, mid=(structure)\"line\\,\\ in\\=(guint64)10\\,\\ out\\=(guint64)4\\;\"");
  walk_down(c);
  const auto lines = c.push(frame_of({}, 40 * kFrame));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].in, 11u);
  EXPECT_EQ(lines[0].out, 4u);
}

TEST(BoxCount, BadLinesWhilePlayingWarnAndKeepTheOldOnes) {
  Chain c("lines=\"mid:0,240,640,240\"");
  walk_down(c);
  g_object_set(c.count, "lines", "mid:0,240", NULL);
  const auto lines = c.push(frame_of({}, 50 * kFrame));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].in, 1u);
  bool warned = false;
  while (GstMessage *m = gst_bus_pop(c.bus)) {
    if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING) {
      GError *error = nullptr;
      gst_message_parse_warning(m, &error, nullptr);
      warned = std::string(error->message) ==
               "Invalid lines: line \"mid\": needs 4 numbers "
               "x1,y1,x2,y2, not 2";
      g_clear_error(&error);
    }
    gst_message_unref(m);
  }
  EXPECT_TRUE(warned);
}

TEST(BoxCount, ClassFilter) {
  Chain other("lines=\"mid:0,240,640,240\" classes=person,7");
  walk_down(other);
  EXPECT_EQ(other.push(frame_of({}, 40 * kFrame))[0].in, 0u);  // class 0 is "0"
  Chain zero("lines=\"mid:0,240,640,240\" classes=person,0");
  walk_down(zero);
  EXPECT_EQ(zero.push(frame_of({}, 40 * kFrame))[0].in, 1u);
}

TEST(BoxCount, FramesWithoutMetasOrIds) {
  init_track_elements_once();
  GstHarness *h = gst_harness_new_parse("boxcount lines=\"a:0,0,10,10\"");
  gst_harness_set_src_caps_str(h, kCaps);
  for (int f = 0; f < 3; f++) {
    GstBuffer *buf = gst_buffer_new();
    GST_BUFFER_PTS(buf) = f * kFrame;
    if (f == 1) gst_buffer_add_cuda_nms_result_meta(buf, 2);  // boxes without track ids
    ASSERT_EQ(gst_harness_push(h, buf), GST_FLOW_OK);
    GstBuffer *out = gst_harness_pull(h);
    const GstCudaNmsCountsMeta *m = gst_buffer_get_cuda_nms_counts_meta(out);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->n_events, 0u);
    EXPECT_EQ(m->n_lines, 1u);
    gst_buffer_unref(out);
  }
  gst_harness_teardown(h);
}

}  // namespace
}  // namespace cudanms::testing
