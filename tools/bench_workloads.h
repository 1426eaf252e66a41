// cudanms-tool bench's rows (bench.cpp): the generated data sets (sliding windows, faces, dense
// duplicates, batches and streams of them) and the candidate files the options ask for, each with
// the CPU backend's kept sets as its reference.
#pragma once

#include <vector>

#include "bench_rows.h"

namespace cudanms::tools {

// Every row the options ask for, in the table's order; an unreadable --input is an error.
Status bench_workloads(const BenchOptions &options, std::vector<Workload> *out);
// w's reference: the CPU backend's kept indices for each of its data sets.
Status compute_reference(Workload *w);

}  // namespace cudanms::tools
