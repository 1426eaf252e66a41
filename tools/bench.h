// cudanms-tool bench: host-visible latency of each backend against its peers, on the same data,
// with every result checked against the CPU backend's kept set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "candidate_file.h"

namespace cudanms::tools {

struct BenchOptions {
  // Class-agnostic greedy IoU 0.5 on sliding windows of one class, at each of these N.
  std::vector<size_t> sizes = {300, 1000, 3000, 10000, 30000, 100000};
  // Per-class greedy IoU 0.5 on sliding windows of `classes` classes, at each of these N.
  std::vector<size_t> class_sizes = {1000, 10000, 100000};
  int classes = 80;
  // Class-agnostic greedy DIoU 0.5 (YOLO's DIoU-NMS) on sliding windows, at each of these N.
  std::vector<size_t> diou_sizes = {300, 3000, 10000};
  // The variants, at each of these N: Soft-NMS (gaussian, sigma 0.5, floor 0.25) and weighted
  // NMS (IoU 0.5), class-agnostic; class groups (COCO's vehicles 1,2,3,5,7 as one group) on
  // sliding windows of `classes` classes.
  std::vector<size_t> variant_sizes = {300, 3000, 10000};
  // The paper's matrix method, IoS 0.3, on face_windows, at each of these N.
  std::vector<size_t> face_sizes = {3000};
  // Grouping (OpenCV's groupRectangles, min_neighbors 3, eps 0.2) on face_windows, at each of
  // these N, against cv::groupRectangles.
  std::vector<size_t> group_sizes = {1000, 3000, 10000, 30000};
  // The "dense duplicates" rows (tools/synthetic.h dense_candidates): 20k identical boxes, 100
  // groups of 500, 5k boxes at coordinates near 1e7, 10k in one cluster; greedy IoU 0.5.
  bool dense = false;
  // Batch rows: each of `batches` frames of each of `batch_frame_sizes` sliding windows per
  // Context::run call, greedy IoU 0.5, class-agnostic.
  std::vector<size_t> batches = {1, 4, 16, 64};
  std::vector<size_t> batch_frame_sizes = {300, 1000};
  // Streams rows: each of `streams` threads runs its own frames of each of `batch_frame_sizes`
  // sliding windows one after another (a camera stream each), greedy IoU 0.5, class-agnostic:
  // through a context per stream, then on CUDA through each of `shared_contexts` contexts shared
  // by all (SharedContext, the element's batch-streams). Per-frame latency, and frames per
  // second in all.
  std::vector<size_t> streams = {16};
  std::vector<size_t> shared_contexts = {1, 4};
  // Candidate files to time instead of generated data.
  std::vector<std::string> inputs;
  FileFormat input_format = FileFormat::kCsv;
  bool input_format_given = false;

  std::vector<std::string> backends = {"cpu", "cuda", "opencv"};
  size_t repeat = 200;       // timed runs per cell, at most
  double max_seconds = 1.0;  // ...and no more time than this per cell, warm-up included
  size_t sets = 4;           // generated data sets per cell, run in turn
  uint64_t seed = 0;
  std::string json_path;  // empty: no JSON
  std::string dump_dir;   // empty: no dump
};

// Runs the benchmark, prints the table on stdout; returns the tool's exit status: 0, or 1 when a
// backend failed or a result differed from the CPU backend's.
int benchmark(const BenchOptions &options);

// Latency figures over samples in microseconds: percentiles by nearest rank.
struct Latency {
  size_t runs = 0;
  double p50 = 0;
  double p99 = 0;
  double min = 0;
  double mean = 0;
};
Latency summarize(std::vector<double> samples_us);

// cudanms-tool bench: its command line (bench_command.cpp) into BenchOptions, then benchmark().
int run_bench(int argc, char **argv);

}  // namespace cudanms::tools
