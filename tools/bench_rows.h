// The rows of cudanms-tool bench (bench.cpp): what one configuration at one N times, and what
// one backend measured on it; the table, JSON and data files print them (bench_report.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bench.h"
#include "candidate_set.h"
#include "cudanms/nms.h"

namespace cudanms::tools {

enum class Data { kSlidingWindow, kFaces, kDense, kFile };

inline const char *to_string(Data data) {
  switch (data) {
    case Data::kSlidingWindow:
      return "sliding-window";
    case Data::kFaces:
      return "faces";
    case Data::kDense:
      return "dense";
    case Data::kFile:
      return "file";
  }
  return "";
}

// One configuration at one N: its data sets and the CPU backend's kept set for each.
struct Workload {
  std::string config;  // "greedy", "greedy-80cls", "greedy-diou", "matrix-faces", or FILE:config
  Data data = Data::kSlidingWindow;
  std::string input;  // the file, for Data::kFile
  int classes = 1;
  size_t n = 0;
  Params params;
  std::vector<uint64_t> seeds;  // per set, for generated data
  std::vector<CandidateSet> sets;
  std::vector<std::vector<uint32_t>> reference;
  // Batch rows: `batch` frames of n candidates per Context::run call, sets taken `batch` at a
  // time; 0: one frame per call.
  size_t batch = 0;
  // Streams rows: this many threads, each running its own sets.size() / streams sets in turn.
  size_t streams = 0;
  // One frame a call, on one thread: what the peers time, and what --dump writes.
  bool single_frames() const { return batch == 0 && streams == 0; }
  size_t calls() const { return batch == 0 ? sets.size() : sets.size() / batch; }
};

struct Cell {
  std::string backend;  // "cpu", "cuda" or "opencv"
  std::string call;     // what was timed, for peers
  Latency host;
  Latency device;  // CUDA only, from a second context that times the device
  size_t checked = 0;
  size_t differing = 0;
  size_t on_cpu = 0;  // frames a CUDA context computed on the CPU (past what its GPU path holds)
  std::string error;
  std::string target;   // empty where the issue sets none
  int target_met = -1;  // -1: not measured here
  double target_value = 0;
  double frames_per_second = 0;  // streams rows: in all
};

}  // namespace cudanms::tools
