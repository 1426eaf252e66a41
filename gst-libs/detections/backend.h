/* The values of the "backend" property of every cudanms element that can run on CUDA (cudanms,
 * cudacascade, dnndetect): one enum type for all. */
#pragma once

#include <glib-object.h>

typedef enum {
  GST_CUDA_NMS_BACKEND_AUTO,
  GST_CUDA_NMS_BACKEND_CUDA,
  GST_CUDA_NMS_BACKEND_CPU,
} GstCudaNmsBackend;

#define GST_TYPE_CUDA_NMS_BACKEND (gst_cuda_nms_backend_get_type())
GType gst_cuda_nms_backend_get_type(void);
