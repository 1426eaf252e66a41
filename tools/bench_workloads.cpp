#include "bench_workloads.h"

#include <algorithm>
#include <filesystem>
#include <memory>

#include "candidate_file.h"
#include "synthetic.h"

namespace cudanms::tools {
namespace {

// A splitmix64 step: unrelated seeds for each data set from the one seed of the run.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

Workload generated(const std::string &config, Data data, int classes, size_t n,
                   const Params &params, const BenchOptions &options) {
  Workload w;
  w.config = config;
  w.data = data;
  w.classes = classes;
  w.n = n;
  w.params = params;
  w.params.max_candidates = std::max<size_t>(n, 1);
  for (size_t k = 0; k < options.sets; ++k) {
    const uint64_t seed =
        mix(options.seed ^ mix(n * 1000 + classes * 10 + static_cast<int>(data)) ^ mix(k + 0x5eed));
    w.seeds.push_back(seed);
    w.sets.push_back(data == Data::kFaces ? face_windows(n, seed)
                                          : sliding_window_candidates(n, seed, classes));
  }
  return w;
}

// The "dense duplicates" rows: piles of near-identical boxes (dense_candidates), greedy IoU 0.5.
Workload dense_workload(const std::string &kind, size_t n, const BenchOptions &options) {
  Workload w;
  w.config = "dense-" + kind;
  w.data = Data::kDense;
  w.n = n;
  w.params.class_agnostic = true;
  w.params.max_candidates = n;
  for (size_t k = 0; k < options.sets; ++k) {
    const uint64_t seed = mix(options.seed ^ mix(n * 7919 + kind.size()) ^ mix(k + 0xde75e));
    w.seeds.push_back(seed);
    dense_candidates(kind, n, seed, &w.sets.emplace_back());
  }
  return w;
}

Status file_workloads(const std::string &path, const BenchOptions &options,
                      std::vector<Workload> *out) {
  FileFormat format = options.input_format;
  if (!options.input_format_given) file_format_from_extension(path, &format);
  CandidateFile file;
  Status status = read_candidate_file(path, format, &file);
  if (!status.ok()) return status;
  Workload w;
  w.data = Data::kFile;
  w.input = path;
  w.n = file.candidates.size();
  w.params.max_candidates = std::max<size_t>(w.n, 1);
  w.sets.push_back(std::move(file.candidates));
  const std::vector<int32_t> &c = w.sets[0].classes;
  w.classes = c.empty() ? 1 : *std::max_element(c.begin(), c.end()) + 1;
  const std::string name = std::filesystem::path(path).filename().string();

  w.config = name + ":greedy";
  w.params.class_agnostic = true;
  out->push_back(w);
  w.config = name + ":group";  // a cascade's windows, grouped as detectMultiScale does
  w.params.method = Method::kGroup;
  w.params.min_neighbors = 3;
  out->push_back(w);
  w.params.method = Method::kGreedy;
  w.params.min_neighbors = 0;
  if (std::any_of(c.begin(), c.end(), [&](int32_t id) { return id != c[0]; })) {
    w.config = name + ":greedy-per-class";
    w.params.class_agnostic = false;
    out->push_back(w);
  }
  if (format == FileFormat::kOro) {  // the paper's square windows get the paper's method too
    w.config = name + ":matrix";
    w.params.class_agnostic = true;
    w.params.method = Method::kMatrix;
    w.params.overlap = Overlap::kIoS;
    w.params.threshold = 0.3f;
    out->push_back(w);
  }
  return Status::Ok();
}

}  // namespace

Status compute_reference(Workload *w) {
  ContextOptions options;
  options.reserve_candidates = w->n;
  Status status;
  const std::unique_ptr<Context> cpu = Context::create(options, &status);
  if (!status.ok()) return status;
  Result result;
  for (const CandidateSet &set : w->sets) {
    status = cpu->run(set.view(), w->params, &result);
    if (!status.ok()) return status;
    w->reference.push_back(result.kept);
  }
  return Status::Ok();
}

Status bench_workloads(const BenchOptions &options, std::vector<Workload> *out) {
  std::vector<Workload> &workloads = *out;
  Params greedy;
  greedy.class_agnostic = true;
  for (size_t n : options.sizes) {
    workloads.push_back(generated("greedy", Data::kSlidingWindow, 1, n, greedy, options));
  }
  Params per_class;
  const std::string class_config = "greedy-" + std::to_string(options.classes) + "cls";
  for (size_t n : options.class_sizes) {
    workloads.push_back(
        generated(class_config, Data::kSlidingWindow, options.classes, n, per_class, options));
  }
  Params diou = greedy;
  diou.overlap = Overlap::kDIoU;
  for (size_t n : options.diou_sizes) {
    workloads.push_back(generated("greedy-diou", Data::kSlidingWindow, 1, n, diou, options));
  }
  Params soft = greedy;
  soft.method = Method::kSoft;
  soft.score_threshold = 0.25f;
  Params weighted = greedy;
  weighted.method = Method::kWeighted;
  Params grouped = per_class;
  grouped.class_groups = {{1, 2, 3, 5, 7}};
  for (size_t n : options.variant_sizes) {
    workloads.push_back(generated("soft-gaussian", Data::kSlidingWindow, 1, n, soft, options));
    workloads.push_back(generated("weighted", Data::kSlidingWindow, 1, n, weighted, options));
    workloads.push_back(
        generated("greedy-groups", Data::kSlidingWindow, options.classes, n, grouped, options));
  }
  Params matrix;
  matrix.method = Method::kMatrix;
  matrix.overlap = Overlap::kIoS;
  matrix.threshold = 0.3f;
  matrix.class_agnostic = true;
  for (size_t n : options.face_sizes) {
    workloads.push_back(generated("matrix-faces", Data::kFaces, 1, n, matrix, options));
  }
  Params group;
  group.method = Method::kGroup;
  group.min_neighbors = 3;
  group.class_agnostic = true;
  for (size_t n : options.group_sizes) {
    workloads.push_back(generated("group-faces", Data::kFaces, 1, n, group, options));
  }
  for (size_t n : options.batch_frame_sizes) {
    for (size_t frames : options.batches) {
      BenchOptions batch_options = options;
      batch_options.sets = options.sets * frames;
      Workload w = generated("batch-" + std::to_string(frames), Data::kSlidingWindow, 1, n, greedy,
                             batch_options);
      w.batch = frames;
      workloads.push_back(std::move(w));
    }
    for (size_t streams : options.streams) {
      BenchOptions stream_options = options;
      stream_options.sets = options.sets * streams;
      Workload w = generated("streams-" + std::to_string(streams), Data::kSlidingWindow, 1, n,
                             greedy, stream_options);
      w.streams = streams;
      workloads.push_back(std::move(w));
    }
  }
  if (options.dense) {
    for (const auto &[kind, n] : std::vector<std::pair<std::string, size_t>>{
             {"identical", 20000}, {"groups", 50000}, {"huge", 5000}, {"cluster", 10000}}) {
      workloads.push_back(dense_workload(kind, n, options));
    }
  }
  for (const std::string &input : options.inputs) {
    const Status status = file_workloads(input, options, &workloads);
    if (!status.ok()) return status;
  }
  return Status::Ok();
}

}  // namespace cudanms::tools
