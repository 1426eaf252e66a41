// cudanms-tool: non-maximum suppression over candidate files, and synthetic candidates to feed it.
// Each subcommand is one entry of kSubcommands, with its own GOptionContext.
#include <glib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <clocale>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench.h"
#include "candidate_file.h"
#include "count_commands.h"
#include "cudanms/nms.h"
#include "synthetic.h"
#include "tool_support.h"
#include "track_commands.h"

namespace cudanms::tools {
namespace {

// --- nms ------------------------------------------------------------------------------------

constexpr char kNmsSummary[] =
    "Runs non-maximum suppression on the candidates in FILE and prints the kept ones, in the\n"
    "input's format and in the input's order (each kept line as written).";

constexpr char kNmsDescription[] =
    "Formats, one detection a line; blank lines and lines starting with '#' are skipped:\n"
    "  oro  x,y,w,score                integer square window x..x+w, y..y+w, class 0\n"
    "                                  (the benchmark format of Oro et al., ICASSP 2016)\n"
    "  csv  x1,y1,x2,y2,score[,class]  float corners, integer class (default 0)\n"
    "Without --format, a name ending in .csv is read as csv and any other as oro.\n"
    "\n"
    "Methods:\n"
    "  greedy  the standard NMS of OpenCV and torchvision: walk by score, keep a candidate\n"
    "          unless a kept one overlaps it by more than the threshold\n"
    "  matrix  the map/reduce NMS of Oro et al.: drop a candidate when any higher-scoring one\n"
    "          overlaps it by at least the threshold, kept or not\n"
    "  soft    Soft-NMS as OpenCV's softNMSBoxes: overlapping scores decay instead (linear\n"
    "          above the threshold, or gaussian with --sigma); --score-threshold is the floor\n"
    "  weighted  greedy, each kept box the score-weighted mean of the boxes it suppressed\n"
    "          (MediaPipe's face detector)\n"
    "  group   OpenCV's groupRectangles (what detectMultiScale returns): similar windows\n"
    "          (--group-eps) form classes, each the mean of its members; classes of at most\n"
    "          --min-neighbors windows are dropped (0: no grouping)\n"
    "soft, weighted and group change scores or boxes: their kept detections are printed as csv\n"
    "lines x1,y1,x2,y2,score,class in the order they were kept.\n"
    "--min-neighbors N (every method): drop a kept box standing for fewer than N other\n"
    "candidates (those it suppressed; soft: overlapped above the threshold; weighted: merged).\n"
    "Overlaps: iou (intersection over union), iomin (over the smaller area), diou (IoU less the\n"
    "centres' squared distance over the enclosing box's squared diagonal), ios (over the\n"
    "higher-scoring window's area, integer pixels, as in the paper).\n"
    "\n"
    "More candidates than --max-candidates: the best-ranked are processed, the rest are\n"
    "dropped with a warning on stderr.\n"
    "\n";

struct NmsRun {
  std::string input;
  std::string output;
  FileFormat format = FileFormat::kOro;
  Params params;
  Backend backend = Backend::kCpu;
  bool verbose = false;
  size_t repeat = 0;  // timed runs; 0: run once, untimed
};

// The command line's values where GOption writes them, the defaults from *run's.
struct NmsArgs {
  explicit NmsArgs(const NmsRun &run)
      : sigma(run.params.sigma),
        group_eps(run.params.group_eps),
        min_neighbors(run.params.min_neighbors),
        threshold(run.params.threshold),
        score_threshold(run.params.score_threshold),
        max_candidates(static_cast<gint64>(run.params.max_candidates)),
        max_detections(static_cast<gint64>(run.params.max_detections)) {}
  ~NmsArgs() {
    for (char *text : {input, output, format, method, overlap, backend, soft_decay, class_groups})
      g_free(text);
  }
  NmsArgs(const NmsArgs &) = delete;
  NmsArgs &operator=(const NmsArgs &) = delete;

