// What a camera leaves behind, across all its connections: its JSON lines (frames and state
// changes, in one file, appended to), its MQTT messages and retained state, and the counts
// behind its metrics. One JSON encoder for the file and MQTT. Frames come from the camera's
// streaming thread (the session's probe), state changes from the main loop. A frame's counts
// are kept (the counts file; etcd for a fleet's camera) before its line is written and its
// events sent, on a thread of the outputs' own and in order, so that no frame waits on etcd or
// the disk: only when kMaxQueued frames already wait (counted on /metrics) does the next one.
#pragma once

#include <cudanms/count.h>
#include <gst/gst.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "camera_run.h"
#include "config.h"
#include "detectionsjson.h"
#include "event_clips.h"
#include "event_history.h"
#include "fleet_store.h"
#include "linesfile.h"
#ifdef CUDANMS_HAVE_MQTT
#include "mqttpublisher.h"
#endif

namespace cudanms::service {

struct FrameCounts {
  guint64 frames = 0, candidates = 0, kept = 0;
  gint64 last_frame_us = 0;            // g_get_monotonic_time() of the last frame; 0: none yet
  std::vector<double> recent_nms_us;   // the latest NMS latencies (for p50/p99)
  double nms_sum_s = 0;                // over every frame
  double chain_sum_s = 0;              // the detector's and cudanms's wall time, over every frame
  guint64 published = 0, dropped = 0;  // MQTT messages
  guint64 lines_lost = 0;              // JSON lines that could not be written
  size_t outputs_queued = 0;           // frames whose counts are not kept yet (a gauge)
  guint64 outputs_full_waits = 0;      // frames that waited for room among them
  guint64 outputs_unkept = 0;          // frames not published: stopped before etcd had them
  std::string pictures_failing;        // why its events' pictures cannot be written; "": they can
  std::string clips_failing;           // why its events' clips cannot be written; "": they can
};

// What a camera counted, across its connections (and, for the lines a reload left as they were,
// across its restarts): the tracker's next id, each line's running counts as boxcount keeps them,
// every crossing by line, direction and label, and each zone's occupancy by label now.
struct CountingState {
  guint64 next_track_id = 1;
  guint64 next_event_id = 1;  // the camera's counting events are numbered 1, 2, ... (their "id")
  std::map<std::string, std::pair<guint64, guint64>> lines;  // name -> (in, out)
  std::map<std::tuple<std::string, std::string, std::string>, guint64>
      crossings;                                                     // line, in|out, label
  std::map<std::pair<std::string, std::string>, guint64> occupancy;  // zone, label -> objects
  std::map<std::pair<std::string, std::string>, guint64> loitered;   // zone, label -> events
  std::map<std::string, guint64> loitering;  // zone -> tracks loitering in it now
  // A fleet's camera: its events sent to the broker and not yet acknowledged (id -> message),
  // kept in etcd until they are, so that the host that takes the camera over sends them again.
  std::map<guint64, std::string> undelivered;

  // Only what belongs to the lines of these names (zones' occupancy starts again).
  CountingState kept_for(const std::map<std::string, std::string> &lines_kept) const;
  // The lines' counts, totals and by label (from the crossings), as boxcount resumes them.
  LineTallies tallies() const;
  // Everything but the outbox (undelivered), which only the keeping of counts changes.
  CountingState without_outbox() const;
};

// A counting event as the operator's page lists it (web.h) and the history keeps it.
using RecentEvent = CountEvent;

// The camera's latest annotated picture (JPEG; null before the first) and its number.
struct Snapshot {
  std::shared_ptr<const std::string> jpeg;
  guint64 number = 0;
};

class CameraOutputs {
 public:
  // `run`: where the counts are kept (its counts file, its fleet store); `counted`: a camera's
  // counts so far, to go on from.
  CameraOutputs(const CameraConfig &config, const CameraRun &run, CountingState counted = {});
  ~CameraOutputs();
  CameraOutputs(const CameraOutputs &) = delete;
  CameraOutputs &operator=(const CameraOutputs &) = delete;

