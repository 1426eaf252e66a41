#include "track_commands.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench.h"
#include "cudanms/track.h"
#include "mot.h"
#include "moving_scene.h"
#include "tool_support.h"

#ifdef CUDANMS_CAMERA_MOTION
#include <opencv2/imgproc.hpp>

#include "cudanms/camera_motion.h"
#endif

namespace cudanms::tools {
namespace {

// The tracker's options, shared by track and track-bench.
struct TrackerOptions {
  double track_thresh, high_thresh, match_thresh, low_thresh;
  gint64 track_buffer, min_hits;

  explicit TrackerOptions(const TrackerParams &p = {})
      : track_thresh(p.track_thresh),
        high_thresh(p.high_thresh),
        match_thresh(p.match_thresh),
        low_thresh(p.low_thresh),
        track_buffer(p.track_buffer),
        min_hits(p.min_hits) {}

  // Appends the option entries to `entries`.
  void add_entries(std::vector<GOptionEntry> *entries) {
    const GOptionEntry mine[] = {
        {"track-thresh", 0, 0, G_OPTION_ARG_DOUBLE, &track_thresh,
         "High boxes score at least this (default 0.5)", "S"},
        {"high-thresh", 0, 0, G_OPTION_ARG_DOUBLE, &high_thresh,
         "A new track needs a box of at least this score (default 0.6)", "S"},
        {"match-thresh", 0, 0, G_OPTION_ARG_DOUBLE, &match_thresh,
         "First matching: cost 1 - IoU x score below this (default 0.8)", "C"},
        {"low-thresh", 0, 0, G_OPTION_ARG_DOUBLE, &low_thresh,
         "Low boxes score at least this; lower ones are ignored (default 0.1)", "S"},
        {"track-buffer", 0, 0, G_OPTION_ARG_INT64, &track_buffer,
         "Frames a lost track waits to be found again (default 30)", "FRAMES"},
        {"min-hits", 0, 0, G_OPTION_ARG_INT64, &min_hits,
         "Frames in a row that confirm a new track (default 2)", "N"},
    };
    entries->insert(entries->end(), std::begin(mine), std::end(mine));
  }

