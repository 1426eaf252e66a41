/* The values of the "backend" property of every cudanms element that can run on CUDA (cudanms,
 * cudacascade, dnndetect): one enum type for all. */
#pragma once

#include <gst/gst.h>

#include <string>

typedef enum {
  GST_CUDA_NMS_BACKEND_AUTO,
  GST_CUDA_NMS_BACKEND_CUDA,
  GST_CUDA_NMS_BACKEND_CPU,
} GstCudaNmsBackend;

#define GST_TYPE_CUDA_NMS_BACKEND (gst_cuda_nms_backend_get_type())
GType gst_cuda_nms_backend_get_type(void);

/* CUDA device @gpu_id could not be used (@why): with backend=cuda an error posted on @element
 * (false: the element cannot start); with auto a warning that @what runs on the CPU instead
 * (true). */
bool gst_cuda_nms_backend_falls_back(GstElement *element, GstCudaNmsBackend backend, int gpu_id,
                                     const char *what, const std::string &why);
