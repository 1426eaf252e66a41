// One CUDA context per GPU for every camera (cuda-context = shared, the default). Each camera
// runs in a pipeline of its own, and its CUDA elements (nvh264dec, cudacascade, cudanms) share a
// context inside it; across pipelines nothing would, and each camera would hold a context of its
// own: ~0.5 GB of GPU memory each on an H100. The service hands every camera's pipeline the same
// GstCudaContext (gst_element_set_context), as an application does for pipelines that share a
// GPU: the device's primary context, the CUDA runtime's and LibTorch's, so that dnndetect's
// network reads NVDEC's frames in place. cuda-context = per-camera keeps one a camera: a fault that
// poisons a CUDA context then stays with its camera, for 0.5 GB a camera. Without
// gstreamer-cuda-1.0 this does nothing.
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

  // Gives `pipeline` the context of GPU `gpu_id`, made on first use; nothing where there is no
  // GPU (the elements then work as they would alone).
  void share_with(GstElement *pipeline, guint gpu_id);

 private:
  std::map<guint, GstContext *> contexts_;  // null: none can be made for that GPU
};

}  // namespace cudanms::service
