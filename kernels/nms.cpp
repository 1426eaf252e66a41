// The backend-independent part of the API: names, parameter checks and the factory.
#include "cudanms/nms.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <set>
#include <sstream>
#include <stdexcept>

#include "common/class_groups.h"
#include "common/points.h"
#include "cpu/cpu_nms.h"
#include "cuda/cuda_nms.h"
#include "cudanms/device_candidates.h"

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
const char *const kMethodNames[] = {"greedy", "matrix", "soft", "weighted", "group"};
const char *const kSoftDecayNames[] = {"linear", "gaussian"};
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
  result->kept_points.clear();
  result->kept_neighbors.clear();
}

// A frame's candidates and parameters as run() takes them, or what is wrong with them.
Status check(const CandidatesView &c, const Params &params) {
  if (c.count > kMaxCount) return Status::Error("more than 2^32 - 1 candidates");
  if (c.count > 0 && (c.boxes == nullptr || c.scores == nullptr)) {
    return Status::Error("candidates have no boxes or no scores");
  }
  if (c.points_per_candidate > kMaxPointsPerCandidate) {
    return Status::Error("more than " + std::to_string(kMaxPointsPerCandidate) +
                         " points per candidate");
  }
  if (c.count > 0 && c.points_per_candidate > 0 && c.points == nullptr) {
    return Status::Error("candidates have points_per_candidate but no points");
  }
  return validate(params);
}

}  // namespace

const char *to_string(Method method) { return kMethodNames[static_cast<int>(method)]; }
const char *to_string(Overlap overlap) { return kOverlapNames[static_cast<int>(overlap)]; }
const char *to_string(Backend backend) { return kBackendNames[static_cast<int>(backend)]; }
const char *to_string(SoftDecay decay) { return kSoftDecayNames[static_cast<int>(decay)]; }
bool parse_method(const std::string &name, Method *m) { return parse_name(kMethodNames, name, m); }
bool parse_overlap(const std::string &name, Overlap *o) {
  return parse_name(kOverlapNames, name, o);
}
bool parse_backend(const std::string &name, Backend *b) {
  return parse_name(kBackendNames, name, b);
}
bool parse_soft_decay(const std::string &name, SoftDecay *d) {
  return parse_name(kSoftDecayNames, name, d);
}

bool parse_class_groups(const std::string &text, std::vector<std::vector<int32_t>> *groups) {
  std::vector<std::vector<int32_t>> parsed;
  std::stringstream all(text);
  std::string group_text;
  while (std::getline(all, group_text, ';')) {
    std::vector<int32_t> group;
    std::stringstream classes(group_text);
    std::string id;
    while (std::getline(classes, id, ',')) {
      const size_t first = id.find_first_not_of(' ');
      const size_t last = id.find_last_not_of(' ');
      if (first == std::string::npos) return false;
      const std::string digits = id.substr(first, last - first + 1);
      char *end = nullptr;
      errno = 0;
      const long value = std::strtol(digits.c_str(), &end, 10);
      if (*end != '\0' || errno != 0 || value < INT32_MIN || value > INT32_MAX) return false;
      group.push_back(static_cast<int32_t>(value));
    }
    if (group.empty()) return false;
    parsed.push_back(std::move(group));
  }
  *groups = std::move(parsed);
  return true;
}

std::string class_groups_to_string(const std::vector<std::vector<int32_t>> &groups) {
  std::string text;
  for (const auto &group : groups) {
    if (!text.empty()) text += ';';
    for (size_t k = 0; k < group.size(); ++k) {
      if (k > 0) text += ',';
      text += std::to_string(group[k]);
    }
  }
  return text;
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
  if (params.method == Method::kSoft && params.soft_decay == SoftDecay::kGaussian &&
      !(params.sigma > 0.0f && std::isfinite(params.sigma))) {
    return Status::Error("sigma must be above 0 and finite, got " + std::to_string(params.sigma));
  }
  if (!(params.group_eps >= 0.0 && std::isfinite(params.group_eps))) {
    return Status::Error("group eps must be at least 0 and finite, got " +
                         std::to_string(params.group_eps));
  }
  std::set<int32_t> grouped;
  for (const auto &group : params.class_groups) {
    for (const int32_t c : std::set<int32_t>(group.begin(), group.end())) {
      if (!grouped.insert(c).second) {
        return Status::Error("class " + std::to_string(c) + " is in two class groups");
      }
    }
  }
  return Status::Ok();
}

