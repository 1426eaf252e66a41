#include "count_commands.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "count_eval.h"
#include "mot.h"
#include "tool_support.h"

namespace cudanms::tools {
namespace {

// The lines to count over, shared by count and count-eval.
struct LineOptions {
  char *lines = nullptr;
  char *frame_size = nullptr;
  gboolean auto_lines = FALSE;
  gboolean normalized = FALSE;
  double hysteresis = CounterParams().hysteresis;
  gint crossing_frames = static_cast<gint>(CounterParams().crossing_frames);

  ~LineOptions() {
    g_free(lines);
    g_free(frame_size);
  }

  void add_entries(std::vector<GOptionEntry> *entries) {
    const GOptionEntry mine[] = {
        {"lines", 'l', 0, G_OPTION_ARG_STRING, &lines,
         "The lines, NAME:x1,y1,x2,y2;... in pixels (boxcount's lines)", "LINES"},
        {"auto-lines", 0, 0, G_OPTION_ARG_NONE, &auto_lines,
         "A vertical and a horizontal line through the middle of the frame (needs --frame-size)",
         nullptr},
        {"frame-size", 0, 0, G_OPTION_ARG_STRING, &frame_size,
         "The frames' size, for --auto-lines and --normalized", "WxH"},
        {"normalized", 0, 0, G_OPTION_ARG_NONE, &normalized,
         "--lines are in 0..1 of the frame (needs --frame-size)", nullptr},
        {"hysteresis", 0, 0, G_OPTION_ARG_DOUBLE, &hysteresis,
         "The band either side of a line, x the box's height (boxcount's; default 0.1)", "H"},
        {"crossing-frames", 0, 0, G_OPTION_ARG_INT, &crossing_frames,
         "Observations on the other side that make a crossing count (boxcount's; default 4)",
         "N"},
    };
    entries->insert(entries->end(), std::begin(mine), std::end(mine));
  }

  // The lines in pixels and the counter's parameters, or false with the reason.
  bool resolve(std::vector<CountLine> *out, CounterParams *params, std::string *why) const {
    double width = 0, height = 0;
    if (frame_size) {
      char x = 0, rest = 0;
      if (std::sscanf(frame_size, "%lf%c%lf%c", &width, &x, &height, &rest) != 3 || x != 'x' ||
          !(width >= 1 && height >= 1 && width <= 1e5 && height <= 1e5)) {
        *why = std::string("--frame-size is WIDTHxHEIGHT in pixels, not '") + frame_size + "'";
        return false;
      }
    }
    if (!(hysteresis >= 0 && hysteresis <= 10)) {
      *why = "--hysteresis lies in [0, 10]";
      return false;
    }
    params->hysteresis = hysteresis;
    if (!(crossing_frames >= 1 && crossing_frames <= 1000)) {
      *why = "--crossing-frames lies in [1, 1000]";
      return false;
    }
    params->crossing_frames = crossing_frames;
    if ((auto_lines || normalized) && !frame_size) {
      *why = std::string(auto_lines ? "--auto-lines" : "--normalized") + " needs --frame-size";
      return false;
    }
    if (auto_lines == (lines != nullptr)) {
      *why = "give --lines or --auto-lines";
      return false;
    }
    if (auto_lines) {
      *out = middle_lines(width, height);
      return true;
    }
    if (!parse_lines(lines, normalized, out, why)) return false;
    if (out->empty()) {
      *why = "--lines has no line";
      return false;
    }
    if (normalized)
      for (CountLine &l : *out) {
        l.a = {l.a.x * width, l.a.y * height};
        l.b = {l.b.x * width, l.b.y * height};
      }
    return true;
  }
};

constexpr char kCountSummary[] =
    "Counts the line crossings of a MOTChallenge tracks file (frame,id,x,y,w,h,...) with the\n"
    "counter boxcount runs: per line, in and out.";

constexpr char kCountDescription[] =
    "A track's position is its box's bottom centre; it crosses a line \"in\" from the line's\n"
    "left to its right (A to B looking along it), \"out\" the other way, once past a band of\n"
    "--hysteresis x its box's height (docs/elements.md, boxcount). Every frame from the file's\n"
    "first to its last is a frame: one without boxes ages the tracks. --events FILE writes each\n"
    "crossing, frame,line,direction,track.\n\n";

constexpr char kCountEvalSummary[] =
    "Scores the line counts of tracks against those of the ground truth: the same counter over\n"
    "both, per line and direction: truth, counted, error, and crossings matched in time.";

constexpr char kCountEvalDescription[] =
    "Give --gt and --result once per sequence, in pairs (as mot-eval): each pair's lines and\n"
    "directions are rows named by the ground truth's folder, and a TOTAL row adds them up\n"
    "(its error: the sum of |error|). Ground-truth rows scoring below 1 are dropped; the truth\n"
    "is counted with --crossing-frames 1 (its boxes do not flicker). A counted\n"
    "crossing matches a true one of the same line and direction at most --window frames apart,\n"
    "one to one, the earliest true crossing first taking the nearest.\n\n";

}  // namespace

int run_count(int argc, char **argv) {
  g_autofree char *tracks_path = nullptr;
  g_autofree char *events_path = nullptr;
  LineOptions line_options;
  std::vector<GOptionEntry> entries = {
      {"tracks", 't', 0, G_OPTION_ARG_FILENAME, &tracks_path, "The tracks (required)",
       "TRACKS.txt"},
      {"events", 0, 0, G_OPTION_ARG_FILENAME, &events_path, "Each crossing, to this file", "FILE"},
  };
  line_options.add_entries(&entries);
  entries.push_back({});
  const std::string description = std::string(kCountDescription) + kExitStatusHelp;
  if (!parse_options("count", "--tracks TRACKS.txt --lines LINES|--auto-lines", kCountSummary,
                     description.c_str(), entries.data(), argc, argv))
    return kExitBadInput;
  std::vector<CountLine> lines;
  CounterParams params;
  std::string why;
  if (!tracks_path)
    why = "--tracks TRACKS.txt is required";
  else
    line_options.resolve(&lines, &params, &why);
  if (!why.empty()) {
    report("count", why);
    return kExitBadInput;
  }
  std::vector<MotBox> tracks;
  if (!read_mot_file(tracks_path, -INFINITY, &tracks, &why)) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return kExitBadInput;
  }
  const std::vector<Crossing> crossings = count_crossings(tracks, lines, params);
  std::string table = "line          in    out\n", events;
  for (size_t i = 0; i < lines.size(); ++i) {
    int in = 0, out = 0;
    for (const Crossing &c : crossings)
      if (c.line == i) (c.direction > 0 ? in : out)++;
    char row[128];
    std::snprintf(row, sizeof row, "%-12s %4d %6d\n", lines[i].name.c_str(), in, out);
    table += row;
  }
  for (const Crossing &c : crossings)
    events += std::to_string(c.frame) + "," + lines[c.line].name + "," +
              (c.direction > 0 ? "in" : "out") + "," + std::to_string(c.track) + "\n";
  if (events_path) {
    const Status written = write_text(events_path, events);
    if (!written.ok()) {
      report("count", written.message());
      return kExitFailure;
    }
  }
  return write_text("", table).ok() ? kExitOk : kExitFailure;
}

