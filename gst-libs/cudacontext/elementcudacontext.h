/* The pipeline's CUDA context for a CUDA element, shared the GStreamer way (gstreamer-cuda-1.0,
 * as gst-plugins-bad's nvcodec elements do): found through the context query and message when
 * the element starts, answered to neighbours asking, taken from the application. Every library
 * object created inside a Scope works in that context from then on (cudanms binds to the context
 * current at creation), so cudacascade, cudanms, dnndetect, cudaupload and nvh264dec share one
 * context and their device pointers and events mix.
 *
 * Where nobody has one yet, the element makes it from the device's primary context (the CUDA
 * runtime's, hence LibTorch's), not a new one as gstreamer-cuda's own helper would: a network
 * that LibTorch runs then reads NVDEC's frames and writes candidates that cudanms reads, all in
 * place.
 *
 * Built without gstreamer-cuda-1.0 (or without CUDA), ensure() is false and everything else a
 * no-op: the libraries then use the device's primary context. */
#pragma once

#include <gst/gst.h>

#include <mutex>

/* A GstContext (transfer full) carrying the primary context of CUDA device gpu_id, for an
 * application to give its pipelines (gst_element_set_context); nullptr where it cannot be made.
 * One GstCudaContext per device and process: elements compare context objects. */
GstContext *gst_cv_cuda_primary_context_new(int gpu_id);

class ElementCudaContext {
 public:
  ElementCudaContext() = default;
  ~ElementCudaContext() { reset(); }
  ElementCudaContext(const ElementCudaContext &) = delete;
  ElementCudaContext &operator=(const ElementCudaContext &) = delete;

  /* In start(): the pipeline's context for CUDA device gpu_id, else the device's primary one
   * (announced to the pipeline); false when gstreamer-cuda cannot be used (not built in, no
   * driver). */
  bool ensure(GstElement *element, int gpu_id);
  /* In stop(). */
  void reset();
  /* In the element's set_context vfunc. */
  void set_context(GstElement *element, GstContext *context, int gpu_id);
  /* In the query vfunc: true when it answered a context query. */
  bool handle_query(GstElement *element, GstQuery *query);

  /* The GstCudaContext (a new reference), or nullptr. */
  GstObject *get() const;
  /* Its CUcontext, or nullptr. */
  void *handle() const;

  /* Makes the context current on this thread for the scope's life (a no-op without one). */
  class Scope {
   public:
    explicit Scope(const ElementCudaContext &context);
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

   private:
    [[maybe_unused]] bool pushed_ = false; /* unused without gstreamer-cuda */
  };

 private:
  mutable std::recursive_mutex lock_;
  /* A GstCudaContext; unused without gstreamer-cuda. */
  [[maybe_unused]] GstObject *context_ = nullptr;
};