  char *input = nullptr, *output = nullptr, *format = nullptr, *method = nullptr,
       *overlap = nullptr, *backend = nullptr, *soft_decay = nullptr, *class_groups = nullptr;
  double sigma, group_eps;
  gint64 min_neighbors;
  double threshold, score_threshold;
  gint64 max_candidates, max_detections;
  gboolean class_agnostic = FALSE, verbose = FALSE;
  gint64 repeat = 0;
};

std::vector<GOptionEntry> nms_entries(NmsArgs *a) {
  return {
      {"input", 'i', 0, G_OPTION_ARG_FILENAME, &a->input, "Candidates to read (required)", "FILE"},
      {"format", 'f', 0, G_OPTION_ARG_STRING, &a->format, "Input format: oro or csv", "FORMAT"},
      {"method", 'm', 0, G_OPTION_ARG_STRING, &a->method,
       "greedy (default), matrix, soft, weighted or group", "METHOD"},
      {"min-neighbors", 'n', 0, G_OPTION_ARG_INT64, &a->min_neighbors,
       "Neighbours a kept box needs (default 0: none; group: 0 is no grouping)", "N"},
      {"group-eps", 0, 0, G_OPTION_ARG_DOUBLE, &a->group_eps,
       "group's similarity tolerance (default 0.2, OpenCV's)", "EPS"},
      {"soft-decay", 0, 0, G_OPTION_ARG_STRING, &a->soft_decay,
       "soft's decay: gaussian (default) or linear", "DECAY"},
      {"sigma", 0, 0, G_OPTION_ARG_DOUBLE, &a->sigma, "soft's gaussian sigma (default 0.5)",
       "SIGMA"},
      {"class-groups", 0, 0, G_OPTION_ARG_STRING, &a->class_groups,
       "Classes that suppress one another, e.g. \"2,7;1,3\" (default: each class alone)", "GROUPS"},
      {"overlap", 0, 0, G_OPTION_ARG_STRING, &a->overlap, "iou (default), iomin, ios or diou",
       "OVERLAP"},
      {"threshold", 't', 0, G_OPTION_ARG_DOUBLE, &a->threshold,
       "Overlap threshold in [0, 1] (default 0.5)", "T"},
      {"score-threshold", 's', 0, G_OPTION_ARG_DOUBLE, &a->score_threshold,
       "Drop candidates scoring below S (default 0; -inf keeps all)", "S"},
      {"max-candidates", 'D', 0, G_OPTION_ARG_INT64, &a->max_candidates,
       "Process at most D best-ranked candidates (default 4096)", "D"},
      {"max-detections", 'K', 0, G_OPTION_ARG_INT64, &a->max_detections,
       "Keep at most K detections, best first (default 0: no cap)", "K"},
      {"class-agnostic", 'a', 0, G_OPTION_ARG_NONE, &a->class_agnostic,
       "Suppress across classes too (default: only within a class)", nullptr},
      {"backend", 'b', 0, G_OPTION_ARG_STRING, &a->backend, "cpu (default) or cuda", "BACKEND"},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &a->output,
       "Write the kept detections to FILE (default: stdout)", "FILE"},
      {"verbose", 'v', 0, G_OPTION_ARG_NONE, &a->verbose,
       "Print the counts and the device to stderr", nullptr},
      {"repeat", 'r', 0, G_OPTION_ARG_INT64, &a->repeat,
       "Time R runs after a warm-up one; print p50_us= p99_us= to stderr", "R"},
      {}};
}

// The parsed values checked into *run; false after reporting a usage error.
bool run_from(const NmsArgs &a, NmsRun *run) {
  auto usage_error = [](const std::string &message) {
    report("nms", message);
    return false;
  };
  if (a.input == nullptr) return usage_error("--input FILE is required");
  run->input = a.input;
  if (a.output != nullptr) run->output = a.output;
  if (a.format != nullptr) {
    if (!parse_file_format(a.format, &run->format)) {
      return usage_error(std::string("unknown format '") + a.format + "': use oro or csv");
    }
  } else {
    file_format_from_extension(run->input, &run->format);  // any other name stays oro
  }
  if (a.method != nullptr && !parse_method(a.method, &run->params.method)) {
    return usage_error(std::string("unknown method '") + a.method +
                       "': use greedy, matrix, soft, weighted or group");
  }
  if (a.soft_decay != nullptr && !parse_soft_decay(a.soft_decay, &run->params.soft_decay)) {
    return usage_error(std::string("unknown soft decay '") + a.soft_decay +
                       "': use linear or gaussian");
  }
  if (a.class_groups != nullptr && !parse_class_groups(a.class_groups, &run->params.class_groups)) {
    return usage_error(std::string("bad --class-groups '") + a.class_groups +
                       "': use class ids like 2,7;1,3");
  }
  run->params.sigma = static_cast<float>(a.sigma);
  run->params.group_eps = a.group_eps;
  if (a.min_neighbors < 0 || a.min_neighbors > UINT32_MAX) {
    return usage_error("--min-neighbors must be in [0, 2^32 - 1]");
  }
  run->params.min_neighbors = static_cast<uint32_t>(a.min_neighbors);
  if (a.overlap != nullptr && !parse_overlap(a.overlap, &run->params.overlap)) {
    return usage_error(std::string("unknown overlap '") + a.overlap +
                       "': use iou, iomin, ios or diou");
  }
  if (a.backend != nullptr && !parse_backend(a.backend, &run->backend)) {
    return usage_error(std::string("unknown backend '") + a.backend + "': use cpu or cuda");
  }
  if (a.max_candidates < 1) return usage_error("--max-candidates must be at least 1");
  if (a.max_detections < 0) return usage_error("--max-detections must not be negative");
  if (a.repeat < 0) return usage_error("--repeat must not be negative");
  run->repeat = static_cast<size_t>(a.repeat);
  run->params.threshold = static_cast<float>(a.threshold);
  run->params.score_threshold = static_cast<float>(a.score_threshold);
  run->params.max_candidates = static_cast<size_t>(a.max_candidates);
  run->params.max_detections = static_cast<size_t>(a.max_detections);
  run->params.class_agnostic = a.class_agnostic;
  run->verbose = a.verbose;
  const Status valid = validate(run->params);
  if (!valid.ok()) return usage_error(valid.message());
  return true;
}

// Fills *run from the command line; false after reporting a usage error.
bool parse_nms_options(int argc, char **argv, NmsRun *run) {
  NmsArgs args(*run);
  const std::vector<GOptionEntry> entries = nms_entries(&args);
  const std::string description = std::string(kNmsDescription) + kExitStatusHelp;
  return parse_options("nms", "--input FILE", kNmsSummary, description.c_str(), entries.data(),
                       argc, argv) &&
         run_from(args, run);
}

std::string shortest(float value) {
  char buffer[32];
  return std::string(buffer, std::to_chars(buffer, buffer + sizeof buffer, value).ptr);
}

// The kept candidates' lines, in the order they came in.
std::string kept_lines(const CandidateFile &file, const Result &result) {
  std::vector<uint32_t> kept = result.kept;
  std::sort(kept.begin(), kept.end());
  std::string text;
  for (uint32_t index : kept) text += file.source_lines[index] + '\n';
  return text;
}

// --repeat: wall time around run() alone, as a caller with the candidates in memory sees it. The
// first run was the warm-up; every timed run must keep what it kept.
Status time_runs(Context &context, const CandidatesView &view, const NmsRun &run, Result *result) {
  const std::vector<uint32_t> first = result->kept;
  std::vector<double> samples_us;
  for (size_t i = 0; i < run.repeat; ++i) {
    const auto begin = std::chrono::steady_clock::now();
    const Status status = context.run(view, run.params, result);
    const auto end = std::chrono::steady_clock::now();
    if (!status.ok()) return status;
    if (result->kept != first)
      return Status::Error("run " + std::to_string(i + 2) +
                           " kept other candidates than the first");
    samples_us.push_back(std::chrono::duration<double, std::micro>(end - begin).count());
  }
  const Latency latency = summarize(std::move(samples_us));
  std::fprintf(stderr, "p50_us=%.1f p99_us=%.1f runs=%zu on %s\n", latency.p50, latency.p99,
               latency.runs, context.device_name().c_str());
  return Status::Ok();
}

int run_nms(int argc, char **argv) {
  NmsRun run;
  if (!parse_nms_options(argc, argv, &run)) return kExitBadInput;

  CandidateFile file;
  Status status = read_candidate_file(run.input, run.format, &file);
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.message().c_str());
    return kExitBadInput;
  }

  ContextOptions options;
  options.backend = run.backend;
  // The workspace is sized up front for the file: --repeat then times no allocation.
  options.reserve_candidates = file.candidates.size();
  const std::unique_ptr<Context> context = Context::create(options, &status);
  if (!status.ok()) {
    report("nms", std::string("cannot use the ") + to_string(run.backend) +
                      " backend: " + status.message());
    return kExitFailure;
  }
  Result result;
  status = context->run(file.candidates.view(), run.params, &result);
  if (!status.ok()) {
    report("nms", run.input + ": " + status.message());
    return kExitFailure;
  }
  if (run.repeat > 0) {
    status = time_runs(*context, file.candidates.view(), run, &result);
    if (!status.ok()) {
      report("nms", run.input + ": " + status.message());
      return kExitFailure;
    }
  }

  const Counts &counts = result.counts;
  if (counts.over_capacity > 0) {
    report("nms", "warning: " + run.input + ": " + std::to_string(counts.over_capacity) + " of " +
                      std::to_string(counts.in) + " candidates dropped, over --max-candidates " +
                      std::to_string(run.params.max_candidates));
  }
  if (run.verbose) {
    report("nms", run.input + ": " + std::to_string(counts.in) + " in, " +
                      std::to_string(counts.invalid) + " invalid, " +
                      std::to_string(counts.below_score) + " below score, " +
                      std::to_string(counts.over_capacity) + " over capacity, " +
                      std::to_string(counts.kept) + " kept (" + to_string(run.params.method) +
                      ", " + to_string(run.params.overlap) + " " + shortest(run.params.threshold) +
                      ", on " + context->device_name() + ")");
  }
  std::string text;
  if (result.kept_scores.empty()) {
    text = kept_lines(file, result);
  } else {
    CandidateSet kept;
    for (size_t k = 0; k < result.kept.size(); ++k) {
      const float *b = &result.kept_boxes[4 * k];
      kept.add(b[0], b[1], b[2], b[3], result.kept_scores[k], result.kept_class_ids[k]);
    }
    status = format_candidates(kept, FileFormat::kCsv, &text);
  }
  if (status.ok()) status = write_text(run.output, text);
  if (!status.ok()) {
    report("nms", status.message());
    return kExitFailure;
  }
  return kExitOk;
}

