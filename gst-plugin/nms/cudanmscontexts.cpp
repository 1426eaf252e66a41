#include "cudanmscontexts.h"

#include <chrono>
#include <iterator>
#include <map>
#include <mutex>
#include <numeric>
#include <tuple>

#include "gpufailure.h"

GST_DEBUG_CATEGORY_EXTERN(gst_cuda_nms_debug);
#define GST_CAT_DEFAULT gst_cuda_nms_debug

namespace {

/* Weak: a shared context goes when the last element using it stops. */
using Key = std::tuple<int, void *, bool>; /* device, CUcontext, time_device */
std::mutex registry_lock;
std::map<Key, std::weak_ptr<cudanms::SharedContext>> registry;

}  // namespace

std::shared_ptr<cudanms::SharedContext> gst_cuda_nms_shared_context(
    const cudanms::ContextOptions &options, void *cuda_context, const NmsContextFactory &create,
    cudanms::Status *status) {
  std::lock_guard<std::mutex> guard(registry_lock);
  const Key key{options.device, cuda_context, options.time_device};
  if (auto shared = registry[key].lock()) return shared;
  for (auto it = registry.begin(); it != registry.end();) {
    it = it->second.expired() ? registry.erase(it) : std::next(it);
  }
  std::unique_ptr<cudanms::Context> context = create(options, status);
  if (!context) return nullptr;
  auto shared = std::make_shared<cudanms::SharedContext>(std::move(context));
  registry[key] = shared;
  return shared;
}

void ElementNms::reset(bool cuda_too) {
  nms_.reset();
  in_place_.reset();
  small_frames_.reset();
  if (cuda_too) cuda_.reset();
}

std::shared_ptr<cudanms::SharedContext> ElementNms::create_cpu_context(GstElement *self) {
  cudanms::ContextOptions options;
  options.backend = cudanms::Backend::kCpu;
  cudanms::Status status;
  auto context = cudanms::Context::create(options, &status);
  if (!context) {
    GST_ERROR_OBJECT(self, "no CPU context: %s", status.message().c_str());
    return nullptr;
  }
  return std::make_shared<cudanms::SharedContext>(std::move(context));
}

/* A CUDA context: the one the elements with batch-streams share, or the element's own. */
std::shared_ptr<cudanms::SharedContext> ElementNms::create_cuda_context(GstElement *self,
                                                                        const Settings &s,
                                                                        cudanms::Status *status) {
  /* In the pipeline's CUDA context (shared with cudacascade, cudaupload, nvh264dec...) where
   * gstreamer-cuda finds or makes one, on its device; else in the device's primary context. */
  cuda_.ensure(self, s.gpu_id);
  cudanms::ContextOptions options;
  options.backend = cudanms::Backend::kCuda;
  options.device = cuda_.device_for(s.gpu_id);
  options.time_device = s.time_gpu;
  ElementCudaContext::Scope scope(cuda_);
  if (s.batch_streams) {
    return gst_cuda_nms_shared_context(options, cuda_.handle(), hooks_.create, status);
  }
  auto context = hooks_.create(options, status);
  if (!context) return nullptr;
  return std::make_shared<cudanms::SharedContext>(std::move(context));
}

gboolean ElementNms::ensure(GstElement *self, const Settings &s) {
  if (nms_ && context_generation_ == s.backend_generation) return TRUE;

  nms_.reset();
  in_place_.reset();
  small_frames_.reset();
  nms_shared_ = false;
  context_generation_ = s.backend_generation;

  if (s.backend != GST_CUDA_NMS_BACKEND_CPU) {
    std::string why;
    if (hooks_.cuda_available(&why)) {
      cudanms::Status status;
      nms_ = create_cuda_context(self, s, &status);
      if (!nms_) why = status.message();
      nms_shared_ = nms_ && s.batch_streams;
    }
    if (!nms_ &&
        !gst_cuda_nms_backend_falls_back(self, s.backend, cuda_.device_for(s.gpu_id),
                                         "non-maximum suppression", why))
      return FALSE;
  }
  if (!nms_) nms_ = create_cpu_context(self);
  if (!nms_) {
    GST_ELEMENT_ERROR(self, CORE, FAILED, ("Could not create a CPU NMS context"), (NULL));
    return FALSE;
  }
  GST_INFO_OBJECT(self, "NMS runs on %s%s", nms_->context()->device_name().c_str(),
                  nms_.use_count() > 1 ? ", shared with other cudanms elements" : "");
  return TRUE;
}

