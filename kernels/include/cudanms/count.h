// Counting tracked objects: lines they cross and zones they are in. Pure C++17, no GStreamer, no
// GLib: the boxcount element and the camera service's config check use it as is.
//
//   std::vector<cudanms::CountLine> lines;
//   std::string error;
//   if (!cudanms::parse_lines("door:100,400,540,400", &lines, &error)) complain(error);
//   cudanms::Counter counter;
//   counter.set_lines(lines);
//   counter.update(frame, observations, &events);  // each frame: the tracked boxes
//
// The rules:
//  - A track's position is its box's anchor: bottom-centre by default (where a person stands,
//    as nvdsanalytics, Frigate and supervision take it), or the centre, or the top-centre.
//  - For a line from A to B, s(P) = (B - A) x (P - A) = (x2-x1)(py-y1) - (y2-y1)(px-x1). A track
//    crosses the line "in" when its anchor goes from s < 0 to s > 0, "out" from s > 0 to s < 0.
//    Where the anchor's path between two observations of the track meets the line must lie on the
//    segment AB: a track that walks around the line's end crosses nothing. Observations may be
//    frames apart (a person missed while crossing): the path is the straight step between them.
//  - No double counts (hysteresis): a track is on a side of a line only once its anchor is more
//    than `hysteresis` x its box's height away from the line; within that band it stays on the
//    side it had. A crossing counts when the track reaches the other side, if the last time its
//    path met the line was on the segment. A track jittering on the line therefore counts once,
//    when it leaves the band on the other side, and a track first seen within the band has no
//    side until it leaves it (nothing counts for where it came from).
//  - A crossing holds (`crossing_frames`): it counts once the track has been observed beyond the
//    band on the other side that many times, its event on the frame of the last of them. Seen
//    beyond the band on its first side before that, it crossed nothing; a track that ends first
//    (its box jumped to another object as it left the picture) counts nothing. 1: at once.
//  - A zone is a simple polygon (at least 3 points, edges that do not cross). A track is in it
//    once its anchor is inside by more than the same band, and out of it once outside by more
//    than the band: "zone-entered" and "zone-left" fire at those changes. A track first seen in a
//    zone enters it. A track not observed for more than `track_timeout` frames is forgotten, and
//    leaves the zones it was in (its last observation's frame is when). A zone's occupancy is the
//    number of tracks in it, per class.
//  - Dwell and loitering: a track's time in a zone counts from the frame it entered; "zone-left"
//    carries it (frames). With `loiter_frames`, a track observed in a zone that many frames after
//    it entered fires "zone-loitering" once for that stay, and is loitering until it leaves.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace cudanms {

struct CountPoint {
  double x, y;
};

struct CountLine {
  std::string name;
  CountPoint a, b;
};

struct CountZone {
  std::string name;
  std::vector<CountPoint> polygon;
};

// "NAME:x1,y1,x2,y2;NAME2:...": names of 1 to 64 letters, digits, '-' and '_', each once; numbers
// separated by commas or spaces. An empty text is no line. false with the first problem in
// *error, naming the line; with `normalized`, every coordinate must lie in [0, 1].
bool parse_lines(const std::string &text, bool normalized, std::vector<CountLine> *lines,
                 std::string *error);
// "NAME:x1,y1 x2,y2 x3,y3 ...;NAME2:...": at least 3 points, no two in a row equal, edges that
// do not cross or fold back, and some area.
bool parse_zones(const std::string &text, bool normalized, std::vector<CountZone> *zones,
                 std::string *error);

// How many shape texts (lines' or zones', not empty) parse_lines and parse_zones have read in
// this process: what a test counts to see a camera's start read its shapes once.
uint64_t shape_texts_parsed();

// The same line: its name and its points. Counter::set_lines keeps such a line's counts (and a
// caller keeping more of a line's, its counts by label, does as it does).
bool same_line(const CountLine &a, const CountLine &b);

enum class CountAnchor { kBottomCenter, kCenter, kTopCenter };

struct CounterParams {
  CountAnchor anchor = CountAnchor::kBottomCenter;
  double hysteresis = 0.1;     // the band on either side of a line or zone edge, x box height
  int64_t track_timeout = 30;  // frames without an observation before a track is forgotten
  int64_t crossing_frames = 4;  // observations on the other side that make a crossing count
  int64_t loiter_frames = 0;    // frames in a zone that make a track loiter; 0: never
};