// --- generate -------------------------------------------------------------------------------

constexpr char kGenerateSummary[] = "Writes seeded synthetic candidates, one detection a line.";

constexpr char kGenerateDescription[] =
    "Kinds:\n"
    "  sliding-window  jittered windows of many aspect ratios around objects in a 1920x1080\n"
    "                  frame, CLASSES classes; float boxes, so csv only\n"
    "  faces           integer square windows at a few scales around faces, class 0: the\n"
    "                  input of the paper's map/reduce NMS; oro or csv\n"
    "Without --format, an output name ending in .csv or .oro decides; otherwise faces are\n"
    "written as oro and sliding-window as csv.\n"
    "\n";

enum class Kind { kSlidingWindow, kFaces };

int run_generate(int argc, char **argv) {
  g_autofree char *kind_name = nullptr;
  g_autofree char *format_name = nullptr;
  g_autofree char *output = nullptr;
  gint64 count = -1;
  gint64 seed = 0;
  gint classes = 1;
  const GOptionEntry entries[] = {
      {"kind", 'k', 0, G_OPTION_ARG_STRING, &kind_name, "sliding-window or faces (required)",
       "KIND"},
      {"count", 'n', 0, G_OPTION_ARG_INT64, &count, "How many candidates (required)", "N"},
      {"seed", 0, 0, G_OPTION_ARG_INT64, &seed, "Random seed (default 0)", "S"},
      {"classes", 'c', 0, G_OPTION_ARG_INT, &classes, "Classes, for sliding-window (default 1)",
       "C"},
      {"format", 'f', 0, G_OPTION_ARG_STRING, &format_name, "Output format: csv or oro", "FORMAT"},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "Write to FILE (default: stdout)", "FILE"},
      {}};
  const std::string description = std::string(kGenerateDescription) + kExitStatusHelp;
  if (!parse_options("generate", "--kind KIND --count N", kGenerateSummary, description.c_str(),
                     entries, argc, argv)) {
    return kExitBadInput;
  }

  auto usage_error = [](const std::string &message) {
    report("generate", message);
    return kExitBadInput;
  };
  Kind kind;
  if (kind_name == nullptr) return usage_error("--kind is required");
  if (std::strcmp(kind_name, "sliding-window") == 0) {
    kind = Kind::kSlidingWindow;
  } else if (std::strcmp(kind_name, "faces") == 0) {
    kind = Kind::kFaces;
  } else {
    return usage_error(std::string("unknown kind '") + kind_name +
                       "': use sliding-window or faces");
  }
  if (count < 0) return usage_error("--count N is required, N >= 0");
  if (static_cast<uint64_t>(count) > kMaxCount) return usage_error("--count is over 2^32 - 1");
  if (seed < 0) return usage_error("--seed must not be negative");
  if (classes < 1) return usage_error("--classes must be at least 1");
  if (kind == Kind::kFaces && classes != 1) {
    return usage_error("--classes applies to --kind sliding-window only");
  }
  FileFormat format = kind == Kind::kFaces ? FileFormat::kOro : FileFormat::kCsv;
  if (format_name != nullptr) {
    if (!parse_file_format(format_name, &format)) {
      return usage_error(std::string("unknown format '") + format_name + "': use csv or oro");
    }
  } else if (output != nullptr) {
    file_format_from_extension(output, &format);
  }

  const CandidateSet candidates =
      kind == Kind::kFaces ? face_windows(static_cast<size_t>(count), static_cast<uint64_t>(seed))
                           : sliding_window_candidates(static_cast<size_t>(count),
                                                       static_cast<uint64_t>(seed), classes);
  std::string text;
  Status status = format_candidates(candidates, format, &text);
  if (!status.ok()) {
    return usage_error(std::string("cannot write ") + kind_name + " candidates as " +
                       to_string(format) + ": " + status.message());
  }
  status = write_text(output != nullptr ? output : "", text);
  if (!status.ok()) {
    report("generate", status.message());
    return kExitFailure;
  }
  return kExitOk;
}

