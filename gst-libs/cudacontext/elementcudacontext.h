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
 * An element whose gpu-id is -1 (the default) runs on the device of the context it is given, so
 * that an application places a pipeline on a GPU by the context alone (the service does). A
 * context that names a device without a context object (gst_cv_cuda_device_context_new) places
 * it too: the element then makes its context on that device.
 *
 * Built without CUDA, ensure() is false and the rest keeps only the device named: the elements
 * run on the CPU. */
#pragma once

#include <gst/gst.h>

#include <mutex>

/* A GstContext (transfer full) carrying the primary context of CUDA device gpu_id, for an
 * application to give its pipelines (gst_element_set_context); nullptr where it cannot be made.
 * One GstCudaContext per device and process: elements compare context objects. */
GstContext *gst_cv_cuda_primary_context_new(int gpu_id);
/* The same with a new CUDA context of its own on device gpu_id (not the primary one), for a
 * pipeline whose faults must stay its own; nullptr where it cannot be made. */
GstContext *gst_cv_cuda_own_context_new(int gpu_id);
/* A GstContext of gstreamer-cuda's type naming CUDA device gpu_id alone (its "cuda-device-id",
 * no context object): what an application gives where no context can be made for that device
 * here (no driver; a build without CUDA, where tests pretend GPUs). */
GstContext *gst_cv_cuda_device_context_new(int gpu_id);
/* The CUDA device a context of that type names, or -1 (another type, no device). */
int gst_cv_cuda_context_device(GstContext *context);

class ElementCudaContext {
 public:
  ElementCudaContext() = default;
  ~ElementCudaContext() { reset(); }
  ElementCudaContext(const ElementCudaContext &) = delete;
  ElementCudaContext &operator=(const ElementCudaContext &) = delete;

  /* In start(): the pipeline's context for CUDA device gpu_id (any device's for -1), else the
   * device's primary one (device 0's for -1), announced to the pipeline; false when
   * gstreamer-cuda cannot be used (not built in, no driver). */
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
  /* The CUDA device an element of gpu-id @gpu_id runs on: its context's where it holds one (an
   * application hands a pipeline the context of the GPU it placed it on), else gpu_id, else
   * (-1) the device a context named, else 0. */
  int device_for(int gpu_id) const;

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
  /* Under lock_: */
  void remember_named_device(GstContext *context);
  /* The device to make a context on: gpu_id, else the one a context named, else 0. */
  int wanted_device(int gpu_id) const;

  mutable std::recursive_mutex lock_;
  /* A GstCudaContext; unused without gstreamer-cuda. */
  [[maybe_unused]] GstObject *context_ = nullptr;
  /* The device a context without an object named (-1: none), for gpu-id -1. */
  int named_device_ = -1;
};
