// The backend-independent part of the cascade API: parameter checks and the factory.
#include "cudanms/cascade.h"

#include <cmath>
#include <limits>
#include <new>
#include <stdexcept>

#include "common/cascade_geometry.h"
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

namespace {

Status check_image(const GrayView &image) {
  if (image.width < 0 || image.height < 0 || image.width > 65535 || image.height > 65535)
    return Status::Error("image size out of range (at most 65535 x 65535)");
  if (image.width == 0 || image.height == 0) return Status::Ok();
  if (!image.pixels || image.stride < static_cast<size_t>(image.width))
    return Status::Error("image pixels missing or stride shorter than a row");
  return Status::Ok();
}

}  // namespace

Status Detector::detect(const GrayView &image, const DetectParams &params,
                        std::vector<Window> *windows, DetectStats *stats) {
  windows->clear();
  DetectStats ignored;
  if (!stats) stats = &ignored;
  *stats = DetectStats{};
  Status status = validate(params);
  if (status.ok()) status = check_image(image);
  if (!status.ok() || image.width == 0 || image.height == 0) return status;
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

Status Detector::detect(const GrayView &image, const DetectParams &params,
                        const DeviceOutput &output, DeviceCandidates *out, DetectStats *stats) {
  DetectStats ignored;
  if (!stats) stats = &ignored;
  *stats = DetectStats{};
  if (out == nullptr) return Status::Error("no device candidates to detect into");
  Status status = validate(params);
  if (status.ok()) status = check_image(image);
  if (!status.ok()) return status;
  try {
    return detect_device_checked(image, params, output, out, stats);
  } catch (const std::bad_alloc &) {
    return Status::Error("out of host memory for the cascade workspace");
  }
}

Status Detector::detect(const std::vector<DeviceFrame> &frames, const DetectParams &params,
                        DetectStats *stats) {
  DetectStats ignored;
  if (!stats) stats = &ignored;
  *stats = DetectStats{};
  Status status = validate(params);
  for (size_t f = 0; f < frames.size() && status.ok(); ++f) {
    if (frames[f].out == nullptr)
      return Status::Error("frame " + std::to_string(f) + " of the batch has no device candidates");
    status = check_image(frames[f].image);
  }
  if (!status.ok()) return status;
  // Frames of one size together, in their order, in batches the kernels can index.
  std::vector<bool> done(frames.size(), false);
  try {
    for (size_t f = 0; f < frames.size(); ++f) {
      if (done[f]) continue;
      const GrayView &image = frames[f].image;
      if (image.width == 0 || image.height == 0) {
        status = detect_device_checked(image, params, frames[f].output, frames[f].out, stats);
        if (!status.ok()) return status;
        continue;
      }
      const size_t most = max_batch_frames(image.width, image.height, params);
      std::vector<DeviceFrame> batch;
      for (size_t g = f; g < frames.size(); ++g) {
        if (done[g] || frames[g].image.width != image.width ||
            frames[g].image.height != image.height)
          continue;
        batch.push_back(frames[g]);
        done[g] = true;
        if (batch.size() == most) {
          status = detect_batch_checked(batch, params, stats);
          if (!status.ok()) return status;
          batch.clear();
        }
      }
      if (!batch.empty()) status = detect_batch_checked(batch, params, stats);
      if (!status.ok()) return status;
    }
  } catch (const std::bad_alloc &) {
    return Status::Error("out of host memory for the cascade workspace");
  }
  return Status::Ok();
}

Status Detector::detect_batch_checked(const std::vector<DeviceFrame> &frames,
                                      const DetectParams &params, DetectStats *stats) {
  return detect_device_checked(frames.front().image, params, frames.front().output,
                               frames.front().out, stats);
}

Status Detector::detect_device_checked(const GrayView &, const DetectParams &, const DeviceOutput &,
                                       DeviceCandidates *, DetectStats *) {
  return Status::Error(std::string("detection into device candidates needs the cuda backend, "
                                   "not ") +
                       to_string(backend()));
}

size_t Detector::max_windows(int width, int height, const DetectParams &params) const {
  if (!validate(params).ok() || width <= 0 || height <= 0) return 0;
  return detail::make_geometry(*model_, width, height, params, false).windows;
}

}  // namespace cudanms::cascade
