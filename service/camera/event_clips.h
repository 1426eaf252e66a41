// A camera's clips of its counting events, cut from the camera's own compressed stream without
// re-encoding (issue 68), as DeepStream's Smart Record and Frigate's event clips do.
//
// The H.264 or H.265 access units going into the camera's decoder (after the depayloader and the
// parser, before the decoder: a tap on the decoder's sink pad, uridecodebin's or the camera's
// own source's) are kept in a ring of whole GOPs in memory, `pre` seconds deep. An event at a
// frame's PTS opens a clip from the keyframe at or before PTS - pre; every access unit after it
// goes into the clip until `post` seconds after the last event that extended it (events close
// together share one clip), at most kMaxSeconds; then the clip is muxed to MP4 (appsrc ! parser !
// mp4mux, no decoder, no encoder) under a temporary name and renamed whole: DIR/ID.mp4, ID the
// first event's. A camera whose stream is raw video (a webcam, a file decoded elsewhere) has no
// access units to keep: with a recording (record-dir), the recording's re-encoded H.264 is kept
// instead; without, its events have no clip.
//
// The tap runs on the source's streaming thread, events come from the chain's; the muxing runs in
// the clip's own pipeline, finished on a thread of its own. No frame waits for a clip.
#pragma once

#include <gst/gst.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cudanms::service {

class EventClips {
 public:
  static constexpr double kMaxSeconds = 120;  // a clip that events keep extending ends here
  // The most a ring holds (a camera of huge GOPs keeps fewer seconds than `pre`).
  static constexpr guint64 kMaxRingBytes = 64 << 20;

  // `finished`: each clip's outcome, on its finishing thread (never under a caller's call): its
  // path and "" when it was written whole, else why not (its file then never appears).
  using Finished = std::function<void(const std::string &path, const std::string &error)>;
  EventClips(std::string camera, std::string dir, double pre_s, double post_s, Finished finished);
  // Open clips finished, waited for (at most a few seconds each).
  ~EventClips();
  EventClips(const EventClips &) = delete;
  EventClips &operator=(const EventClips &) = delete;

  // A connection's pipeline, before it plays: taps its decoders (those added later inside
  // uridecodebin too) and, as the fallback for raw video, the element named `recording_parser`
  // (the recording's h264parse) where there is one.
  void attach(GstElement *pipeline, const char *recording_parser);
  // The connection ended: its open clip finished with what it has, its ring emptied.
  void detach();

  // A frame with events at `pts`: the clip they are in (DIR/ID.mp4, `first_id` naming a new
  // one), or "" when none can be made (no compressed stream seen, nothing kept yet).
  std::string on_event(GstClockTime pts, guint64 first_id);
  // Why clips cannot be written now (a folder that cannot be made, a full disk); "": they can.
  // Logged once as it starts.
  std::string failing() const;

  // One access unit of the stream and its caps, as the tap hands them (public for the tests,
  // which feed a stream of their own). `fallback`: the recording's, used only while the
  // connection has shown no stream of its own.
  void on_caps(GstCaps *caps, bool fallback) { hear_caps(caps, fallback, kCurrent); }
  void on_unit(GstBuffer *unit, bool fallback) { hear_unit(unit, fallback, kCurrent); }

  // Clips a host stopped while writing (killed mid-clip): their temporary files in `dir`
  // removed; the paths their clips would have had.
  static std::vector<std::string> remove_unfinished(const std::string &dir);

 private:
  struct Gop {
    GstClockTime start = GST_CLOCK_TIME_NONE;
    std::vector<GstBuffer *> units;  // the keyframe first; references held
    guint64 bytes = 0;
  };
  struct Clip;
  struct Tap;
  struct Attachment;
  static GstPadProbeReturn on_probe(GstPad *pad, GstPadProbeInfo *info, gpointer data);
  // What a tap of connection `connection` hears (kCurrent: whichever is current).
  static constexpr guint64 kCurrent = G_MAXUINT64;
  void hear_caps(GstCaps *caps, bool fallback, guint64 connection);
  void hear_unit(GstBuffer *unit, bool fallback, guint64 connection);
  static GstClockTime time_of(GstBuffer *unit);
  void clear_ring();  // lock_ held
  // The stream as none was seen: its open clip finished, its ring, caps and source forgotten
  // (lock_ held).
  void forget_stream();
  void set_failing(const std::string &why);  // lock_ held
  void finish_open_clip();                   // lock_ held
  bool push(GstBuffer *unit);                // into the open clip; false past its end (lock_ held)
  void reap_done();                          // finishing threads done joined (finishing_lock_ held)

  const std::string camera_, dir_;
  const GstClockTime pre_, post_;
  const Finished finished_;

  mutable std::mutex lock_;  // guards what follows
  GstCaps *caps_ = nullptr;  // the kept stream's; null: none seen on this connection
  bool own_stream_ = false;  // the connection showed its own stream: the fallback is ignored
  std::deque<Gop> ring_;
  guint64 ring_bytes_ = 0;
  std::unique_ptr<Clip> open_;
  std::string failing_;  // the last clip's failure; "": it was written
  // The stream's latest in-band parameter sets (H.264 SPS, PPS; H.265 VPS, SPS, PPS, each with a
  // start code) where it is a byte-stream: a clip whose first keyframe lacks them (an encoder
  // that sends them once, a camera that sends them in its SDP) gets them before it, or nothing
  // of it would decode. Cleared with the ring.
  std::string parameter_sets_;
  guint64 connection_ = 0;  // attach()es so far: a tap of an older one is not heard

  struct Finishing {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::mutex finishing_lock_;
  std::vector<Finishing> finishing_;
};

}  // namespace cudanms::service
