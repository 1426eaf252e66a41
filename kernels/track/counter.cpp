// The counter's state machine (cudanms/count.h has the rules).
#include <limits>
#include <unordered_map>

#include "count_geometry.h"
#include "cudanms/count.h"

namespace cudanms {
namespace {

namespace geometry = count_geometry;

// What a track is to one line.
struct LineSide {
  int side = 0;                 // -1 or +1 once it left the band on that side; 0: not yet
  bool met_on_segment = false;  // the last time its path met the line, it was on the segment
  int64_t seen_across = 0;      // observations on the other side since it crossed, not counted yet
};

// What a track is to one zone.
enum class ZoneSide : int8_t { kUnknown, kIn, kOut };

struct ZoneState {
  ZoneSide side = ZoneSide::kUnknown;
  int64_t entered = 0;    // the frame it entered on, while in
  bool loitered = false;  // its loitering event fired during this stay
};

struct TrackState {
  CountPoint anchor;
  int64_t last_frame;
  int32_t class_id;
  std::vector<LineSide> lines;
  std::vector<ZoneState> zones;
};

bool same_item(const CountLine &a, const CountLine &b) { return same_line(a, b); }

bool same_item(const CountZone &a, const CountZone &b) {
  if (a.name != b.name || a.polygon.size() != b.polygon.size()) return false;
  for (size_t i = 0; i < a.polygon.size(); ++i)
    if (a.polygon[i].x != b.polygon[i].x || a.polygon[i].y != b.polygon[i].y) return false;
  return true;
}

// For each new item, the index of the old one it continues (same name, same points), or -1.
template <typename Item>
std::vector<long> continued(const std::vector<Item> &old_items,
                            const std::vector<Item> &new_items) {
  std::vector<long> from(new_items.size(), -1);
  for (size_t i = 0; i < new_items.size(); ++i)
    for (size_t j = 0; j < old_items.size(); ++j)
      if (same_item(old_items[j], new_items[i])) from[i] = static_cast<long>(j);
  return from;
}

template <typename T>
std::vector<T> remapped(const std::vector<T> &old_values, const std::vector<long> &from) {
  std::vector<T> out(from.size());
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] >= 0) out[i] = old_values[static_cast<size_t>(from[i])];
  return out;
}

}  // namespace

bool same_line(const CountLine &a, const CountLine &b) {
  return a.name == b.name && a.a.x == b.a.x && a.a.y == b.a.y && a.b.x == b.b.x &&
         a.b.y == b.b.y;
}

struct Counter::State {
  CounterParams params;
  std::vector<CountLine> lines;
  std::vector<CountZone> zones;
  std::vector<LineCounts> counts;
  std::unordered_map<uint64_t, TrackState> tracks;
  int64_t last_frame = std::numeric_limits<int64_t>::min();

  CountPoint anchor_of(const CountObservation &o) const {
    const double cx = (static_cast<double>(o.x1) + o.x2) / 2;
    switch (params.anchor) {
      case CountAnchor::kCenter:
        return {cx, (static_cast<double>(o.y1) + o.y2) / 2};
      case CountAnchor::kTopCenter:
        return {cx, o.y1};
      case CountAnchor::kBottomCenter:
        break;
    }
    return {cx, o.y2};
  }

  void observe_line(size_t index, TrackState &t, const CountPoint &from, bool seen_before,
                    const CountPoint &to, double band, uint64_t id,
                    std::vector<CountEvent> *events) {
    const CountLine &line = lines[index];
    LineSide &state = t.lines[index];
    if (seen_before) {
      // Where the step from -> to meets the line, if it does: the crossing point, or the end
      // of the step that lies on the line.
      const double s0 = geometry::side(line.a, line.b, from),
                   s1 = geometry::side(line.a, line.b, to);
      if ((s0 <= 0 && s1 >= 0) || (s0 >= 0 && s1 <= 0)) {
        const double along = s1 == 0   ? geometry::along(line.a, line.b, to)
                             : s0 == 0 ? geometry::along(line.a, line.b, from)
                                       : geometry::crossing_along(line.a, line.b, from, to);
        state.met_on_segment = along >= 0 && along <= 1;
      }
    }
    const double distance = geometry::signed_distance(line.a, line.b, to);
    const int firm = distance > band ? 1 : distance < -band ? -1 : 0;
    if (firm == 0) return;
    if (state.side == 0 || firm == state.side) {  // back before the crossing held: none
      state.side = firm;
      state.seen_across = 0;
      return;
    }
    if (state.seen_across == 0 && !state.met_on_segment) {  // around the line's end
      state.side = firm;
      return;
    }
    if (++state.seen_across < params.crossing_frames) return;
    events->push_back({CountEventKind::kLineCrossed, index, firm, id, t.class_id, 0});
    (firm > 0 ? counts[index].in : counts[index].out)++;
    state.side = firm;
    state.seen_across = 0;
  }

