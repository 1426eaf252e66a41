#include "bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>

#include "bench_peers.h"
#include "bench_report.h"
#include "bench_rows.h"
#include "bench_version.h"
#include "bench_workloads.h"
#include "cudanms/nms.h"
#include "cudanms/shared_context.h"
#include "synthetic.h"

namespace cudanms::tools {
namespace {

using Clock = std::chrono::steady_clock;

// The core-speed issue's targets, for an NVIDIA H100 and p50 host-visible latency of the CUDA
// backend: 20 us for small frames (up to 3k) of every method, then per size.
double cuda_target_us(const Workload &w) {
  if (w.batch > 0) return w.batch == 64 && w.n == 1000 ? 150 : 0;  // a whole call
  // Dense duplicates and grouping: compared with the CPU backend instead.
  if (w.data == Data::kDense || w.params.method == Method::kGroup) return 0;
  // The variants' rows (DIoU, soft, weighted, class groups): timed, no goal set.
  if (w.params.overlap == Overlap::kDIoU || w.params.method == Method::kSoft ||
      w.params.method == Method::kWeighted || !w.params.class_groups.empty()) {
    return 0;
  }
  if (w.n <= 3000) return 20;
  if (w.data == Data::kSlidingWindow && w.params.class_agnostic) {
    if (w.n == 10000) return 60;
    if (w.n == 30000) return 300;
    if (w.n == 100000) return 1500;
  }
  if (w.data == Data::kSlidingWindow && !w.params.class_agnostic && w.classes == 80 &&
      w.n == 10000) {
    return 100;
  }
  return 0;
}
// ...and the CPU backend's against OpenCV's NMSBoxes, same data, same run.
constexpr size_t kCpuVersusOpenCvN = 3000;
constexpr double kCpuVersusOpenCvFactor = 5;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double microseconds(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::micro>(end - start).count();
}

// One timed call on data set `set` (a batch row: on sets [set * batch, (set + 1) * batch)): its
// wall time, the device time where there is one, and its kept indices, or for a batch how many
// frames kept another set than the reference.
struct Sample {
  double host_us = 0;
  double device_us = 0;
  bool on_cpu = false;
  const std::vector<uint32_t> *kept = nullptr;
  size_t differing_frames = 0;  // batch rows, where kept is null
};

// Calls run(set, &sample) over the data sets in turn: warm-up calls, then up to options.repeat
// timed ones, stopping early once the cell has had its options.max_seconds. Every result, warm-up
// included, is compared with the reference, outside the timed region.
template <typename Run>
void measure(const Workload &w, const BenchOptions &options, Run run, Cell *cell,
             Latency *device = nullptr) {
  const Clock::time_point start = Clock::now();
  std::vector<double> host_us;
  std::vector<double> device_us;
  const size_t warmup = std::max<size_t>(w.calls(), 3);
  size_t call = 0;
  // A slow cell gets a single warm-up call, so that it can still be timed at least once.
  for (size_t timed = 0; timed < options.repeat; ++call) {
    const bool warming =
        call < warmup && (call == 0 || seconds_since(start) < options.max_seconds / 4);
    if (!warming && timed > 0 && seconds_since(start) >= options.max_seconds) break;
    const size_t set = call % w.calls();
    Sample sample;
    const Status status = run(set, &sample);
    if (!status.ok()) {
      cell->error = status.message();
      return;
    }
    ++cell->checked;
    if (sample.kept ? *sample.kept != w.reference[set] : sample.differing_frames > 0) {
      ++cell->differing;
    }
    if (sample.on_cpu) ++cell->on_cpu;
    if (warming) continue;
    ++timed;
    host_us.push_back(sample.host_us);
    device_us.push_back(sample.device_us);
  }
  if (device != nullptr) {
    *device = summarize(std::move(device_us));
  } else {
    cell->host = summarize(std::move(host_us));
  }
}

Cell measure_backend(const Workload &w, Backend backend, const BenchOptions &options) {
  Cell cell;
  cell.backend = cudanms::to_string(backend);
  // Two contexts for CUDA: the host-visible time without the events' overhead, then the GPU
  // time with them.
  for (bool time_device : {false, true}) {
    if (time_device && backend != Backend::kCuda) break;
    ContextOptions context_options;
    context_options.backend = backend;
    context_options.reserve_candidates = w.n;
    context_options.time_device = time_device;
    Status status;
    const std::unique_ptr<Context> context = Context::create(context_options, &status);
    if (!status.ok()) {
      cell.error = status.message();
      return cell;
    }
    Result result;
    std::vector<Result> results;
    std::vector<Frame> frames(w.batch);
    auto run_batch = [&](size_t call, Sample *sample) {
      for (size_t k = 0; k < w.batch; ++k) {
        frames[k] = {w.sets[call * w.batch + k].view(), w.params};
      }
      const Clock::time_point begin = Clock::now();
      const Status s = context->run(frames, &results);
      const Clock::time_point end = Clock::now();
      sample->host_us = microseconds(begin, end);
      for (size_t k = 0; k < results.size(); ++k) {
        sample->device_us += results[k].device_time_us;  // each frame's share of the call's
        sample->differing_frames += results[k].kept != w.reference[call * w.batch + k];
        sample->on_cpu |= backend == Backend::kCuda && results[k].computed_on == Backend::kCpu;
      }
      return s;
    };
    auto run = [&](size_t set, Sample *sample) {
      if (w.batch > 0) return run_batch(set, sample);
      const CandidatesView view = w.sets[set].view();
      const Clock::time_point begin = Clock::now();
      const Status s = context->run(view, w.params, &result);
      const Clock::time_point end = Clock::now();
      sample->host_us = microseconds(begin, end);
      sample->device_us = result.device_time_us;
      sample->on_cpu = backend == Backend::kCuda && result.computed_on == Backend::kCpu;
      sample->kept = &result.kept;
      return s;
    };
    measure(w, options, run, &cell, time_device ? &cell.device : nullptr);
    if (!cell.error.empty()) return cell;
  }
  return cell;
}

// A streams row's contexts: one a thread (shared == 0), or `shared` shared by all the threads.
Status stream_contexts(const Workload &w, Backend backend, size_t shared,
                       std::vector<std::unique_ptr<SharedContext>> *contexts) {
  std::vector<std::unique_ptr<Context>> made;
  for (size_t t = 0; t < (shared > 0 ? shared : w.streams); ++t) {
    ContextOptions context_options;
    context_options.backend = backend;
    context_options.reserve_candidates = w.n;
    Status status;
    std::unique_ptr<Context> context = Context::create(context_options, &status);
    if (!context) return status;
    made.push_back(std::move(context));
  }
  if (shared > 0) {
    contexts->push_back(std::make_unique<SharedContext>(std::move(made)));
  } else {
    for (auto &context : made)
      contexts->push_back(std::make_unique<SharedContext>(std::move(context)));
  }
  return Status::Ok();
}

// A streams row: thread t runs its own data sets w.sets[t * per, (t + 1) * per) in turn through
// its own context (shared == 0), or through `shared` contexts shared by all. The threads warm up
// on their sets, start together, and time their calls until options.repeat each or
// options.max_seconds.
Cell measure_streams(const Workload &w, Backend backend, size_t shared,
                     const BenchOptions &options) {
  Cell cell;
  cell.backend = cudanms::to_string(backend);
  if (shared > 0) cell.backend += shared == 1 ? "-shared" : "-shared-" + std::to_string(shared);
  std::vector<std::unique_ptr<SharedContext>> contexts;
  const Status made = stream_contexts(w, backend, shared, &contexts);
  if (!made.ok()) {
    cell.error = made.message();
    return cell;
  }
  const size_t per_stream = w.sets.size() / w.streams;
  std::vector<std::vector<double>> latencies(w.streams);
  std::vector<size_t> checked(w.streams), differing(w.streams), on_cpu(w.streams);
  std::vector<std::string> errors(w.streams);
  std::mutex lock;
  std::condition_variable all_ready;
  size_t ready = 0;
  Clock::time_point start;
  auto stream = [&](size_t t) {
    SharedContext &context = *contexts[shared > 0 ? 0 : t];
    Result result;
    auto call = [&](size_t k, bool timed) {
      const size_t set = t * per_stream + k % per_stream;
      const Clock::time_point begin = Clock::now();
      const Status s = context.run(w.sets[set].view(), w.params, &result);
      const Clock::time_point end = Clock::now();
      if (!s.ok()) {
        errors[t] = s.message();
        return false;
      }
      ++checked[t];
      differing[t] += result.kept != w.reference[set];
      on_cpu[t] += backend == Backend::kCuda && result.computed_on == Backend::kCpu;
      if (timed) latencies[t].push_back(microseconds(begin, end));
      return true;
    };
    for (size_t k = 0; k < per_stream && call(k, false); ++k) {
    }
    {
      std::unique_lock<std::mutex> guard(lock);
      if (++ready == w.streams) {
        start = Clock::now();
        all_ready.notify_all();
      }
      all_ready.wait(guard, [&] { return ready == w.streams; });
    }
    for (size_t k = 0; k < options.repeat && errors[t].empty(); ++k) {
      if (k > 0 && seconds_since(start) >= options.max_seconds) break;
      if (!call(k, true)) break;
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 0; t < w.streams; ++t) threads.emplace_back(stream, t);
  for (std::thread &thread : threads) thread.join();
  const double seconds = seconds_since(start);
  std::vector<double> all;
  for (size_t t = 0; t < w.streams; ++t) {
    if (!errors[t].empty()) cell.error = errors[t];
    all.insert(all.end(), latencies[t].begin(), latencies[t].end());
    cell.checked += checked[t];
    cell.differing += differing[t];
    cell.on_cpu += on_cpu[t];
  }
  cell.frames_per_second = seconds > 0 ? all.size() / seconds : 0;
  cell.host = summarize(std::move(all));
  return cell;
}

Cell measure_opencv(const Workload &w, const BenchOptions &options) {
  Cell cell;
  cell.backend = "opencv";
  cell.call = opencv_call(w.params);
  std::vector<std::unique_ptr<PeerNms>> peers;
  for (const CandidateSet &set : w.sets) {
    std::string why;
    peers.push_back(make_opencv_nms(set, w.params, &why));
    if (!peers.back()) {
      cell.error = why;
      return cell;
    }
  }
  std::vector<uint32_t> kept;
  auto run = [&](size_t set, Sample *sample) {
    const Clock::time_point begin = Clock::now();
    const Status status = peers[set]->run(&kept);
    const Clock::time_point end = Clock::now();
    sample->host_us = microseconds(begin, end);
    sample->kept = &kept;
    return status;
  };
  measure(w, options, run, &cell);
  return cell;
}

void apply_targets(const Workload &w, std::vector<Cell> *cells) {
  auto find = [&](const char *backend) -> Cell * {
    for (Cell &cell : *cells) {
      if (cell.backend == backend && cell.error.empty()) return &cell;
    }
    return nullptr;
  };
  if (Cell *cuda = find("cuda"); cuda != nullptr && cuda_target_us(w) > 0) {
    const double limit = cuda_target_us(w);
    char text[64];
    std::snprintf(text, sizeof text, "p50<=%gus", limit);
    cuda->target = text;
    cuda->target_value = limit;
    cuda->target_met = cuda->host.p50 <= limit;
  }
  Cell *cpu = find("cpu");
  // Dense duplicates and grouping: no slower than the CPU backend, and never computed there.
  if (Cell *cuda = find("cuda");
      cuda != nullptr && (w.data == Data::kDense || w.params.method == Method::kGroup)) {
    cuda->target = "<=cpu, on GPU";
    if (cpu != nullptr) {
      cuda->target_value = cpu->host.p50;
      cuda->target_met = cuda->host.p50 <= cpu->host.p50 && cuda->on_cpu == 0;
    }
  }
  if (cpu != nullptr && w.data == Data::kSlidingWindow && w.params.class_agnostic &&
      w.params.method == Method::kGreedy && w.params.overlap == Overlap::kIoU &&
      w.n == kCpuVersusOpenCvN) {
    char text[64];
    std::snprintf(text, sizeof text, "%gx opencv", kCpuVersusOpenCvFactor);
    cpu->target = text;
    if (const Cell *opencv = find("opencv")) {
      cpu->target_value = opencv->host.p50 / kCpuVersusOpenCvFactor;
      cpu->target_met = cpu->host.p50 <= cpu->target_value;
    }
  }
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string host_cpu() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  std::string model = "unknown CPU";
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " threads";
}

bool wants(const BenchOptions &options, const char *backend) {
  return std::find(options.backends.begin(), options.backends.end(), backend) !=
         options.backends.end();
}

}  // namespace

Latency summarize(std::vector<double> samples_us) {
  Latency l;
  l.runs = samples_us.size();
  if (samples_us.empty()) return l;
  std::sort(samples_us.begin(), samples_us.end());
  auto rank = [&](double q) {
    const size_t r = static_cast<size_t>(std::ceil(q * samples_us.size()));
    return samples_us[std::max<size_t>(r, 1) - 1];
  };
  l.p50 = rank(0.50);
  l.p99 = rank(0.99);
  l.min = samples_us.front();
  double sum = 0;
  for (double us : samples_us) sum += us;
  l.mean = sum / samples_us.size();
  return l;
}

namespace {

// The machine and the peers the run has, printed as the table's header.
Metadata describe_run(const BenchOptions &options, bool *use_cuda, bool *use_opencv) {
  Metadata meta;
  meta.date = utc_now();
  meta.cpu = host_cpu();
  *use_cuda = wants(options, "cuda") && cuda_available(&meta.cuda_note);
  if (*use_cuda) {
    ContextOptions probe;
    probe.backend = Backend::kCuda;
    probe.reserve_candidates = 1;
    Status status;
    const std::unique_ptr<Context> context = Context::create(probe, &status);
    if (context) meta.gpu = context->device_name();
    meta.cuda_note = status.message();
    *use_cuda = status.ok();
  }
  *use_opencv = wants(options, "opencv") && !opencv_version().empty();

  std::printf("cudanms bench %s, %s; seed %llu (--seed %llu replays the data)\n",
              CUDANMS_BENCH_VERSION, meta.date.c_str(),
              static_cast<unsigned long long>(options.seed),
              static_cast<unsigned long long>(options.seed));
  std::printf("GPU: %s\nCPU: %s\nOpenCV: %s\n",
              *use_cuda
                  ? meta.gpu.c_str()
                  : (wants(options, "cuda")
                         ? ("no CUDA device (" + meta.cuda_note + "): CPU and OpenCV only").c_str()
                         : "not asked for"),
              meta.cpu.c_str(),
              *use_opencv                ? opencv_version().c_str()
              : wants(options, "opencv") ? "built without OpenCV"
                                         : "not asked for");
  std::printf(
      "Latency: candidates in host memory to kept indices in host memory; %zu data set(s) per "
      "row in turn, up to %zu runs or %gs per cell; GPU us: device time alone (CUDA events)\n\n",
      options.sets, options.repeat, options.max_seconds);
  if (!options.dump_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(options.dump_dir, error);
    meta.dump_dir = std::filesystem::absolute(options.dump_dir, error).string();
  }
  return meta;
}

// One row's cells: each backend the run has, and the peer where it computes the same thing.
std::vector<Cell> measure_row(const Workload &w, const BenchOptions &options, bool use_cuda,
                              bool use_opencv) {
  std::vector<Cell> row;
  if (w.streams > 0) {
    if (wants(options, "cpu")) row.push_back(measure_streams(w, Backend::kCpu, 0, options));
    if (use_cuda) {
      row.push_back(measure_streams(w, Backend::kCuda, 0, options));
      for (size_t shared : options.shared_contexts) {
        row.push_back(measure_streams(w, Backend::kCuda, shared, options));
      }
    }
  } else if (wants(options, "cpu")) {
    row.push_back(measure_backend(w, Backend::kCpu, options));
  }
  if (use_cuda && w.streams == 0) row.push_back(measure_backend(w, Backend::kCuda, options));
  const bool opencv_has_it =
      w.params.method == Method::kGroup ||
      (w.params.method == Method::kGreedy && w.params.overlap == Overlap::kIoU);
  if (use_opencv && w.single_frames() && opencv_has_it && w.params.class_groups.empty()) {
    row.push_back(measure_opencv(w, options));
  }
  apply_targets(w, &row);
  return row;
}

void print_targets(const std::vector<std::vector<Cell>> &cells) {
  size_t met = 0;
  size_t measured = 0;
  for (const auto &row : cells) {
    for (const Cell &cell : row) {
      if (cell.target_met >= 0) {
        ++measured;
        met += cell.target_met;
      }
    }
  }
  std::printf("\ntargets (set for an NVIDIA H100): %zu of %zu met\n", met, measured);
}

}  // namespace

int benchmark(const BenchOptions &options) {
  bool use_cuda = false, use_opencv = false;
  const Metadata meta = describe_run(options, &use_cuda, &use_opencv);
  std::vector<Workload> workloads;
  Status status = bench_workloads(options, &workloads);
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.message().c_str());
    return 2;
  }