gboolean ElementNms::run(GstElement *self, const Settings &s, const cudanms::CandidatesView &view,
                         gint64 *latency_ns) {
  if (view.count == 0) {
    /* Nothing ran: named as a frame of a few candidates would be (backend=auto: the CPU). */
    last_backend_ = s.backend == GST_CUDA_NMS_BACKEND_AUTO ? cudanms::Backend::kCpu
                                                           : nms_->context()->backend();
    /* cleared, not reassigned: their memory serves the next frame */
    result_.kept.clear();
    result_.kept_boxes.clear();
    result_.kept_scores.clear();
    result_.kept_class_ids.clear();
    result_.kept_points.clear();
    result_.counts = cudanms::Counts();
    result_.device_time_us = 0;
    *latency_ns = 0;
    return TRUE;
  }
  const cudanms::Params params = s.params();
  for (;;) {
    cudanms::SharedContext *nms = nms_.get();
    if (s.backend == GST_CUDA_NMS_BACKEND_AUTO && view.count <= kCpuFrameCandidates &&
        nms_->context()->backend() == cudanms::Backend::kCuda) {
      if (!small_frames_) small_frames_ = create_cpu_context(self);
      if (small_frames_) nms = small_frames_.get();
    }
    last_backend_ = nms->context()->backend();
    const auto start = std::chrono::steady_clock::now();
    const cudanms::Status status = nms->run(view, params, &result_);
    *latency_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
    if (status.ok()) return TRUE;
    const cudanms::Context &context = *nms->context();
    if (context.backend() != cudanms::Backend::kCuda) {
      GST_ELEMENT_ERROR(self, CORE, FAILED, ("Non-maximum suppression failed"),
                        ("%s", status.message().c_str()));
      return FALSE;
    }
    GST_ELEMENT_WARNING(self, RESOURCE, FAILED,
                        ("CUDA non-maximum suppression failed: switching to the CPU"),
                        ("%s failed: %s", context.device_name().c_str(), status.message().c_str()));
    gst_cv_post_gpu_failed(self, cuda_.device_for(s.gpu_id),
                           context.device_name() + ": " + status.message());
    nms_ = create_cpu_context(self);
    nms_shared_ = false;
    in_place_.reset();
    if (!nms_) {
      GST_ELEMENT_ERROR(self, CORE, FAILED, ("Could not create a CPU NMS context"), (NULL));
      return FALSE;
    }
  }
}

/* Where device candidates run in place: the element's context. A shared one (batch-streams)
 * would only put them in turn with the other streams' frames, as a batch takes host frames: the
 * element makes a CUDA context of its own for them at the first, else uses the shared one. */
cudanms::SharedContext *ElementNms::in_place_context(GstElement *self, const Settings &s) {
  if (!nms_shared_) return nms_.get();
  if (!in_place_) {
    Settings own = s;
    own.batch_streams = false;
    cudanms::Status status;
    in_place_ = create_cuda_context(self, own, &status);
    if (!in_place_) {
      GST_WARNING_OBJECT(self,
                         "no CUDA context of its own for device candidates (%s): they run "
                         "on the shared one",
                         status.message().c_str());
      in_place_ = nms_;
    }
  }
  return in_place_.get();
}

bool ElementNms::run_in_place(GstElement *self, const Settings &s,
                              const cudanms::DeviceCandidatesView &device,
                              cudanms::CandidatesView *view, gint64 *latency_ns) {
  const auto start = std::chrono::steady_clock::now();
  cudanms::SharedContext *nms = in_place_context(self, s);
  if (s.backend == GST_CUDA_NMS_BACKEND_AUTO &&
      nms->context()->backend() == cudanms::Backend::kCuda) {
    uint32_t count = 0;
    const cudanms::Status counted = nms->context()->device_count(device, &count);
    if (!counted.ok() || count <= kCpuFrameCandidates) return false;  // the host path says why
  }
  last_backend_ = nms->context()->backend();
  const cudanms::Status status = nms->run(device, s.params(), &result_);
  *latency_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  if (!status.ok()) {
    /* The host path decides: a download that fails too (a producer's count past its buffer) is
     * the stream's error; a CUDA failure moves NMS to the CPU there. */
    GST_WARNING_OBJECT(self, "NMS on the device candidates failed: %s", status.message().c_str());
    return false;
  }
  cudanms::Result &r = result_;
  std::iota(r.kept.begin(), r.kept.end(), 0u);
  *view = {r.kept_boxes.data(), r.kept_scores.data(), r.kept_class_ids.data(), r.kept.size()};
  return true;
}
