// The backend-independent part of the cascade API: parameter checks and the factory.
#include "cudanms/cascade.h"

#include <cmath>
#include <limits>
#include <new>
#include <stdexcept>

#include "cpu/cpu_cascade.h"
#include "cuda/cuda_cascade.h"

namespace cudanms::cascade {

Status validate(const DetectParams &p) {
  if (!(p.scale_factor > 1.0) || !std::isfinite(p.scale_factor))
    return Status::Error("scale factor must be a finite number above 1");
  if (p.min_width < 0 || p.min_height < 0 || p.max_width < 0 || p.max_height < 0)
    return Status::Error("window sizes must not be negative");
  return Status::Ok();
}

std::unique_ptr<Detector> Detector::create(std::shared_ptr<const Model> model,
                                           const DetectorOptions &options, Status *status) {
  if (!model) {
    *status = Status::Error("no cascade model");
    return nullptr;
  }
  int previous = 0;
  for (const int start : options.segment_starts) {
    if (start <= previous) {
      *status = Status::Error("segment starts must ascend from 1");
      return nullptr;
    }
    previous = start;
  }
  try {
    if (options.backend == Backend::kCuda)
      return detail::create_cuda_detector(model, options, status);
    *status = Status::Ok();
    return detail::create_cpu_detector(std::move(model));
  } catch (const std::bad_alloc &) {
    *status = Status::Error("out of host memory for the cascade detector's workspace");
    return nullptr;
  }
}

Status Detector::detect(const GrayView &image, const DetectParams &params,
                        std::vector<Window> *windows, DetectStats *stats) {
  windows->clear();
  DetectStats ignored;
  if (!stats) stats = &ignored;
  *stats = DetectStats{};
  Status status = validate(params);
  if (!status.ok()) return status;
  if (image.width < 0 || image.height < 0 || image.width > 65535 || image.height > 65535)
    return Status::Error("image size out of range (at most 65535 x 65535)");
  if (image.width == 0 || image.height == 0) return Status::Ok();
  if (!image.pixels || image.stride < static_cast<size_t>(image.width))
    return Status::Error("image pixels missing or stride shorter than a row");
  try {
    status = detect_checked(image, params, windows, stats);
  } catch (const std::bad_alloc &) {
    status = Status::Error("out of host memory for the cascade workspace");
  } catch (const std::length_error &) {
    status = Status::Error("out of host memory for the cascade workspace");
  }
  if (!status.ok()) windows->clear();
  return status;
}

}  // namespace cudanms::cascade
