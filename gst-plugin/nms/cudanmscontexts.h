/* Where a cudanms element's NMS runs: its NMS context, made as the settings ask (backend, gpu-id,
 * batch-streams, time-gpu) in the pipeline's CUDA context, and replaced by a CPU one when CUDA
 * fails. With batch-streams=true the elements on the same GPU and CUDA context share one NMS
 * context, so that the frames of many streams reach the GPU in batches
 * (cudanms/shared_context.h). */
#pragma once

#include <gst/gst.h>

#include <functional>
#include <memory>
#include <string>

#include "cudanms/device_candidates.h"
#include "cudanms/nms.h"
#include "cudanms/shared_context.h"
#include "cudanmsproperties.h"
#include "elementcudacontext.h"
#include "gstcudanms.h"

using NmsContextFactory = std::function<std::unique_ptr<cudanms::Context>(
    const cudanms::ContextOptions &, cudanms::Status *)>;

/* The context that elements with batch-streams=true share for @options (its device and
 * time_device) in the CUDA context @cuda_context (a CUcontext, or nullptr for the device's
 * primary one): made by @create for the first of them, and kept while one holds it. Null on
 * failure, with *status saying why. */
std::shared_ptr<cudanms::SharedContext> gst_cuda_nms_shared_context(
    const cudanms::ContextOptions &options, void *cuda_context, const NmsContextFactory &create,
    cudanms::Status *status);

/* With backend=auto, frames of at most this many candidates run on the CPU twin (the same kept
 * set): on an H100 a frame's GPU round trip (upload, launches, one synchronisation) takes ~40 us,
 * where the CPU needs ~1 us for BlazeFace's 6 candidates. Device candidates are counted first
 * (one word copied) and only so few are downloaded: their NMS on the GPU costs the GPU that the
 * detectors of many cameras share ~30 us a frame, a download none. */
constexpr size_t kCpuFrameCandidates = 64;

/* One element's NMS: streaming thread, start and stop only. Errors and warnings are posted on
 * the element; a FALSE return means an error was posted. */
class ElementNms {
 public:
  explicit ElementNms(const GstCudaNmsBackendHooks &hooks) : hooks_(hooks) {}

  /* Makes the context the settings ask for, unless the current one already is. */
  gboolean ensure(GstElement *element, const Settings &s);
  /* Drops the NMS contexts; with @cuda_too, the pipeline's CUDA context too. */
  void reset(bool cuda_too);

  /* NMS of host candidates into result(); a failing CUDA context is replaced by a CPU one (one
   * warning) and the frame rerun. A frame of no candidates keeps nothing; one of at most
   * kCpuFrameCandidates runs on the CPU with backend=auto. */
  gboolean run(GstElement *element, const Settings &s, const cudanms::CandidatesView &view,
               gint64 *latency_ns);
  /* NMS on device candidates where they are: the kept values come back with result(), and
   * *view points at them, the result's indices renumbered to match. False on failure, and with
   * backend=auto for a frame of at most kCpuFrameCandidates: the caller downloads them and runs
   * NMS on the host path. */
  bool run_in_place(GstElement *element, const Settings &s,
                    const cudanms::DeviceCandidatesView &device, cudanms::CandidatesView *view,
                    gint64 *latency_ns);

  /* The last frame's result, reused frame after frame. */
  cudanms::Result &result() { return result_; }
  /* Where NMS runs, once ensure() succeeded: its CUcontext (nullptr on the CPU)... */
  void *cuda_context() const { return nms_->context()->cuda_context(); }
  /* ...and where the last frame ran. */
  const gchar *backend_name() const { return cudanms::to_string(last_backend_); }
  ElementCudaContext &cuda() { return cuda_; }

 private:
  std::shared_ptr<cudanms::SharedContext> create_cpu_context(GstElement *element);
  std::shared_ptr<cudanms::SharedContext> create_cuda_context(GstElement *element,
                                                              const Settings &s,
                                                              cudanms::Status *status);
  cudanms::SharedContext *in_place_context(GstElement *element, const Settings &s);

  GstCudaNmsBackendHooks hooks_;
  std::shared_ptr<cudanms::SharedContext> nms_; /* its own, or shared (batch-streams) */
  bool nms_shared_ = false;
  /* With a shared context: the element's own CUDA context for device candidates, made at the
   * first (in_place_context). */
  std::shared_ptr<cudanms::SharedContext> in_place_;
  std::shared_ptr<cudanms::SharedContext> small_frames_; /* the CPU twin, made at the first */
  cudanms::Backend last_backend_ = cudanms::Backend::kCpu;
  guint64 context_generation_ = 0;
  ElementCudaContext cuda_; /* the pipeline's CUDA context, where there is one */
  cudanms::Result result_;
};
