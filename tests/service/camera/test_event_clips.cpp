// A camera's event clips (service/camera/event_clips.h) cut from an H.264 stream of known GOPs
// (x264enc, a keyframe each second at 10 frames/s), the events fired as the decoded frames of
// their PTS leave the decoder, as the service's outputs do. Each clip is then decoded whole: it
// starts on a keyframe at most one GOP before pre-capture and ends at least post-capture after
// its last event.
#include <glib/gstdio.h>
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

#include "event_clips.h"
#include "pipelines/script_support.h"

namespace cudanms::service {
namespace {

using cudanms::testing::TempDir;

constexpr int kFps = 10, kGopFrames = 10;
constexpr double kPre = 2, kPost = 2;
const GstClockTime kFrame = GST_SECOND / kFps;
const bool gst_ready = (gst_init(nullptr, nullptr), true);

// The encoded test pattern through a decoder, with `clips` attached as a session attaches them;
// an event at each frame of `events` (frame number -> event id) as it leaves the decoder. `raw`:
// a camera of raw video with a recording instead, its encoder's parser the only H.264.
void run_camera(EventClips *clips, int frames, const std::map<int, guint64> &events,
                std::map<guint64, std::string> *paths, bool raw = false) {
  const std::string description =
      "videotestsrc pattern=ball num-buffers=" + std::to_string(frames) +
      " ! video/x-raw,width=320,height=240,framerate=" + std::to_string(kFps) +
      "/1 ! x264enc speed-preset=ultrafast tune=zerolatency bframes=0 key-int-max=" +
      std::to_string(kGopFrames) +
      " option-string=scenecut=0:min-keyint=" + std::to_string(kGopFrames) +
      (raw ? " ! h264parse name=record-parse ! fakesink name=sink"
           : " ! h264parse ! avdec_h264 name=decoder ! fakesink name=sink");
  GstElement *pipeline = gst_parse_launch(description.c_str(), nullptr);
  ASSERT_NE(pipeline, nullptr);
  clips->attach(pipeline, raw ? "record-parse" : nullptr);
  struct Context {
    EventClips *clips;
    const std::map<int, guint64> *events;
    std::map<guint64, std::string> *paths;
    GstClockTime origin;  // x264enc's times start 1000 hours in
  } context{clips, &events, paths, GST_CLOCK_TIME_NONE};
  GstElement *sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
  GstPad *pad = gst_element_get_static_pad(sink, "sink");
  gst_pad_add_probe(
      pad, GST_PAD_PROBE_TYPE_BUFFER,
      [](GstPad *, GstPadProbeInfo *info, gpointer data) {
        auto *c = static_cast<Context *>(data);
        const GstClockTime pts = GST_BUFFER_PTS(GST_PAD_PROBE_INFO_BUFFER(info));
        if (!GST_CLOCK_TIME_IS_VALID(c->origin)) c->origin = pts;
        const auto event = c->events->find(static_cast<int>((pts - c->origin) / kFrame));
        if (event != c->events->end())
          (*c->paths)[event->second] = c->clips->on_event(pts, event->second);
        return GST_PAD_PROBE_OK;
      },
      &context, nullptr);
  gst_object_unref(pad);
  gst_object_unref(sink);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstBus *bus = gst_element_get_bus(pipeline);
  GstMessage *end = gst_bus_timed_pop_filtered(
      bus, 60 * GST_SECOND, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(GST_MESSAGE_TYPE(end), GST_MESSAGE_EOS);
  gst_message_unref(end);
  gst_object_unref(bus);
  clips->detach();
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
}

// A clip decoded whole: its frames, its first frame's and last frame's PTS, whether the first
// sample is a keyframe; false on any error.
struct Decoded {
  int frames = 0, units = 0;  // decoded, and demuxed
  GstClockTime first = GST_CLOCK_TIME_NONE, last = 0;
  bool starts_on_keyframe = false;
};
bool decode(const std::string &path, Decoded *out) {
  GstElement *pipeline =
      gst_parse_launch(("filesrc location=\"" + path +
                        "\" ! qtdemux ! h264parse name=parse ! avdec_h264 ! fakesink name=sink")
                           .c_str(),
                       nullptr);
  if (!pipeline) return false;
  GstElement *parse = gst_bin_get_by_name(GST_BIN(pipeline), "parse");
  GstPad *in = gst_element_get_static_pad(parse, "src");
  gst_pad_add_probe(
      in, GST_PAD_PROBE_TYPE_BUFFER,
      [](GstPad *, GstPadProbeInfo *info, gpointer data) {
        auto *d = static_cast<Decoded *>(data);
        if (d->units++ == 0)
          d->starts_on_keyframe =
              !GST_BUFFER_FLAG_IS_SET(GST_PAD_PROBE_INFO_BUFFER(info), GST_BUFFER_FLAG_DELTA_UNIT);
        return GST_PAD_PROBE_OK;
      },
      out, nullptr);
  gst_object_unref(in);
  gst_object_unref(parse);
  GstElement *sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
  GstPad *pad = gst_element_get_static_pad(sink, "sink");
  gst_pad_add_probe(
      pad, GST_PAD_PROBE_TYPE_BUFFER,
      [](GstPad *, GstPadProbeInfo *info, gpointer data) {
        auto *d = static_cast<Decoded *>(data);
        const GstClockTime pts = GST_BUFFER_PTS(GST_PAD_PROBE_INFO_BUFFER(info));
        if (!GST_CLOCK_TIME_IS_VALID(d->first)) d->first = pts;
        d->last = std::max(d->last, pts);
        d->frames++;
        return GST_PAD_PROBE_OK;
      },
      out, nullptr);
  gst_object_unref(pad);
  gst_object_unref(sink);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstBus *bus = gst_element_get_bus(pipeline);
  GstMessage *end = gst_bus_timed_pop_filtered(
      bus, 30 * GST_SECOND, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  const bool whole = end && GST_MESSAGE_TYPE(end) == GST_MESSAGE_EOS;
  if (end) gst_message_unref(end);
  gst_object_unref(bus);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
  return whole;
}

// The clips' outcomes as EventClips reports them.
struct Outcomes {
  std::mutex lock;
  std::map<std::string, std::string> errors;  // path -> "" (written whole) or why not
  EventClips::Finished callback() {
    return [this](const std::string &path, const std::string &error) {
      std::lock_guard<std::mutex> guard(lock);
      errors[path] = error;
    };
  }
};

TEST(EventClips, StartOnAKeyframeBeforePreCaptureAndEndAfterPostCapture) {
  TempDir dir;
  Outcomes outcomes;
  std::map<guint64, std::string> paths;
  {
    EventClips clips("door", dir.file("door"), kPre, kPost, outcomes.callback());
    // Event 1 at 5.5 s alone; events 2 and 3 at 12.0 and 13.0 s share one clip.
    run_camera(&clips, 200, {{55, 1}, {120, 2}, {130, 3}}, &paths);
  }
  ASSERT_EQ(paths.size(), 3u);
  EXPECT_EQ(paths[1], dir.file("door/1.mp4"));
  EXPECT_EQ(paths[2], dir.file("door/2.mp4"));
  EXPECT_EQ(paths[3], paths[2]) << "two events 1 s apart share one clip";
  EXPECT_EQ(outcomes.errors[paths[1]], "");
  EXPECT_EQ(outcomes.errors[paths[2]], "");
  // Each clip: from the keyframe at or before (first event - pre), a GOP at most before it, to
  // at least post after the last event.
  const struct {
    std::string path;
    double first_event_s, last_event_s;
  } expected[] = {{paths[1], 5.5, 5.5}, {paths[2], 12.0, 13.0}};
  for (const auto &e : expected) {
    Decoded d;
    ASSERT_TRUE(decode(e.path, &d)) << e.path << " does not play whole";
    EXPECT_TRUE(d.starts_on_keyframe) << e.path;
    const double length_s = static_cast<double>(d.last - d.first + kFrame) / GST_SECOND;
    const double before_s = length_s - (e.last_event_s - e.first_event_s) - kPost;
    EXPECT_GE(before_s, kPre - 0.01) << e.path << ": " << length_s << " s";
    EXPECT_LE(before_s, kPre + static_cast<double>(kGopFrames) / kFps + 0.01) << e.path;
    EXPECT_EQ(d.frames, static_cast<int>(std::lround(length_s * kFps))) << e.path;
  }
  // Nothing left under a temporary name.
  EXPECT_TRUE(EventClips::remove_unfinished(dir.file("door")).empty());
}

// The connection ends mid-clip (the camera stopped): the clip is finished with what it has, whole.
TEST(EventClips, AConnectionThatEndsFinishesItsClip) {
  TempDir dir;
  Outcomes outcomes;
  std::map<guint64, std::string> paths;
  {
    EventClips clips("door", dir.file("door"), kPre, kPost, outcomes.callback());
    run_camera(&clips, 60, {{55, 7}}, &paths);  // the stream ends 0.5 s after the event
  }
  ASSERT_EQ(outcomes.errors.count(paths[7]), 1u);
  EXPECT_EQ(outcomes.errors[paths[7]], "");
  Decoded d;
  ASSERT_TRUE(decode(paths[7], &d));
  EXPECT_TRUE(d.starts_on_keyframe);
  EXPECT_EQ(d.frames, 60 - 30);  // from the keyframe at 3.0 s to the stream's end
}

// A camera of raw video with a recording: its clips are cut from the recording's H.264.
TEST(EventClips, RawVideoIsCutFromTheRecording) {
  TempDir dir;
  Outcomes outcomes;
  std::map<guint64, std::string> paths;
  {
    EventClips clips("webcam", dir.file("webcam"), kPre, kPost, outcomes.callback());
    run_camera(&clips, 100, {{55, 2}}, &paths, true);
  }
  ASSERT_EQ(paths[2], dir.file("webcam/2.mp4"));
  EXPECT_EQ(outcomes.errors[paths[2]], "");
  Decoded d;
  ASSERT_TRUE(decode(paths[2], &d));
  EXPECT_TRUE(d.starts_on_keyframe);
  EXPECT_EQ(d.frames, 75 - 30 + 1);  // the keyframe at 3.0 s to 7.5 s
}

// A folder that cannot be made (a file in its way; a full disk alike): no clip, said while it
// lasts; the events go on.
TEST(EventClips, AFolderThatCannotBeWrittenIsSaid) {
  TempDir dir;
  ASSERT_TRUE(g_file_set_contents(dir.file("door").c_str(), "a file", -1, nullptr));
  Outcomes outcomes;
  std::map<guint64, std::string> paths;
  EventClips clips("door", dir.file("door"), kPre, kPost, outcomes.callback());
  run_camera(&clips, 60, {{35, 1}}, &paths);
  EXPECT_EQ(paths[1], "");
  EXPECT_NE(clips.failing(), "");
}

// A stream that is not H.264/H.265 (raw video, a JPEG webcam) has nothing to cut: no clip.
TEST(EventClips, RawVideoHasNoClip) {
  TempDir dir;
  EventClips clips("door", dir.file("door"), kPre, kPost, nullptr);
  GstCaps *raw = gst_caps_from_string("video/x-raw,format=I420,width=320,height=240");
  clips.on_caps(raw, false);
  GstBuffer *frame = gst_buffer_new_allocate(nullptr, 320 * 240 * 3 / 2, nullptr);
  GST_BUFFER_PTS(frame) = GST_SECOND;
  clips.on_unit(frame, false);
  EXPECT_EQ(clips.on_event(GST_SECOND, 1), "");
  gst_buffer_unref(frame);
  gst_caps_unref(raw);
}

// A host killed mid-clip leaves a temporary file: removed on restart, the clip's path named.
TEST(EventClips, UnfinishedClipsAreRemovedOnRestart) {
  TempDir dir;
  g_mkdir_with_parents(dir.file("door").c_str(), 0755);
  ASSERT_TRUE(g_file_set_contents(dir.file("door/4.mp4.part").c_str(), "moov?", 5, nullptr));
  ASSERT_TRUE(g_file_set_contents(dir.file("door/3.mp4").c_str(), "whole", 5, nullptr));
  const std::vector<std::string> removed = EventClips::remove_unfinished(dir.file("door"));
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0], dir.file("door/4.mp4"));
  EXPECT_FALSE(g_file_test(dir.file("door/4.mp4.part").c_str(), G_FILE_TEST_EXISTS));
  EXPECT_TRUE(g_file_test(dir.file("door/3.mp4").c_str(), G_FILE_TEST_EXISTS));
}

}  // namespace
}  // namespace cudanms::service