  // Opens the JSON lines file and starts the MQTT client (a broker that is down is no error:
  // the client retries); false with the reason.
  bool open(std::string *error);
  // A connection's stream, on its streaming thread: its events before frames (the caps, labels).
  void on_event(GstEvent *event);
  // `chain_s`: the frame's time from the intake queue to cudanms's output (0: not measured).
  void on_frame(GstBuffer *buffer, const GstSegment *segment, double chain_s);
  // A state change, on the main loop: a JSON line and the retained MQTT status.
  void on_state(const std::string &state, const std::string &previous, const std::string &reason,
                long attempt);
  // The retained status "offline", the MQTT queue flushed (at most `flush_ms`), the file closed.
  void close(guint flush_ms);
  FrameCounts counts() const;
  CountingState counting() const;
  // A reload's new lines, as CameraConfig::line_shapes: what the counts file names.
  void set_line_shapes(std::map<std::string, std::string> shapes);
  // The snapshot branch's latest picture (session.h), on its streaming thread.
  void on_snapshot(GstBuffer *jpeg);
  // The picture of a frame with counting events (the run's snapshots; the event branch's
  // thread): written as SNAPSHOTS/CAMERA/ID.jpg (ID: the frame's first event's), its path into
  // each of the frame's events in the history.
  void on_event_picture(GstBuffer *jpeg);
  // The run's pictures kept within their bounds (picture-retain-days, picture-retain-size,
  // snapshots-size) unless a sweep ran less than `interval_us` ago: after each picture written,
  // once a minute at most, and from the camera's watchdog once an hour, so that a camera
  // without events lately loses its old pictures too. Any thread.
  void sweep_pictures(gint64 interval_us);
  // The camera's event clips (the run's snapshots and the camera's clips key), which each of its
  // connections' pipelines feeds (session.h); null for none.
  EventClips *clips() const { return clips_.get(); }
  Snapshot snapshot() const;
  // Pictures are made for 10 s after each ask (a page open shows one a
  // second), none otherwise: each costs the GPU's streams (snapshot.h).
  void want_pictures() { pictures_wanted_until_us_ = g_get_monotonic_time() + kWantedUs; }
  bool pictures_wanted() const { return g_get_monotonic_time() < pictures_wanted_until_us_; }
  // The latest counting events, the newest first.
  std::vector<RecentEvent> recent_events() const;
  // A fleet's camera that etcd says another host owns now: its frames are no longer ours to
  // publish (the camera stops it).
  bool not_owner() const { return not_owner_.load(); }

 private:
  bool writes() const;  // a file or MQTT to encode frames for
  bool keeps() const { return !counts_file_.empty() || store_; }  // counts to keep per frame
  void write_line(const char *text, size_t length);               // with file_lock_ held

  // A frame's outputs (or a state change's line), waiting for its counts to be kept.
  struct Outgoing {
    bool frame = false;                     // else a state change's line alone
    guint64 connection = 0;                 // the camera's connection it came on (connection_ then)
    CountingState counted;                  // after the frame, without the outbox (when keeps())
    std::map<guint64, std::string> events;  // its events' MQTT messages, by id
    std::string line;                       // its JSON line; "" for none
  };
  // Queued for the keeper (inline when it does not run); waits only while kMaxQueued wait.
  void send(Outgoing out);
  // Counts kept, then the line written and sent; `keeper`: on its thread, where a frame whose
  // counts etcd did not take waits for it.
  void deliver(Outgoing &out, bool keeper = false);
  void run_keeper();
  static constexpr size_t kMaxQueued = 256;  // ~8 s of a 30 fps camera: past the lease's TTL
  mutable std::mutex queue_lock_;            // guards what follows, up to keeper_
  std::condition_variable queue_changed_;    // an item, room, or stopping
  std::deque<Outgoing> queue_;
  bool keeper_running_ = false;  // between open() and close(); else frames delivered inline
  guint64 full_waits_ = 0;
  guint64 unkept_frames_ = 0;
  guint64 connection_ = 0;  // its connections' number: one more at each stop
  // A connection whose frames are not published: one's counts never reached etcd before it
  // stopped. None at first.
  guint64 unkept_connection_ = G_MAXUINT64;
  std::thread keeper_;

