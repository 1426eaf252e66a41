// What cudanms-tool bench prints and writes (bench_report.cpp): the table on stdout, the JSON of
// a run, and each data set with the CPU backend's kept indices for tools/bench_torchvision.py.
#pragma once

#include <string>
#include <vector>

#include "bench_rows.h"

namespace cudanms::tools {

void print_header();
void print_row(const Workload &w, const Cell &cell);

// Where and on what a run was made.
struct Metadata {
  std::string date;
  std::string gpu;  // empty without a CUDA device
  std::string cuda_note;
  std::string cpu;
  std::string dump_dir;  // absolute, empty without --dump
};
std::string to_json(const BenchOptions &options, const Metadata &meta,
                    const std::vector<Workload> &workloads,
                    const std::vector<std::vector<Cell>> &cells);

// `text` as the whole of the file at `path`.
Status write_file(const std::string &path, const std::string &text);

// Each data set of `w` as csv in `dir`, which reads back to the same floats, and the CPU
// backend's kept indices, one a line in rank order: what bench_torchvision.py times and checks
// against.
Status dump(const std::string &dir, const Workload &w);

}  // namespace cudanms::tools