  void observe_zone(size_t index, TrackState &t, const CountPoint &at, double band, int64_t frame,
                    uint64_t id, std::vector<CountEvent> *events) {
    const CountZone &zone = zones[index];
    ZoneState &state = t.zones[index];
    const bool in = geometry::inside(zone.polygon, at);
    if (geometry::distance_to_outline(zone.polygon, at) > band) {  // beyond the band
      const ZoneSide now = in ? ZoneSide::kIn : ZoneSide::kOut;
      if (now == ZoneSide::kIn && state.side != ZoneSide::kIn) {
        events->push_back({CountEventKind::kZoneEntered, index, 0, id, t.class_id, 0});
        state.entered = frame;
        state.loitered = false;
      }
      if (now == ZoneSide::kOut && state.side == ZoneSide::kIn)
        events->push_back(
            {CountEventKind::kZoneLeft, index, 0, id, t.class_id, frame - state.entered});
      state.side = now;
    }
    if (state.side == ZoneSide::kIn && !state.loitered && params.loiter_frames > 0 &&
        frame - state.entered >= params.loiter_frames) {
      events->push_back(
          {CountEventKind::kZoneLoitering, index, 0, id, t.class_id, frame - state.entered});
      state.loitered = true;
    }
  }

  void leave_zones(uint64_t id, TrackState &t, int64_t frame, std::vector<CountEvent> *events) {
    for (size_t z = 0; z < t.zones.size(); ++z)
      if (t.zones[z].side == ZoneSide::kIn)
        events->push_back(
            {CountEventKind::kZoneLeft, z, 0, id, t.class_id, frame - t.zones[z].entered});
  }
};

Counter::Counter(CounterParams params) : state_(std::make_unique<State>()) {
  state_->params = params;
}

Counter::~Counter() = default;

void Counter::set_params(const CounterParams &params) { state_->params = params; }

void Counter::set_lines(const std::vector<CountLine> &lines) {
  State &s = *state_;
  const std::vector<long> from = continued(s.lines, lines);
  s.counts = remapped(s.counts, from);
  for (auto &[id, t] : s.tracks) t.lines = remapped(t.lines, from);
  s.lines = lines;
}

void Counter::set_zones(const std::vector<CountZone> &zones) {
  State &s = *state_;
  const std::vector<long> from = continued(s.zones, zones);
  for (auto &[id, t] : s.tracks) {
    t.zones = remapped(t.zones, from);  // a new zone starts as kUnknown (the zero value)
  }
  s.zones = zones;
}

const std::vector<CountLine> &Counter::lines() const { return state_->lines; }
const std::vector<CountZone> &Counter::zones() const { return state_->zones; }

void Counter::forget_tracks() { state_->tracks.clear(); }

void Counter::update(int64_t frame, const std::vector<CountObservation> &observations,
                     std::vector<CountEvent> *events) {
  State &s = *state_;
  if (frame <= s.last_frame) forget_tracks();
  s.last_frame = frame;
  for (auto it = s.tracks.begin(); it != s.tracks.end();) {
    if (frame - it->second.last_frame > s.params.track_timeout) {
      s.leave_zones(it->first, it->second, it->second.last_frame, events);
      it = s.tracks.erase(it);
    } else {
      ++it;
    }
  }
  for (const CountObservation &o : observations) {
    if (o.track_id == 0) continue;
    const CountPoint at = s.anchor_of(o);
    const double band = s.params.hysteresis * std::max(0.0, static_cast<double>(o.y2) - o.y1);
    auto [it, fresh] = s.tracks.try_emplace(o.track_id);
    TrackState &t = it->second;
    if (fresh) {
      t.lines.resize(s.lines.size());
      t.zones.resize(s.zones.size());
    }
    const CountPoint from = fresh ? at : t.anchor;
    t.class_id = o.class_id;
    for (size_t l = 0; l < s.lines.size(); ++l)
      s.observe_line(l, t, from, !fresh, at, band, o.track_id, events);
    for (size_t z = 0; z < s.zones.size(); ++z)
      s.observe_zone(z, t, at, band, frame, o.track_id, events);
    t.anchor = at;
    t.last_frame = frame;
  }
}

LineCounts Counter::line_counts(size_t line) const { return state_->counts.at(line); }

void Counter::set_line_counts(size_t line, LineCounts counts) { state_->counts.at(line) = counts; }

std::map<int32_t, uint64_t> Counter::occupancy(size_t zone) const {
  std::map<int32_t, uint64_t> out;
  for (const auto &[id, t] : state_->tracks)
    if (zone < t.zones.size() && t.zones[zone].side == ZoneSide::kIn) out[t.class_id]++;
  return out;
}

uint64_t Counter::loitering(size_t zone) const {
  uint64_t n = 0;
  for (const auto &[id, t] : state_->tracks)
    if (zone < t.zones.size() && t.zones[zone].side == ZoneSide::kIn && t.zones[zone].loitered) n++;
  return n;
}

}  // namespace cudanms