struct CountObservation {
  uint64_t track_id;  // 0: not tracked, ignored
  float x1, y1, x2, y2;
  int32_t class_id;
};

enum class CountEventKind { kLineCrossed, kZoneEntered, kZoneLeft, kZoneLoitering };

struct CountEvent {
  CountEventKind kind;
  size_t index;   // of the line or zone
  int direction;  // lines: +1 in, -1 out; zones: 0
  uint64_t track_id;
  int32_t class_id;
  int64_t dwell_frames;  // zone-left and zone-loitering: frames since it entered; else 0
};

struct LineCounts {
  uint64_t in = 0, out = 0;
};
inline bool operator==(const LineCounts &a, const LineCounts &b) {
  return a.in == b.in && a.out == b.out;
}

class Counter {
 public:
  explicit Counter(CounterParams params = {});
  ~Counter();
  Counter(const Counter &) = delete;
  Counter &operator=(const Counter &) = delete;

  void set_params(const CounterParams &params);
  // New lines (zones): one of the same name and the same points keeps its counts and what it
  // knows of each track; the others start from zero.
  void set_lines(const std::vector<CountLine> &lines);
  void set_zones(const std::vector<CountZone> &zones);
  const std::vector<CountLine> &lines() const;
  const std::vector<CountZone> &zones() const;

  // Adds the observations of one frame (frames as the tracker counts them; a frame at or before
  // the previous one forgets every track first, keeping the counts) and appends its events.
  void update(int64_t frame, const std::vector<CountObservation> &observations,
              std::vector<CountEvent> *events);
  // Forgets every track (as if none had been seen), keeping the line counts; the zones empty
  // without events.
  void forget_tracks();

  LineCounts line_counts(size_t line) const;
  // Sets a line's running counts (to resume counting in a new counter).
  void set_line_counts(size_t line, LineCounts counts);
  // Tracks in the zone now, by class.
  std::map<int32_t, uint64_t> occupancy(size_t zone) const;
  // Tracks in the zone now that have loitered in it.
  uint64_t loitering(size_t zone) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A line's running counts: its totals and its crossings by label. What a counter carries over
// into a new one (boxcount's "counts" property, the camera service's resumed counts).
struct LineTally {
  LineCounts total;
  std::map<std::string, LineCounts> by_label;
};
using LineTallies = std::map<std::string, LineTally>;  // by line name

// A Counter whose classes are labels: each label seen gets a class id of its own (so that a
// zone's occupancy is by label), and each line counts its crossings by label beside its totals.
// Counts resumed from an earlier counter go to their lines now, or when a line of that name
// comes; a line moved or gone starts again, its counts by label as its totals.
class LabelledCounter {
 public:
  explicit LabelledCounter(CounterParams params = {}) : counter_(params) {}

  // The counter's lines and zones, its occupancy and totals (changed through this class alone,
  // so that the counts by label follow its lines).
  const Counter &counter() const { return counter_; }
  void set_lines(const std::vector<CountLine> &lines);
  void set_zones(const std::vector<CountZone> &zones) { counter_.set_zones(zones); }
  void set_params(const CounterParams &params) { counter_.set_params(params); }
  void forget_tracks() { counter_.forget_tracks(); }

  // The class id of a label (given on its first sight), and back.
  int32_t class_of(const std::string &label);
  const std::string &label_of(int32_t class_id) const { return labels_.at(class_id); }

  // Counter::update, then each crossing counted for its label.
  void update(int64_t frame, const std::vector<CountObservation> &observations,
              std::vector<CountEvent> *events);

  // Counts to go on from, by line name: replace those of the lines of these names.
  void resume(const LineTallies &counts);
  // Every line's counts now.
  LineTallies tallies() const;
  const std::map<std::string, LineCounts> &by_label(size_t line) const;

 private:
  void apply_resumed();

  Counter counter_;
  std::map<std::string, int32_t> classes_;
  std::vector<std::string> labels_;
  std::vector<std::map<std::string, LineCounts>> by_label_;  // by line index
  LineTallies resumed_;                                      // for lines that do not exist yet
};

}  // namespace cudanms
