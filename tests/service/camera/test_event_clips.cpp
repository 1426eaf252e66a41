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
#include "support/mp4_clip.h"

namespace cudanms::service {
namespace {

using cudanms::testing::decode_clip;
using cudanms::testing::DecodedClip;
using cudanms::testing::on_buffers;
using cudanms::testing::run_to_end;
using cudanms::testing::TempDir;

constexpr int kFps = 10, kGopFrames = 10;
constexpr double kPre = 2, kPost = 2;
const GstClockTime kFrame = GST_SECOND / kFps;
const bool gst_ready = (gst_init(nullptr, nullptr), true);

// The encoded test pattern through a decoder, with `clips` attached as a session attaches them;
// an event at each frame of `events` (frame number -> event id) as it leaves the decoder. `raw`:
// a camera of raw video with a recording instead, its encoder's parser the only H.264.
void run_camera(EventClips *clips, int frames, const std::map<int, guint64> &events,
                std::map<guint64, std::string> *paths, bool raw = false,
                const std::string &codec = "h264") {
  const std::string gop = std::to_string(kGopFrames);
  const std::string encoder =
      codec == "h264"
          ? "x264enc speed-preset=ultrafast tune=zerolatency bframes=0 key-int-max=" + gop +
                " option-string=scenecut=0:min-keyint=" + gop + ":repeat-headers=0"
          : "x265enc speed-preset=ultrafast tune=zerolatency key-int-max=" + gop +
                " option-string=scenecut=0:min-keyint=" + gop + ":bframes=0";
  const std::string description =
      "videotestsrc pattern=ball num-buffers=" + std::to_string(frames) +
      " ! video/x-raw,width=320,height=240,framerate=" + std::to_string(kFps) + "/1 ! " + encoder +
      (raw ? " ! h264parse name=record-parse ! fakesink name=sink"
           : " ! " + codec + "parse ! avdec_" + codec + " name=decoder ! fakesink name=sink");
  GstElement *pipeline = gst_parse_launch(description.c_str(), nullptr);
  ASSERT_NE(pipeline, nullptr);
  clips->attach(pipeline, raw ? "record-parse" : nullptr);
  struct Context {
    EventClips *clips;
    const std::map<int, guint64> *events;
    std::map<guint64, std::string> *paths;
    GstClockTime origin;  // x264enc's times start 1000 hours in
  } context{clips, &events, paths, GST_CLOCK_TIME_NONE};
  on_buffers(
      pipeline, "sink", "sink",
      [](GstBuffer *frame, gpointer data) {
        auto *c = static_cast<Context *>(data);
        const GstClockTime pts = GST_BUFFER_PTS(frame);
        if (!GST_CLOCK_TIME_IS_VALID(c->origin)) c->origin = pts;
        const auto event = c->events->find(static_cast<int>((pts - c->origin) / kFrame));
        if (event != c->events->end())
          (*c->paths)[event->second] = c->clips->on_event(pts, event->second);
      },
      &context);
  EXPECT_TRUE(run_to_end(pipeline, 60 * GST_SECOND));
  clips->detach();
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
    DecodedClip d;
    ASSERT_TRUE(decode_clip(e.path, &d)) << e.path << " does not play whole";
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
  DecodedClip d;
  ASSERT_TRUE(decode_clip(paths[7], &d));
  EXPECT_TRUE(d.starts_on_keyframe);
  EXPECT_EQ(d.frames, 60 - 30);  // from the keyframe at 3.0 s to the stream's end
}

// A camera of H.265: its clips are H.265, cut the same way.
TEST(EventClips, H265IsCutTheSameWay) {
  TempDir dir;
  Outcomes outcomes;
  std::map<guint64, std::string> paths;
  {
    EventClips clips("yard", dir.file("yard"), kPre, kPost, outcomes.callback());
    run_camera(&clips, 100, {{55, 3}}, &paths, false, "h265");
  }
  ASSERT_EQ(paths[3], dir.file("yard/3.mp4"));
  EXPECT_EQ(outcomes.errors[paths[3]], "");
  DecodedClip d;
  ASSERT_TRUE(decode_clip(paths[3], &d, "h265"));
  EXPECT_TRUE(d.starts_on_keyframe);
  EXPECT_EQ(d.frames, 75 - 30 + 1);  // the keyframe at 3.0 s to 7.5 s
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
  DecodedClip d;
  ASSERT_TRUE(decode_clip(paths[2], &d));
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
