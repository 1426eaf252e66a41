// The backend-independent part of the API: names, parameter checks and the factory.
#include "cudanms/nms.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <new>
#include <stdexcept>

#include "cpu/cpu_nms.h"
#include "cuda/cuda_nms.h"

namespace cudanms {
namespace {

template <typename Enum, size_t N>
bool parse_name(const char *const (&names)[N], const std::string &name, Enum *out) {
  for (size_t i = 0; i < N; ++i) {
    if (name == names[i]) {
      *out = static_cast<Enum>(i);
      return true;
    }
  }
  return false;
}

// Indexed by the enums' values.
const char *const kMethodNames[] = {"greedy", "matrix"};
const char *const kOverlapNames[] = {"iou", "iomin", "ios", "diou"};
const char *const kBackendNames[] = {"cpu", "cuda"};

// Host bytes a context's workspace takes per candidate, at most (the CPU backend's: box, score,
// class, index, rank entry, grid mark).
constexpr size_t kWorkspaceBytesPerCandidate = 40;

// A workspace for n candidates larger than the machine's memory is refused up front: where the
// kernel overcommits, allocating it would succeed and touching it would get the process killed.
// run() calls it per frame: the machine's memory is read once (sysconf is a syscall).
Status workspace_fits(size_t n) {
  static const double physical = [] {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page_size = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page_size > 0 ? static_cast<double>(pages) * page_size : 0.0;
  }();
  const double needed = static_cast<double>(n) * kWorkspaceBytesPerCandidate;
  if (physical == 0.0 || needed <= physical)
    return Status::Ok();  // 0: unknown, the allocator judges
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  char text[160];
  std::snprintf(text, sizeof text,
                "out of host memory: %zu candidates need %.1f GiB of workspace, more than this "
                "machine's %.1f GiB",
                n, needed / kGiB, physical / kGiB);
  return Status::Error(text);
}

// Host memory that cannot be had (std::vector throws) as a Status naming what it was for.
template <typename Work>
Status out_of_memory_as_status(Work work, const std::string &what) {
  try {
    return work();
  } catch (const std::bad_alloc &) {
    return Status::Error("out of host memory for " + what);
  } catch (const std::length_error &) {
    return Status::Error("out of host memory for " + what);
  }
}

// Empties a result the caller reuses per frame, keeping its vectors' memory.
void clear(Result *result) {
  result->kept.clear();
  result->counts = Counts();
  result->device_time_us = 0;
  result->computed_on = Backend::kCpu;
  result->kept_boxes.clear();
  result->kept_scores.clear();
  result->kept_class_ids.clear();
}

// A frame's candidates and parameters as run() takes them, or what is wrong with them.
Status check(const CandidatesView &c, const Params &params) {
  if (c.count > kMaxCount) return Status::Error("more than 2^32 - 1 candidates");
  if (c.count > 0 && (c.boxes == nullptr || c.scores == nullptr)) {
    return Status::Error("candidates have no boxes or no scores");
  }
  return validate(params);
}

}  // namespace

const char *to_string(Method method) { return kMethodNames[static_cast<int>(method)]; }
const char *to_string(Overlap overlap) { return kOverlapNames[static_cast<int>(overlap)]; }
const char *to_string(Backend backend) { return kBackendNames[static_cast<int>(backend)]; }
bool parse_method(const std::string &name, Method *m) { return parse_name(kMethodNames, name, m); }
bool parse_overlap(const std::string &name, Overlap *o) {
  return parse_name(kOverlapNames, name, o);
}
bool parse_backend(const std::string &name, Backend *b) {
  return parse_name(kBackendNames, name, b);
}

Status validate(const Params &params) {
  if (!(params.threshold >= 0.0f && params.threshold <= 1.0f)) {
    return Status::Error("threshold must be in [0, 1], got " + std::to_string(params.threshold));
  }
  if (std::isnan(params.score_threshold)) return Status::Error("score threshold is NaN");
  if (params.max_candidates == 0) return Status::Error("max_candidates must be at least 1");
  if (params.max_candidates > kMaxCount) {
    return Status::Error("max_candidates must be at most " + std::to_string(kMaxCount));
  }
  return Status::Ok();
}

Status Context::run(const CandidatesView &c, const Params &params, Result *result) {
  if (result == nullptr) return Status::Error("result is null");
  clear(result);
  Status status = check(c, params);
  if (status.ok()) status = workspace_fits(c.count);
  if (!status.ok()) return status;
  status = out_of_memory_as_status([&] { return run_checked(c, params, result); },
                                   std::to_string(c.count) + "-candidate frame");
  if (!status.ok()) clear(result);
  return status;
}

Status Context::run(const std::vector<Frame> &frames, std::vector<Result> *results) {
  if (results == nullptr) return Status::Error("results is null");
  results->clear();
  size_t total = 0;
  for (size_t k = 0; k < frames.size(); ++k) {
    const Status status = check(frames[k].candidates, frames[k].params);
    if (!status.ok()) return Status::Error("frame " + std::to_string(k) + ": " + status.message());
    total += frames[k].candidates.count;
  }
  Status status = workspace_fits(total);
  if (!status.ok()) return status;
  results->resize(frames.size());
  status = out_of_memory_as_status([&] { return run_batch_checked(frames, results); },
                                   std::to_string(frames.size()) + "-frame batch");
  if (!status.ok()) results->clear();
  return status;
}

Status Context::run_batch_checked(const std::vector<Frame> &frames, std::vector<Result> *results) {
  for (size_t k = 0; k < frames.size(); ++k) {
    const Status status = run_checked(frames[k].candidates, frames[k].params, &(*results)[k]);
    if (!status.ok()) return status;
  }
  return Status::Ok();
}

Status Context::run(const DeviceCandidatesView &c, const Params &params, Result *result) {
  if (result == nullptr) return Status::Error("result is null");
  clear(result);
  if (c.capacity > kMaxCount) return Status::Error("more than 2^32 - 1 candidates");
  if (c.capacity > 0 && (c.boxes == nullptr || c.scores == nullptr || c.count == nullptr)) {
    return Status::Error("device candidates have no boxes, scores or count");
  }
  if (reinterpret_cast<uintptr_t>(c.boxes) % 16 != 0) {
    return Status::Error("device candidate boxes must be 16-byte aligned");
  }
  Status status = validate(params);
  if (!status.ok()) return status;
  status = out_of_memory_as_status([&] { return run_device_checked(c, params, result); },
                                   std::to_string(c.capacity) + "-candidate device frame");
  if (!status.ok()) clear(result);
  return status;
}

Status Context::run_device_checked(const DeviceCandidatesView &, const Params &, Result *) {
  return Status::Error(std::string("device candidates need the cuda backend, not ") +
                       to_string(backend()) + "; download them first");
}

std::unique_ptr<Context> Context::create(const ContextOptions &options, Status *status) {
  if (options.reserve_candidates > kMaxCount) {
    *status = Status::Error("reserve_candidates must be at most " + std::to_string(kMaxCount));
    return nullptr;
  }
  *status = workspace_fits(options.reserve_candidates);
  if (!status->ok()) return nullptr;
  std::unique_ptr<Context> context;
  *status = out_of_memory_as_status(
      [&] {
        Status created;
        context = options.backend == Backend::kCpu ? detail::create_cpu_context(options)
                                                   : detail::create_cuda_context(options, &created);
        return created;
      },
      "a workspace for " + std::to_string(options.reserve_candidates) + " candidates");
  if (!status->ok()) context.reset();
  return context;
}

}  // namespace cudanms
