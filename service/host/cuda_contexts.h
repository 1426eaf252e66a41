// Where a camera's CUDA elements run: the CUDA context of the GPU placement chose, handed to the
// camera's pipeline (gst_element_set_context) as an application does; the elements (their gpu-id
// left at -1) take it and run on its device. Nothing else tells them their GPU.
// cuda-context = shared (the default): one context per GPU for every camera, the device's
// primary one, the CUDA runtime's and LibTorch's, so that dnndetect's network reads NVDEC's
// frames in place; each camera holding a context of its own would cost ~0.5 GB of GPU memory a
// camera on an H100. cuda-context = per-camera: a new context a camera, so that a fault that
// poisons a CUDA context stays with its camera.
#pragma once

#include <gst/gst.h>

#include <map>

namespace cudanms::service {

class CudaContexts {
 public:
  CudaContexts() = default;
  ~CudaContexts();
  CudaContexts(const CudaContexts &) = delete;
  CudaContexts &operator=(const CudaContexts &) = delete;

  // Gives `pipeline` the context of GPU `gpu`: the shared one, made on first use, or with `own`
  // a new one for it alone. Where none can be made (no driver; a build without CUDA, where tests
  // pretend GPUs) a context naming the GPU alone (elementcudacontext.h): the elements still
  // know their GPU, and a CUDA element makes its context there or runs on the CPU.
  void give(GstElement *pipeline, guint gpu, bool own);

 private:
  std::map<guint, GstContext *> shared_;  // a GPU's (naming it alone where none can be made)
};

}  // namespace cudanms::service
