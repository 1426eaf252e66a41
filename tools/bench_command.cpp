// cudanms-tool bench's command line: its options into BenchOptions, then benchmark().
#include <glib.h>

#include <charconv>
#include <cstring>
#include <random>
#include <string>
#include <tuple>

#include "bench.h"
#include "candidate_file.h"
#include "tool_support.h"

namespace cudanms::tools {
namespace {

constexpr char kBenchSummary[] =
    "Times NMS from candidates in host memory to kept indices in host memory, per backend and\n"
    "method, against OpenCV's NMSBoxes on the same data, and checks every result against the\n"
    "CPU backend's kept set. Prints a table; tools/bench_torchvision.py and tools/bench_plot.py\n"
    "add torchvision and draw docs/benchmark.png from --dump and --json.";

constexpr char kBenchDescription[] =
    "Rows, each on --sets data sets generated from the seed and run in turn:\n"
    "  greedy        class-agnostic greedy IoU 0.5, sliding windows (1920x1080), at --sizes\n"
    "  greedy-Ccls   per-class greedy IoU 0.5, sliding windows of --classes C, at --class-sizes\n"
    "  greedy-diou   greedy DIoU 0.5 (YOLO's DIoU-NMS), class-agnostic, at --diou-sizes\n"
    "  soft-gaussian Soft-NMS, gaussian sigma 0.5, floor 0.25, class-agnostic, at\n"
    "                --variant-sizes (the check covers the kept indices; tests cover the values)\n"
    "  weighted      weighted NMS IoU 0.5, class-agnostic, at --variant-sizes\n"
    "  greedy-groups per-class greedy with classes 1,2,3,5,7 as one group, at --variant-sizes\n"
    "  matrix-faces  the paper's matrix NMS, IoS 0.3, face windows, at --face-sizes\n"
    "  group-faces   grouping (min-neighbors 3, eps 0.2), face windows, at --group-sizes,\n"
    "                against cv::groupRectangles\n"
    "  batch-B       B frames of --batch-sizes sliding windows per call (--batches), greedy\n"
    "                IoU 0.5, class-agnostic; p50/p99 of the whole call\n"
    "  streams-T     T threads, each running frames of --batch-sizes sliding windows in turn\n"
    "                (--streams), greedy IoU 0.5, class-agnostic: a context per thread, then\n"
    "                (cuda-shared, cuda-shared-K) --shared-contexts contexts shared by all,\n"
    "                batching the frames that wait;\n"
    "                p50/p99 of a frame, and frames/s in all\n"
    "  dense-*       with --dense: greedy IoU 0.5 on piles of near-identical boxes\n"
    "  FILE:...      with --input, each file as greedy, greedy per class (when it has several\n"
    "                classes) and, for oro files, matrix IoS 0.3\n"
    "Dmax is N: every candidate is processed. Columns: p50/p99 host-visible latency in\n"
    "microseconds; GPU us, the device time alone (CUDA events, a second context); kept; agrees,\n"
    "whether every result equalled the CPU backend's kept set (order included); target, the\n"
    "issue's H100 targets, met or MISSED (reported, never enforced). Lists may be empty (\"\").\n"
    "\n"
    "Exit status: 0 done; 1 a backend failed, or the CUDA or CPU backend kept other candidates\n"
    "than the CPU backend on some data set (OpenCV differing is reported only); 2 bad usage.";

// The command line's values where GOption writes them.
struct BenchArgs {
  explicit BenchArgs(const BenchOptions &defaults)
      : classes(defaults.classes),
        repeat(static_cast<gint64>(defaults.repeat)),
        sets(static_cast<gint64>(defaults.sets)),
        max_seconds(defaults.max_seconds) {}
  ~BenchArgs() {
    for (char *text :
         {sizes, class_sizes, face_sizes, group_sizes, diou_sizes, variant_sizes, batches,
          batch_sizes, streams, shared_contexts, format, backends, seed, json, dump})
      g_free(text);
    g_strfreev(inputs);
  }
  BenchArgs(const BenchArgs &) = delete;
  BenchArgs &operator=(const BenchArgs &) = delete;