  int exit_status = 0;
  std::vector<std::vector<Cell>> cells;
  print_header();
  for (Workload &w : workloads) {
    status = compute_reference(&w);
    if (!status.ok()) {
      std::fprintf(stderr, "%s n=%zu: the CPU reference failed: %s\n", w.config.c_str(), w.n,
                   status.message().c_str());
      return 1;
    }
    if (!meta.dump_dir.empty() && w.single_frames()) {
      status = dump(meta.dump_dir, w);
      if (!status.ok()) {
        std::fprintf(stderr, "--dump: %s\n", status.message().c_str());
        return 1;
      }
    }
    cells.push_back(measure_row(w, options, use_cuda, use_opencv));
    for (const Cell &cell : cells.back()) {
      print_row(w, cell);
      // Only the peers may differ: OpenCV computes the overlap in double.
      if (!cell.error.empty() || (cell.backend != "opencv" && cell.differing > 0)) exit_status = 1;
    }
    std::fflush(stdout);
  }
  print_targets(cells);
  if (exit_status != 0) {
    std::printf("FAILED: a backend failed or disagreed with the CPU backend (rows above)\n");
  }
  if (!options.json_path.empty()) {
    status = write_file(options.json_path, to_json(options, meta, workloads, cells));
    if (!status.ok()) {
      std::fprintf(stderr, "--json: %s\n", status.message().c_str());
      return 1;
    }
  }
  return exit_status;
}

}  // namespace cudanms::tools
