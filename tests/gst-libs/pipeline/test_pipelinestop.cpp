// The helpers applications use to walk and stop their pipelines (gst-libs/pipeline).
#include <gst/app/gstappsrc.h>
#include <gst/gst.h>
#include <gst/rtp/gstrtpbuffer.h>
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <string>

#include "pipelinestop.h"

namespace {

// @description as a pipeline; nullptr (and @error) where an element is missing.
GstElement *launch(const char *description, GError **error) {
  return gst_parse_launch_full(description, nullptr, GST_PARSE_FLAG_FATAL_ERRORS, error);
}

class PipelineStop : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gst_init(nullptr, nullptr); }
  void TearDown() override {
    if (pipeline_) {
      gst_element_set_state(pipeline_, GST_STATE_NULL);
      gst_object_unref(pipeline_);
    }
  }
  GstElement *pipeline_ = nullptr;
};

TEST_F(PipelineStop, EveryElementOfNestedBinsIsVisitedOnce) {
  GError *error = nullptr;
  pipeline_ = launch(
      "fakesrc name=source ! queue name=queue ! "
      "bin.( name=outer identity name=inner ! bin.( name=nested fakesink name=sink ) )",
      &error);
  ASSERT_NE(pipeline_, nullptr) << (error ? error->message : "");
  std::multiset<std::string> visited;
  gst_cv_for_each_element(pipeline_,
                          [&](GstElement *element) { visited.insert(GST_OBJECT_NAME(element)); });
  EXPECT_EQ(visited,
            (std::multiset<std::string>{"source", "queue", "outer", "inner", "nested", "sink"}));
}

// An RTP packet of the test's stream: sequence number @seq, 33 ms apart.
GstBuffer *rtp_packet(guint16 seq) {
  GstBuffer *buffer = gst_rtp_buffer_new_allocate(16, 0, 0);
  GstRTPBuffer rtp = GST_RTP_BUFFER_INIT;
  gst_rtp_buffer_map(buffer, GST_MAP_WRITE, &rtp);
  gst_rtp_buffer_set_payload_type(&rtp, 96);
  gst_rtp_buffer_set_seq(&rtp, seq);
  gst_rtp_buffer_set_timestamp(&rtp, seq * 3000u);
  gst_rtp_buffer_set_ssrc(&rtp, 0x1234);
  gst_rtp_buffer_unmap(&rtp);
  GST_BUFFER_PTS(buffer) = seq * 33 * GST_MSECOND;
  return buffer;
}

// A jitterbuffer at the end of its stream with a packet missing waits for that packet's timer
// on its pushing thread: the state in which going to NULL can hang in GStreamer 1.22. After the
// helper that thread has stopped, and the pipeline goes to NULL.
TEST_F(PipelineStop, AJitterbufferWaitingAtTheEndOfItsStreamIsStoppedFirst) {
  GstElementFactory *factory = gst_element_factory_find("rtpjitterbuffer");
  if (!factory) GTEST_SKIP() << "no rtpjitterbuffer here (gstreamer1.0-plugins-good)";
  gst_object_unref(factory);
  GError *error = nullptr;
  pipeline_ = launch(
      "appsrc name=source format=time is-live=true "
      "caps=application/x-rtp,media=video,clock-rate=90000,encoding-name=RAW,payload=96 ! "
      "rtpjitterbuffer name=jitter latency=2000 ! fakesink sync=false",
      &error);
  ASSERT_NE(pipeline_, nullptr) << (error ? error->message : "");
  ASSERT_NE(gst_element_set_state(pipeline_, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  GstElement *source = gst_bin_get_by_name(GST_BIN(pipeline_), "source");
  for (guint16 seq : {0, 1, 3, 4}) gst_app_src_push_buffer(GST_APP_SRC(source), rtp_packet(seq));
  gst_app_src_end_of_stream(GST_APP_SRC(source));
  gst_object_unref(source);

  GstElement *jitter = gst_bin_get_by_name(GST_BIN(pipeline_), "jitter");
  GstPad *src = gst_element_get_static_pad(jitter, "src");
  // Its pushing thread runs (packet 2's timer is pending for up to the 2 s latency).
  for (int i = 0; i < 100 && gst_pad_get_task_state(src) != GST_TASK_STARTED; ++i)
    g_usleep(10 * 1000);
  EXPECT_EQ(gst_pad_get_task_state(src), GST_TASK_STARTED);

  gst_cv_flush_jitterbuffers(pipeline_);
  EXPECT_NE(gst_pad_get_task_state(src), GST_TASK_STARTED);
  EXPECT_EQ(gst_element_set_state(pipeline_, GST_STATE_NULL), GST_STATE_CHANGE_SUCCESS);
  gst_object_unref(src);
  gst_object_unref(jitter);
}

// Nothing else is flushed: the frames go on flowing.
TEST_F(PipelineStop, APipelineWithoutJitterbuffersIsLeftAsItIs) {
  GError *error = nullptr;
  pipeline_ = launch("fakesrc is-live=true ! fakesink name=sink signal-handoffs=true", &error);
  ASSERT_NE(pipeline_, nullptr) << (error ? error->message : "");
  GstElement *sink = gst_bin_get_by_name(GST_BIN(pipeline_), "sink");
  std::atomic<int> buffers{0};
  g_signal_connect(sink, "handoff",
                   G_CALLBACK(+[](GstElement *, GstBuffer *, GstPad *, gpointer counter) {
                     ++*static_cast<std::atomic<int> *>(counter);
                   }),
                   &buffers);
  gst_object_unref(sink);
  ASSERT_NE(gst_element_set_state(pipeline_, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  auto flowing = [&] {
    const int before = buffers;
    for (int i = 0; i < 500 && buffers < before + 5; ++i) g_usleep(10 * 1000);
    return buffers >= before + 5;
  };
  ASSERT_TRUE(flowing());
  gst_cv_flush_jitterbuffers(pipeline_);
  EXPECT_TRUE(flowing());
  gst_element_set_state(pipeline_, GST_STATE_NULL);
}

}  // namespace