  char *sizes = nullptr, *class_sizes = nullptr, *face_sizes = nullptr, *group_sizes = nullptr,
       *diou_sizes = nullptr, *variant_sizes = nullptr, *batches = nullptr, *batch_sizes = nullptr,
       *streams = nullptr, *shared_contexts = nullptr;
  GStrv inputs = nullptr;
  char *format = nullptr, *backends = nullptr, *seed = nullptr, *json = nullptr, *dump = nullptr;
  gint classes;
  gboolean dense = FALSE;
  gint64 repeat, sets;
  double max_seconds;
};

std::vector<GOptionEntry> bench_entries(BenchArgs *a) {
  return {
      {"sizes", 'n', 0, G_OPTION_ARG_STRING, &a->sizes,
       "Class-agnostic greedy at these N (default 300,1000,3000,10000,30000,100000)", "LIST"},
      {"class-sizes", 0, 0, G_OPTION_ARG_STRING, &a->class_sizes,
       "Per-class greedy at these N (default 1000,10000,100000)", "LIST"},
      {"classes", 'c', 0, G_OPTION_ARG_INT, &a->classes,
       "Classes for per-class greedy (default 80)", "C"},
      {"diou-sizes", 0, 0, G_OPTION_ARG_STRING, &a->diou_sizes,
       "Class-agnostic greedy DIoU 0.5 at these N (default 300,3000,10000)", "LIST"},
      {"variant-sizes", 0, 0, G_OPTION_ARG_STRING, &a->variant_sizes,
       "Soft, weighted and class-group rows at these N (default 300,3000,10000)", "LIST"},
      {"face-sizes", 0, 0, G_OPTION_ARG_STRING, &a->face_sizes,
       "Matrix IoS 0.3 on face windows at these N (default 3000)", "LIST"},
      {"group-sizes", 0, 0, G_OPTION_ARG_STRING, &a->group_sizes,
       "Grouping on face windows at these N (default 1000,3000,10000,30000)", "LIST"},
      {"batches", 0, 0, G_OPTION_ARG_STRING, &a->batches,
       "Batch rows: this many frames per call (default 1,4,16,64)", "LIST"},
      {"batch-sizes", 0, 0, G_OPTION_ARG_STRING, &a->batch_sizes,
       "Batch rows: candidates per frame (default 300,1000)", "LIST"},
      {"streams", 0, 0, G_OPTION_ARG_STRING, &a->streams,
       "Streams rows: this many threads, frames of --batch-sizes (default 16)", "LIST"},
      {"shared-contexts", 0, 0, G_OPTION_ARG_STRING, &a->shared_contexts,
       "Streams rows on CUDA: the threads share this many contexts (default 1,4)", "LIST"},
      {"dense", 0, 0, G_OPTION_ARG_NONE, &a->dense,
       "Also time the dense-duplicates rows: 20k identical boxes, 100 groups of 500, 5k boxes "
       "near 1e7, 10k in one cluster (greedy IoU 0.5)",
       nullptr},
      {"input", 'i', 0, G_OPTION_ARG_FILENAME_ARRAY, &a->inputs,
       "Also time this candidate file (repeatable)", "FILE"},
      {"format", 'f', 0, G_OPTION_ARG_STRING, &a->format,
       "Format of the --input files: oro or csv (default: from the name)", "FORMAT"},
      {"backends", 'b', 0, G_OPTION_ARG_STRING, &a->backends,
       "Which of cpu,cuda,opencv to time (default all; cuda and opencv where available)", "LIST"},
      {"repeat", 'r', 0, G_OPTION_ARG_INT64, &a->repeat,
       "Timed runs per cell, at most (default 200)", "R"},
      {"max-seconds", 0, 0, G_OPTION_ARG_DOUBLE, &a->max_seconds,
       "Stop timing a cell after this long, warm-up included, once it has a run (default 1)", "S"},
      {"sets", 0, 0, G_OPTION_ARG_INT64, &a->sets,
       "Data sets per row, run in turn so that no run finds the last one's data in the caches "
       "(default 4)",
       "K"},
      {"seed", 0, 0, G_OPTION_ARG_STRING, &a->seed, "Seed of the data (default: a fresh one)", "S"},
      {"json", 'j', 0, G_OPTION_ARG_FILENAME, &a->json, "Write every number and the metadata here",
       "FILE"},
      {"dump", 'd', 0, G_OPTION_ARG_FILENAME, &a->dump,
       "Write each data set (csv) and the CPU backend's kept indices into DIR", "DIR"},
      {}};
}

// The parsed values checked into *options; false after reporting a usage error.
bool options_from(const BenchArgs &a, BenchOptions *options) {
  auto usage_error = [](const std::string &message) {
    report("bench", message);
    return false;
  };
  for (const auto &[text, list, option] :
       {std::tuple{a.sizes, &options->sizes, "--sizes"},
        std::tuple{a.class_sizes, &options->class_sizes, "--class-sizes"},
        std::tuple{a.face_sizes, &options->face_sizes, "--face-sizes"},
        std::tuple{a.group_sizes, &options->group_sizes, "--group-sizes"},
        std::tuple{a.diou_sizes, &options->diou_sizes, "--diou-sizes"},
        std::tuple{a.variant_sizes, &options->variant_sizes, "--variant-sizes"},
        std::tuple{a.batches, &options->batches, "--batches"},
        std::tuple{a.batch_sizes, &options->batch_frame_sizes, "--batch-sizes"},
        std::tuple{a.streams, &options->streams, "--streams"},
        std::tuple{a.shared_contexts, &options->shared_contexts, "--shared-contexts"}}) {
    if (text != nullptr && !parse_sizes(text, list)) {
      return usage_error(std::string(option) +
                         " takes positive numbers separated by commas, not '" + text + "'");
    }
  }
  if (a.classes < 1) return usage_error("--classes must be at least 1");
  options->classes = a.classes;
  options->dense = a.dense;
  for (char **input = a.inputs; input != nullptr && *input != nullptr; ++input) {
    options->inputs.push_back(*input);
  }
  if (a.format != nullptr) {
    if (!parse_file_format(a.format, &options->input_format)) {
      return usage_error(std::string("unknown format '") + a.format + "': use oro or csv");
    }
    options->input_format_given = true;
  }
  if (a.backends != nullptr) {
    options->backends.clear();
    g_auto(GStrv) names = g_strsplit(a.backends, ",", -1);
    for (char **name = names; *name != nullptr; ++name) {
      if (std::strcmp(*name, "cpu") != 0 && std::strcmp(*name, "cuda") != 0 &&
          std::strcmp(*name, "opencv") != 0) {
        return usage_error(std::string("unknown backend '") + *name + "': use cpu, cuda, opencv");
      }
      options->backends.push_back(*name);
    }
  }
  if (a.repeat < 1) return usage_error("--repeat must be at least 1");
  if (a.sets < 1) return usage_error("--sets must be at least 1");
  if (!(a.max_seconds >= 0)) return usage_error("--max-seconds must not be negative");
  options->repeat = static_cast<size_t>(a.repeat);
  options->sets = static_cast<size_t>(a.sets);
  options->max_seconds = a.max_seconds;
  if (a.seed != nullptr) {
    const char *end = a.seed + std::strlen(a.seed);
    const auto [last, ec] = std::from_chars(a.seed, end, options->seed);
    if (ec != std::errc() || last != end) {
      return usage_error(std::string("--seed takes a number, not '") + a.seed + "'");
    }
  } else {
    // 53 bits, so that any JSON reader holds the seed exactly.
    std::random_device random;
    options->seed = ((uint64_t{random()} << 32) ^ random()) >> 11;
  }
  if (a.json != nullptr) options->json_path = a.json;
  if (a.dump != nullptr) options->dump_dir = a.dump;
  return true;
}

}  // namespace

int run_bench(int argc, char **argv) {
  BenchOptions options;
  BenchArgs args(options);
  const std::vector<GOptionEntry> entries = bench_entries(&args);
  if (!parse_options("bench", "", kBenchSummary, kBenchDescription, entries.data(), argc, argv) ||
      !options_from(args, &options))
    return kExitBadInput;
  return benchmark(options);
}

}  // namespace cudanms::tools
