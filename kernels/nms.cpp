// The backend-independent part of the API: names, parameter checks and the factory.
#include "cudanms/nms.h"

#include <cmath>

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
const char *const kOverlapNames[] = {"iou", "iomin", "ios"};
const char *const kBackendNames[] = {"cpu", "cuda"};

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
  result->kept.clear();
  result->counts = Counts();
  result->device_time_us = 0;
  if (c.count > kMaxCount) return Status::Error("more than 2^32 - 1 candidates");
  if (c.count > 0 && (c.boxes == nullptr || c.scores == nullptr)) {
    return Status::Error("candidates have no boxes or no scores");
  }
  Status status = validate(params);
  if (!status.ok()) return status;
  status = run_checked(c, params, result);
  if (!status.ok()) {
    result->kept.clear();
    result->counts = Counts();
  }
  return status;
}

std::unique_ptr<Context> Context::create(const ContextOptions &options, Status *status) {
  if (options.max_candidates == 0 || options.max_candidates > kMaxCount) {
    *status = Status::Error("max_candidates must be in [1, 2^32 - 1]");
    return nullptr;
  }
  *status = Status::Ok();
  if (options.backend == Backend::kCpu) return detail::create_cpu_context(options);
  return detail::create_cuda_context(options, status);
}

}  // namespace cudanms