  // The params, or false with the reason.
  bool params(TrackerParams *p, std::string *why) const {
    for (const double v : {track_thresh, high_thresh, match_thresh, low_thresh})
      if (!(v >= 0 && v <= 1)) {
        *why = "thresholds lie in [0, 1]";
        return false;
      }
    if (track_buffer < 0 || track_buffer > 100000) {
      *why = "--track-buffer lies in [0, 100000]";
      return false;
    }
    if (min_hits < 1 || min_hits > 1000) {
      *why = "--min-hits lies in [1, 1000]";
      return false;
    }
    p->track_thresh = static_cast<float>(track_thresh);
    p->high_thresh = static_cast<float>(high_thresh);
    p->match_thresh = static_cast<float>(match_thresh);
    p->low_thresh = static_cast<float>(low_thresh);
    p->track_buffer = track_buffer;
    p->min_hits = static_cast<uint32_t>(min_hits);
    return true;
  }
};

// --- track -----------------------------------------------------------------------------------

constexpr char kTrackSummary[] =
    "Tracks the detections of a MOTChallenge detection file (frame,-1,x,y,w,h,score,...) with\n"
    "ByteTrack and writes MOTChallenge tracks (frame,id,x,y,w,h,score,-1,-1,-1).";

constexpr char kTrackDescription[] =
    "Every frame from the file's first to its last is a frame of the stream: a frame without\n"
    "detections ages the tracks. The boxes written are the tracks' Kalman-filtered boxes\n"
    "(ByteTrack's output), or the detections themselves with --boxes detection.\n\n";

}  // namespace

int run_track(int argc, char **argv) {
  g_autofree char *input = nullptr;
  g_autofree char *output = nullptr;
  g_autofree char *boxes = nullptr;
  TrackerOptions tracker_options;
  std::vector<GOptionEntry> entries = {
      {"input", 'i', 0, G_OPTION_ARG_FILENAME, &input, "The detections (required)", "DET.txt"},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "The tracks (default: stdout)",
       "TRACKS.txt"},
      {"boxes", 0, 0, G_OPTION_ARG_STRING, &boxes,
       "filtered (default: the Kalman filter's) or detection", "KIND"},
  };
  tracker_options.add_entries(&entries);
  entries.push_back({});
  const std::string description = std::string(kTrackDescription) + kExitStatusHelp;
  if (!parse_options("track", "--input DET.txt", kTrackSummary, description.c_str(), entries.data(),
                     argc, argv))
    return kExitBadInput;
  if (input == nullptr) {
    report("track", "--input DET.txt is required");
    return kExitBadInput;
  }
  const std::string box_kind = boxes ? boxes : "filtered";
  if (box_kind != "filtered" && box_kind != "detection") {
    report("track", "--boxes is filtered or detection, not '" + box_kind + "'");
    return kExitBadInput;
  }
  TrackerParams params;
  std::string why;
  if (!tracker_options.params(&params, &why)) {
    report("track", why);
    return kExitBadInput;
  }
  std::vector<MotBox> detections;
  if (!read_mot_file(input, -INFINITY, &detections, &why)) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return kExitBadInput;
  }
  std::map<int64_t, std::vector<Detection>> frames;
  for (const MotBox &b : detections)
    frames[b.frame].push_back({static_cast<float>(b.x), static_cast<float>(b.y),
                               static_cast<float>(b.x + b.w), static_cast<float>(b.y + b.h),
                               static_cast<float>(b.score), 0});
  std::vector<MotBox> tracks;
  if (!frames.empty()) {
    Tracker tracker(params);
    const std::vector<Detection> none;
    for (int64_t f = frames.begin()->first; f <= frames.rbegin()->first; ++f) {
      const auto found = frames.find(f);
      const std::vector<Detection> &dets = found == frames.end() ? none : found->second;
      for (const TrackedBox &t : tracker.update(f, dets).tracks) {
        const Detection &d = dets[t.detection];
        const bool filtered = box_kind == "filtered";
        const double x1 = filtered ? t.x1 : d.x1, y1 = filtered ? t.y1 : d.y1;
        const double x2 = filtered ? t.x2 : d.x2, y2 = filtered ? t.y2 : d.y2;
        tracks.push_back({f, static_cast<int64_t>(t.id), x1, y1, x2 - x1, y2 - y1, t.score});
      }
    }
  }
  const Status written = write_text(output ? output : "", format_mot_rows(tracks));
  if (!written.ok()) {
    report("track", written.message());
    return kExitFailure;
  }
  return kExitOk;
}

namespace {

// --- mot-eval --------------------------------------------------------------------------------

constexpr char kMotEvalSummary[] =
    "Scores tracks against ground truth as the MOT benchmark does (py-motmetrics): CLEAR MOT\n"
    "(MOTA, MOTP, FP, FN, IDsw, FM, MT/PT/ML) and IDF1/IDP/IDR, IoU 0.5 to match; HOTA, DetA,\n"
    "AssA and LocA (TrackEval's, over IoU 0.05 to 0.95).";

constexpr char kMotEvalDescription[] =
    "Give --gt and --result once per sequence, in pairs: each pair is a row of the table, named\n"
    "by the folder of its ground truth (SEQ/gt.txt or SEQ/gt/gt.txt: SEQ), and with more than\n"
    "one pair an OVERALL row adds them up. Ground-truth rows scoring below 1 (MOT15's flag 0,\n"
    "\"ignore\") are dropped before matching. MOTP is the mean 1 - IoU of the matches, as\n"
    "py-motmetrics gives it (the devkit prints the mean IoU in percent: 100 x (1 - MOTP)).\n\n";

}  // namespace