int run_count_eval(int argc, char **argv) {
  g_auto(GStrv) gts = nullptr;
  g_auto(GStrv) results = nullptr;
  gint64 window = 25;
  LineOptions line_options;
  std::vector<GOptionEntry> entries = {
      {"gt", 'g', 0, G_OPTION_ARG_FILENAME_ARRAY, &gts, "Ground truth (once per sequence)",
       "GT.txt"},
      {"result", 'r', 0, G_OPTION_ARG_FILENAME_ARRAY, &results,
       "The tracker's output for the --gt before it", "TRACKS.txt"},
      {"window", 'w', 0, G_OPTION_ARG_INT64, &window,
       "Frames apart at most for a counted crossing to match a true one (default 25)", "K"},
  };
  line_options.add_entries(&entries);
  entries.push_back({});
  const std::string description = std::string(kCountEvalDescription) + kExitStatusHelp;
  if (!parse_options("count-eval", "--gt GT.txt --result TRACKS.txt --lines LINES|--auto-lines",
                     kCountEvalSummary, description.c_str(), entries.data(), argc, argv))
    return kExitBadInput;
  const guint n = gts ? g_strv_length(gts) : 0;
  std::vector<CountLine> lines;
  CounterParams params;
  std::string why;
  if (n == 0 || n != (results ? g_strv_length(results) : 0))
    why = "give --gt and --result in pairs, at least one of each";
  else if (window < 0 || window > 1000000)
    why = "--window lies in [0, 1000000]";
  else
    line_options.resolve(&lines, &params, &why);
  if (!why.empty()) {
    report("count-eval", why);
    return kExitBadInput;
  }
  // The truth's boxes do not flicker: every crossing of a true track is a true crossing, however
  // soon the track ends after it.
  CounterParams truth_params = params;
  truth_params.crossing_frames = 1;
  std::vector<std::pair<std::string, CountScore>> rows;
  for (guint i = 0; i < n; ++i) {
    std::vector<MotBox> gt, hyp;
    if (!read_mot_file(gts[i], 1.0, &gt, &why) ||
        !read_mot_file(results[i], -INFINITY, &hyp, &why)) {
      std::fprintf(stderr, "%s\n", why.c_str());
      return kExitBadInput;
    }
    for (const CountScore &s : score_counts(count_crossings(gt, lines, truth_params),
                                            count_crossings(hyp, lines, params), lines, window))
      rows.emplace_back(mot_sequence_name(gts[i]), s);
  }
  return write_text("", format_count_scores(rows)).ok() ? kExitOk : kExitFailure;
}

}  // namespace cudanms::tools
