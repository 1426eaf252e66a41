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

bool gst_cuda_nms_backend_falls_back(GstElement *element, GstCudaNmsBackend backend, int gpu_id,
                                     const char *what, const std::string &why) {
  if (backend == GST_CUDA_NMS_BACKEND_CUDA) {
    GST_ELEMENT_ERROR(element, RESOURCE, OPEN_READ_WRITE,
                      ("backend=cuda but CUDA device %d cannot be used", gpu_id),
                      ("%s", why.c_str()));
    return false;
  }
  GST_ELEMENT_WARNING(element, RESOURCE, OPEN_READ_WRITE,
                      ("CUDA device %d cannot be used: %s runs on the CPU", gpu_id, what),
                      ("%s", why.c_str()));
  return true;
}