  const CameraConfig config_;
  const std::string counts_file_;  // "" for none
#ifdef CUDANMS_HAVE_MQTT
  std::unique_ptr<MqttPublisher> mqtt_;
#endif
  mutable std::mutex file_lock_;  // the file and the encoder
  LinesFile file_;
  bool file_open_ = false;
  bool write_failing_ = false;  // reported once until a line is written again
  DetectionsStream encoder_;
  // The frame's counts into counting_, with counts_lock_ held; the first of the ids it gave
  // the frame's events (0: no event).
  guint64 count(GstBuffer *buffer);
  // What was counted (`now`, without its outbox) kept where it outlives the process
  // (counts_file_, and etcd for a fleet's camera: `sent`, the frame's events, into its outbox),
  // before the frame is written or sent. A counts file that cannot be written is logged, not
  // waited for (lines go on); etcd is. On the keeper's thread (the main loop's before it runs).
  enum class Kept { kYes, kNotInEtcd, kNotOwner };
  Kept keep_counting(CountingState now, std::map<guint64, std::string> sent = {});
  CountingState counted_now() const;  // counting_.without_outbox(), under counts_lock_
  // keep_counting's etcd part: false unless stored; the delivered events it forgot leave
  // *delivered.
  bool store_counts(const CountingState &keeping, const std::map<guint64, std::string> &sent,
                    std::set<guint64> *delivered, gint64 now_us);
  void send_event(guint64 id, std::string message);  // reliable: its delivery is noted

  mutable std::mutex counts_lock_;
  FrameCounts counts_;
  CountingState counting_;
  static constexpr size_t kRecentEvents = 20;
  std::deque<RecentEvent> recent_events_;  // the newest first
  mutable std::mutex snapshot_lock_;
  Snapshot snapshot_;
  // The run's snapshots: the camera's folder of event pictures ("" for none), and the frames
  // with events whose pictures are not made yet, by PTS (the newest kPendingPictures).
  const std::string pictures_dir_;
  const std::string snapshots_;       // every camera's pictures' folder (run.snapshots)
  const guint64 snapshots_size_ = 0;  // their bound (run.snapshots_size)
  std::atomic<gint64> swept_us_{0};   // the last retention sweep
  std::mutex pictures_lock_;
  std::deque<std::pair<GstClockTime, std::vector<HistoryEvent>>> pending_pictures_;
  static constexpr size_t kPendingPictures = 64;

  static constexpr gint64 kWantedUs = 10 * G_USEC_PER_SEC;
  std::atomic<gint64> pictures_wanted_until_us_{0};
  size_t next_latency_ = 0;  // where the next latency goes in counts_.recent_nms_us

  // What keep_counting last kept, the lines' shapes, and the track and event ids reserved up to
  // (given out past what was kept, never to be given again after a death).
  std::mutex keep_lock_;
  CountingState saved_;
  std::map<std::string, std::string> line_shapes_;
  guint64 reserved_ids_ = 0, reserved_events_ = 0;
  bool save_failing_ = false;                    // reported once until a save works again
  std::unique_ptr<FleetStore> store_;            // a fleet's camera: etcd
  const std::shared_ptr<EventHistory> history_;  // where its events are kept; nullptr: nowhere
  const std::string host_;                       // in each event kept
  gint64 store_retry_us_ = 0;                    // after a failure, the next try not before
  gint64 forgotten_us_ = 0;                      // delivered events last taken out of the outbox
  std::atomic<bool> not_owner_{false};
  // Events the broker acknowledged (Paho's thread), to take out of the outbox.
  struct Delivered {
    std::mutex lock;
    std::set<guint64> ids;
  };
  std::shared_ptr<Delivered> delivered_ = std::make_shared<Delivered>();

  // A clip written whole (`error` ""): the folder kept within its bounds; or not: its events'
  // clip marked gone.
  void on_clip_finished(const std::string &path, const std::string &error);
  // Last: its clips finish (their outcomes reported here) before anything else goes.
  std::unique_ptr<EventClips> clips_;
};

}  // namespace cudanms::service