// --- main -----------------------------------------------------------------------------------

struct Subcommand {
  const char *name;
  const char *summary;
  int (*run)(int argc, char **argv);  // argv[0] is the subcommand's name
};

constexpr Subcommand kSubcommands[] = {
    {"nms", "Run NMS on a candidate file and print the kept detections", run_nms},
    {"generate", "Write synthetic candidates to try it on", run_generate},
    {"bench", "Time the backends against OpenCV on generated or given candidates", run_bench},
    {"track", "Track a MOT detection file's boxes (ByteTrack) into MOT tracks", run_track},
    {"mot-eval", "Score MOT tracks against ground truth (CLEAR MOT, IDF1)", run_mot_eval},
    {"track-bench", "Time the tracker per frame at 10 to 10 000 boxes", run_track_bench},
    {"count", "Count a MOT tracks file's line crossings as boxcount does", run_count},
    {"count-eval", "Score line counts of tracks against the ground truth's", run_count_eval},
};

void print_usage(std::FILE *to) {
  std::fprintf(
      to,
      "Usage:\n  %s SUBCOMMAND [OPTION...]\n\n"
      "Non-maximum suppression of candidate detections, on the CPU or a CUDA GPU, and tracking.\n\n"
      "Subcommands:\n",
      kProgram);
  for (const Subcommand &subcommand : kSubcommands) {
    std::fprintf(to, "  %-12s %s\n", subcommand.name, subcommand.summary);
  }
  std::fprintf(to, "\nRun '%s SUBCOMMAND --help' for its options.\n", kProgram);
}

int run_tool(int argc, char **argv) {
  std::setlocale(LC_ALL, "");  // for GLib to write the help in the terminal's character set
  if (argc < 2) {
    print_usage(stderr);
    return kExitBadInput;
  }
  const std::string first = argv[1];
  if (first == "--help" || first == "-h" || first == "help") {
    print_usage(stdout);
    return kExitOk;
  }
  for (const Subcommand &subcommand : kSubcommands) {
    if (first != subcommand.name) continue;
    const int status = subcommand.run(argc - 1, argv + 1);
    // What went to stdout (tables, kept lines) is lost when the flush fails: say so, once.
    if (status == kExitOk && (std::fflush(stdout) != 0 || std::ferror(stdout))) {
      std::fprintf(stderr, "%s: cannot write to stdout: %s\n", kProgram, std::strerror(errno));
      return kExitFailure;
    }
    return status;
  }
  std::fprintf(stderr, "%s: unknown subcommand '%s'\n\n", kProgram, first.c_str());
  print_usage(stderr);
  return kExitBadInput;
}

}  // namespace
}  // namespace cudanms::tools

int main(int argc, char **argv) { return cudanms::tools::run_tool(argc, argv); }