int run_mot_eval(int argc, char **argv) {
  g_auto(GStrv) gts = nullptr;
  g_auto(GStrv) results = nullptr;
  const GOptionEntry entries[] = {{"gt", 'g', 0, G_OPTION_ARG_FILENAME_ARRAY, &gts,
                                   "Ground truth (once per sequence)", "GT.txt"},
                                  {"result", 'r', 0, G_OPTION_ARG_FILENAME_ARRAY, &results,
                                   "The tracker's output for the --gt before it", "TRACKS.txt"},
                                  {}};
  const std::string description = std::string(kMotEvalDescription) + kExitStatusHelp;
  if (!parse_options("mot-eval", "--gt GT.txt --result TRACKS.txt", kMotEvalSummary,
                     description.c_str(), entries, argc, argv))
    return kExitBadInput;
  const guint n = gts ? g_strv_length(gts) : 0;
  if (n == 0 || n != (results ? g_strv_length(results) : 0)) {
    report("mot-eval", "give --gt and --result in pairs, at least one of each");
    return kExitBadInput;
  }
  std::vector<std::pair<std::string, MotScores>> rows;
  MotScores overall;
  for (guint i = 0; i < n; ++i) {
    std::vector<MotBox> gt, hyp;
    std::string why;
    if (!read_mot_file(gts[i], 1.0, &gt, &why) ||
        !read_mot_file(results[i], -INFINITY, &hyp, &why)) {
      std::fprintf(stderr, "%s\n", why.c_str());
      return kExitBadInput;
    }
    const MotScores scores = score_mot(gt, hyp);
    overall += scores;
    rows.emplace_back(mot_sequence_name(gts[i]), scores);
  }
  if (n > 1) rows.emplace_back("OVERALL", overall);
  const Status written = write_text("", format_mot_table(rows));
  return written.ok() ? kExitOk : kExitFailure;
}

namespace {

// --- track-bench -----------------------------------------------------------------------------

constexpr char kTrackBenchSummary[] =
    "Times the tracker alone, on one core: host time of Tracker::update per frame at each size,\n"
    "on a scene of objects moving through a 1920x1080 frame (tools/moving_scene.h).";

constexpr char kTrackBenchDescription[] =
    "Each size runs --frames frames after as many warm-up frames; the table gives p50 and p99\n"
    "of the time per frame, the boxes a frame and the tracks held. --camera-motion also times\n"
    "boxtrack's camera-motion estimate (cudanms/camera_motion.h) on 1920x1080 frames of a\n"
    "texture panned and zoomed at random, the same number of frames.\n\n";

// The camera-motion estimate's host time per 1080p frame: "p50_ms p99_ms" after a warm-up, or
// why it cannot run.
std::string time_camera_motion(int64_t frames, uint64_t seed) {
#ifndef CUDANMS_CAMERA_MOTION
  (void)frames;
  (void)seed;
  return "camera motion: not built (no OpenCV)\n";
#else
  cv::Mat world(1400, 2400, CV_8UC1);
  cv::RNG rng(seed);
  rng.fill(world, cv::RNG::UNIFORM, 0, 256);
  cv::GaussianBlur(world, world, cv::Size(0, 0), 3);
  CameraMotionEstimator estimator;
  std::vector<double> samples_us;
  double x = 200, y = 160;
  cv::Mat frame;
  for (int64_t f = 1; f <= 2 * frames; ++f) {
    x += rng.uniform(-20.0, 20.0);
    y += rng.uniform(-10.0, 10.0);
    const double scale = rng.uniform(0.98, 1.02);
    const cv::Mat move = (cv::Mat_<double>(2, 3) << scale, 0, -x, 0, scale, -y);
    cv::warpAffine(world, frame, move, cv::Size(1920, 1080));
    const auto begin = std::chrono::steady_clock::now();
    estimator.next(frame.data, frame.cols, frame.rows, frame.step);
    const auto end = std::chrono::steady_clock::now();
    if (f > frames)
      samples_us.push_back(std::chrono::duration<double, std::micro>(end - begin).count());
  }
  const Latency latency = summarize(samples_us);
  char line[160];
  std::snprintf(line, sizeof line, "camera motion 1920x1080: p50_ms %.2f  p99_ms %.2f  frames %zu\n",
                latency.p50 / 1000, latency.p99 / 1000, latency.runs);
  return line;
#endif
}


}  // namespace