// Class groups: the backends see each candidate's group id as its class (common/class_groups.h),
// and the kept class ids they return are put back to the candidates' own.
namespace {
bool regroups(const CandidatesView &c, const Params &params) {
  return detail::groups_classes(params) && c.class_ids != nullptr;
}
}  // namespace

CandidatesView Context::grouped(const CandidatesView &c, const Params &params,
                                std::vector<int32_t> *group_ids) {
  if (!regroups(c, params)) return c;
  detail::group_classes(detail::class_group_table(params.class_groups), c.class_ids, c.count,
                        group_ids);
  CandidatesView view = c;
  view.class_ids = group_ids->data();
  return view;
}

namespace {
// Always, not only after grouping: a backend may not see the class ids at all (CUDA stages none
// for a class-agnostic frame) and report 0.
void restore_class_ids(const CandidatesView &c, Result *result) {
  if (c.class_ids == nullptr) return;
  for (size_t k = 0; k < result->kept_class_ids.size(); ++k) {
    result->kept_class_ids[k] = c.class_ids[result->kept[k]];
  }
}

// What a backend leaves to the caller's candidates: their own class ids, and the kept
// candidates' own points (kWeighted's merged points come from the backend, which knows which
// candidate each kept one claimed).
void finish_from_candidates(const CandidatesView &c, const Params &params, Result *result) {
  restore_class_ids(c, result);
  if (c.points_per_candidate > 0 && params.method != Method::kWeighted) {
    detail::own_points(c, result->kept, &result->kept_points);
  }
}
}  // namespace

Status Context::run(const CandidatesView &c, const Params &params, Result *result) {
  if (result == nullptr) return Status::Error("result is null");
  clear(result);
  Status status = check(c, params);
  if (status.ok()) status = workspace_fits(c.count);
  if (!status.ok()) return status;
  status = out_of_memory_as_status(
      [&] {
        const Status s = run_checked(grouped(c, params, &group_ids_[0]), params, result);
        if (s.ok()) finish_from_candidates(c, params, result);
        return s;
      },
      std::to_string(c.count) + "-candidate frame");
  if (!status.ok()) clear(result);
  return status;
}

namespace {
// A backend times a batch's shared launches as a whole (on its first frame): each frame gets an
// even share of the batch's GPU time, so that the frames' times add up to it.
void share_device_time(std::vector<Result> *results) {
  float total = 0;
  for (const Result &r : *results) total += r.device_time_us;
  for (Result &r : *results) r.device_time_us = total / static_cast<float>(results->size());
}
}  // namespace

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
  status = out_of_memory_as_status(
      [&] {
        const bool any_grouped = std::any_of(frames.begin(), frames.end(), [](const Frame &f) {
          return regroups(f.candidates, f.params);
        });
        std::vector<Frame> regrouped;
        if (any_grouped) {
          regrouped = frames;
          group_ids_.resize(std::max<size_t>(1, frames.size()));
          for (size_t k = 0; k < frames.size(); ++k) {
            regrouped[k].candidates =
                grouped(frames[k].candidates, frames[k].params, &group_ids_[k]);
          }
        }
        const Status s = run_batch_checked(any_grouped ? regrouped : frames, results);
        for (size_t k = 0; k < frames.size() && s.ok(); ++k) {
          finish_from_candidates(frames[k].candidates, frames[k].params, &(*results)[k]);
        }
        if (s.ok()) share_device_time(results);
        return s;
      },
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

Status Context::device_count(const DeviceCandidatesView &candidates, uint32_t *count) const {
  return cudanms::device_count(candidates, count);
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
