#include "backend.h"

GType gst_cuda_nms_backend_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_CUDA_NMS_BACKEND_AUTO, "CUDA when a device is usable, else the CPU (with a warning)",
       "auto"},
      {GST_CUDA_NMS_BACKEND_CUDA, "CUDA only: an error when no device is usable", "cuda"},
      {GST_CUDA_NMS_BACKEND_CPU, "The CPU only", "cpu"},
      {0, NULL, NULL}};
  if (g_once_init_enter(&type))
    g_once_init_leave(&type, g_enum_register_static("GstCudaNmsBackend", values));
  return type;
}