int run_track_bench(int argc, char **argv) {
  g_autofree char *sizes_text = nullptr;
  gint64 frames = 300;
  gint64 seed = 1;
  gboolean camera_motion = FALSE;
  TrackerOptions tracker_options;
  std::vector<GOptionEntry> entries = {
      {"sizes", 0, 0, G_OPTION_ARG_STRING, &sizes_text,
       "Objects in the scene (default 10,100,1000,10000)", "N,..."},
      {"frames", 0, 0, G_OPTION_ARG_INT64, &frames, "Timed frames per size (default 300)", "F"},
      {"seed", 0, 0, G_OPTION_ARG_INT64, &seed, "The scene's seed (default 1)", "SEED"},
      {"camera-motion", 0, 0, G_OPTION_ARG_NONE, &camera_motion,
       "Also time the camera-motion estimate on 1080p frames", nullptr},
  };
  tracker_options.add_entries(&entries);
  entries.push_back({});
  const std::string description = std::string(kTrackBenchDescription) + kExitStatusHelp;
  if (!parse_options("track-bench", "", kTrackBenchSummary, description.c_str(), entries.data(),
                     argc, argv))
    return kExitBadInput;
  std::vector<size_t> sizes = {10, 100, 1000, 10000};
  if (sizes_text && (!parse_sizes(sizes_text, &sizes) || sizes.empty())) {
    report("track-bench", std::string("--sizes takes positive numbers, not '") + sizes_text + "'");
    return kExitBadInput;
  }
  if (frames < 1) {
    report("track-bench", "--frames must be at least 1");
    return kExitBadInput;
  }
  TrackerParams params;
  std::string why;
  if (!tracker_options.params(&params, &why)) {
    report("track-bench", why);
    return kExitBadInput;
  }
  std::string table = "objects  boxes/frame  tracks  p50_us  p99_us  frames\n";
  for (const size_t n : sizes) {
    MovingSceneOptions scene_options;
    scene_options.objects = n;
    MovingScene scene(scene_options, static_cast<uint64_t>(seed));
    Tracker tracker(params);
    std::vector<double> samples_us;
    size_t boxes = 0, tracks = 0;
    for (int64_t f = 1; f <= 2 * frames; ++f) {
      const std::vector<Detection> dets = scene.next();
      const auto begin = std::chrono::steady_clock::now();
      const TrackedFrame &out = tracker.update(f, dets);
      const auto end = std::chrono::steady_clock::now();
      if (f <= frames) continue;  // warm-up: the tracks build up
      samples_us.push_back(std::chrono::duration<double, std::micro>(end - begin).count());
      boxes += dets.size();
      tracks += out.tracked + out.lost + out.tentative;
    }
    const Latency latency = summarize(samples_us);
    char line[160];
    std::snprintf(line, sizeof line, "%7zu  %11.0f  %6.0f  %6.1f  %6.1f  %6zu\n", n,
                  static_cast<double>(boxes) / frames, static_cast<double>(tracks) / frames,
                  latency.p50, latency.p99, latency.runs);
    table += line;
  }
  if (camera_motion) table += time_camera_motion(frames, static_cast<uint64_t>(seed));
  const Status written = write_text("", table);
  return written.ok() ? kExitOk : kExitFailure;
}

}  // namespace cudanms::tools
