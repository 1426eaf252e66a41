// Multi-object tracking of a stream's kept boxes: ByteTrack (Zhang et al., "ByteTrack: Multi-Object
// Tracking by Associating Every Detection Box", ECCV 2022), on the CPU. Pure C++17, no GStreamer,
// no GLib: the boxtrack element, cudanms-tool track and the tests use it as is.
//
//   cudanms::Tracker tracker(params);
//   for each frame:
//     const cudanms::TrackedFrame &out = tracker.update(frame_index, detections);
//     // out.ids[i]: the id of the track detection i belongs to, 0 for none (yet)
//
// Each frame:
//  1. A track not matched for more than track_buffer frames is removed. Every other track's
//     Kalman filter predicts it to this frame (state: centre x, centre y, aspect w / h, height
//     and their velocities; constant velocity; noise scaled by the height). A gap of g frames
//     (frame_index went up by g) predicts g steps. A lost track's height velocity is zeroed
//     first, as ByteTrack does.
//  2. High boxes (score >= track_thresh) are matched to the confirmed tracks, lost ones included,
//     by cost 1 - IoU * score (ByteTrack's fused score; a score past 1, an SVM margin or a level
//     weight, counts as 1), accepting costs below match_thresh.
//  3. Low boxes (low_thresh <= score < track_thresh) are matched to the confirmed tracks still
//     unmatched that were not lost, by 1 - IoU, accepting IoU above 0.5. Tracks still unmatched
//     are lost from here on.
//  4. Tentative tracks are matched to the high boxes left, by 1 - IoU * score below 0.7. A
//     tentative track left unmatched is removed; one matched on min_hits frames in a row is
//     confirmed and gets its id.
//  5. A high box left with score >= high_thresh starts a tentative track (confirmed at once with
//     min_hits 1, or on the first frame after a reset, as ByteTrack does so that the objects
//     present when a stream starts are not missed).
// ByteTrack's last step, remove_duplicate_stracks (of a lost and a tracked track whose boxes
// overlap by IoU > 0.85, the younger goes), is left out: it ended the track of a person whose path
// crossed another's while NMS merged their boxes, and changed nothing on MOT15.
// Every matching is an optimal assignment (cudanms/assignment.h) over the pairs the IoU gate
// lets through, which a grid over the boxes finds without comparing every pair. Boxes and
// tracks of different classes are never matched unless per_class is false.
//
// Ids are 64-bit, given in order of confirmation from next_id (1 at first), never reused: a
// reset (time went backwards) removes the tracks but the ids go on. Past max_tracks tracks, the
// lost track seen longest ago is evicted to make room; with none lost, a new box starts no track.
// Both are counted in the frame's result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace cudanms {

struct TrackerParams {
  float track_thresh = 0.5f;      // high boxes: score >= this
  float low_thresh = 0.1f;        // low boxes: low_thresh <= score < track_thresh; below: ignored
  float high_thresh = 0.6f;       // a new track needs a high box of at least this score
  float match_thresh = 0.8f;      // first matching: cost 1 - IoU * score below this
  float low_match_thresh = 0.5f;  // second matching: 1 - IoU below this
  float tentative_match_thresh = 0.7f;  // tentative tracks: 1 - IoU * score below this
  int64_t track_buffer = 30;            // frames a lost track waits to be found again
  uint32_t min_hits = 3;       // frames in a row a new track must be matched to be confirmed
  bool per_class = true;       // match boxes and tracks of the same class only
  size_t max_tracks = 100000;  // tracks held at once (tentative, tracked and lost)
};

struct Detection {
  float x1, y1, x2, y2;  // pixels
  float score;
  int32_t class_id;
};

// A confirmed track matched on this frame.
struct TrackedBox {
  uint64_t id;
  size_t detection;      // index of the detection it was matched to
  float x1, y1, x2, y2;  // the Kalman filter's box after the update (smoothed)
  float score;           // the detection's
  int32_t class_id;
};

// How the picture moved since the previous frame, the camera having panned, tilted, zoomed or
// been carried: a point (x, y) of the previous frame is at (scale x + dx, scale y + dy) in this
// one. Rotation is left out (a camera rarely rolls).
struct CameraMotion {
  double scale = 1, dx = 0, dy = 0;
};

struct TrackedFrame {
  std::vector<uint64_t> ids;       // per detection: its confirmed track's id; 0 for none
  std::vector<TrackedBox> tracks;  // the confirmed tracks matched on this frame, by detection
  size_t tentative = 0, tracked = 0, lost = 0;  // tracks held after the frame, by state
  size_t evicted = 0;  // lost tracks evicted on this frame to stay within max_tracks
  size_t refused = 0;  // boxes that started no track on this frame: max_tracks were held
  size_t ignored = 0;  // detections with NaN or infinite values, or a negative size
  bool reset = false;  // this frame came at or before the previous one: the tracks were reset
};

class Tracker {
 public:
  explicit Tracker(TrackerParams params = {});
  ~Tracker();
  Tracker(const Tracker &) = delete;
  Tracker &operator=(const Tracker &) = delete;

  // Tracks one frame. `frame` counts frames of the stream; gaps (dropped frames) predict the
  // tracks over them, and a frame at or before the previous one resets the tracker first. The
  // result stays valid until the next call. With `motion`, the tracks predicted to this frame
  // are moved as the picture moved before they are matched (camera-motion compensation).
  const TrackedFrame &update(int64_t frame, const std::vector<Detection> &detections,
                             const CameraMotion &motion = {});

  // Removes every track; ids go on from next_id().
  void reset();

  const TrackerParams &params() const;
  // Takes effect from the next frame; the tracks are kept.
  void set_params(const TrackerParams &params);
  uint64_t next_id() const;
  // Raises the id the next confirmed track gets (to continue a stream's ids in a new tracker);
  // never lowers it, so that no id is given twice. At most kMaxFirstId: 2^62 ids are left after
  // it (146 000 years at a million a second), so that ids never wrap round to 0, "no track".
  void set_next_id(uint64_t id);
  static constexpr uint64_t kMaxFirstId = uint64_t{1} << 62;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace cudanms
