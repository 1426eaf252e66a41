#include "count_eval.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace cudanms::tools {

std::vector<Crossing> count_crossings(const std::vector<MotBox> &tracks,
                                      const std::vector<CountLine> &lines,
                                      const CounterParams &params) {
  std::map<int64_t, std::vector<CountObservation>> frames;
  for (const MotBox &b : tracks)
    frames[b.frame].push_back({static_cast<uint64_t>(b.id), static_cast<float>(b.x),
                               static_cast<float>(b.y), static_cast<float>(b.x + b.w),
                               static_cast<float>(b.y + b.h), 0});
  std::vector<Crossing> out;
  if (frames.empty() || lines.empty()) return out;
  Counter counter(params);
  counter.set_lines(lines);
  const std::vector<CountObservation> none;
  std::vector<CountEvent> events;
  for (int64_t f = frames.begin()->first; f <= frames.rbegin()->first; ++f) {
    const auto found = frames.find(f);
    events.clear();
    counter.update(f, found == frames.end() ? none : found->second, &events);
    for (const CountEvent &e : events)
      if (e.kind == CountEventKind::kLineCrossed)
        out.push_back({f, e.index, e.direction, static_cast<int64_t>(e.track_id)});
  }
  return out;
}

std::vector<CountLine> middle_lines(double width, double height) {
  return {{"vertical", {width / 2, 0}, {width / 2, height}},
          {"horizontal", {0, height / 2}, {width, height / 2}}};
}

std::vector<CountScore> score_counts(const std::vector<Crossing> &truth,
                                     const std::vector<Crossing> &counted,
                                     const std::vector<CountLine> &lines, int64_t window) {
  std::vector<CountScore> out;
  for (size_t line = 0; line < lines.size(); ++line) {
    for (const int direction : {+1, -1}) {
      CountScore s;
      s.line = lines[line].name;
      s.direction = direction;
      std::vector<int64_t> true_frames, counted_frames;
      for (const Crossing &c : truth)
        if (c.line == line && c.direction == direction) true_frames.push_back(c.frame);
      for (const Crossing &c : counted)
        if (c.line == line && c.direction == direction) counted_frames.push_back(c.frame);
      s.truth = true_frames.size();
      s.counted = counted_frames.size();
      std::vector<bool> taken(counted_frames.size(), false);
      for (const int64_t t : true_frames) {  // in frame order: count_crossings gives them so
        size_t best = counted_frames.size();
        for (size_t k = 0; k < counted_frames.size(); ++k) {
          const int64_t gap = std::llabs(counted_frames[k] - t);
          if (taken[k] || gap > window) continue;
          if (best == counted_frames.size() || gap < std::llabs(counted_frames[best] - t)) best = k;
        }
        if (best < counted_frames.size()) {
          taken[best] = true;
          s.matched++;
        }
      }
      out.push_back(s);
    }
  }
  return out;
}

std::string format_count_scores(const std::vector<std::pair<std::string, CountScore>> &rows) {
  std::string out;
  char line[160];
  std::snprintf(line, sizeof line, "%-16s %-12s %-4s %6s %8s %6s %8s\n", "sequence", "line", "dir",
                "truth", "counted", "error", "matched");
  out += line;
  uint64_t truth = 0, counted = 0, matched = 0, absolute_error = 0;
  for (const auto &[name, s] : rows) {
    std::snprintf(line, sizeof line,
                  "%-16s %-12s %-4s %6" PRIu64 " %8" PRIu64 " %+6" PRId64 " %8" PRIu64 "\n",
                  name.c_str(), s.line.c_str(), s.direction > 0 ? "in" : "out", s.truth, s.counted,
                  s.error(), s.matched);
    out += line;
    truth += s.truth;
    counted += s.counted;
    matched += s.matched;
    absolute_error += static_cast<uint64_t>(std::llabs(s.error()));
  }
  std::snprintf(line, sizeof line,
                "%-16s %-12s %-4s %6" PRIu64 " %8" PRIu64 " %6" PRIu64 " %8" PRIu64 "\n", "TOTAL",
                "", "", truth, counted, absolute_error, matched);
  out += line;
  std::snprintf(line, sizeof line,
                "total error %" PRIu64 " of %" PRIu64 " true crossings (%.1f %%); %" PRIu64
                " matched in time (%.1f %%)\n",
                absolute_error, truth, truth ? 100.0 * absolute_error / truth : 0.0, matched,
                truth ? 100.0 * matched / truth : 0.0);
  out += line;
  return out;
}

}  // namespace cudanms::tools
