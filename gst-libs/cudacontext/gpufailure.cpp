#include "gpufailure.h"

void gst_cv_post_gpu_failed(GstElement *element, int gpu, const std::string &error) {
  GstStructure *details = gst_structure_new(GST_CV_GPU_FAILED_MESSAGE, "gpu", G_TYPE_INT, gpu,
                                            "error", G_TYPE_STRING, error.c_str(), nullptr);
  gst_element_post_message(element, gst_message_new_element(GST_OBJECT(element), details));
}

bool gst_cv_parse_gpu_failed(GstMessage *message, int *gpu, std::string *error) {
  if (GST_MESSAGE_TYPE(message) != GST_MESSAGE_ELEMENT ||
      !gst_message_has_name(message, GST_CV_GPU_FAILED_MESSAGE))
    return false;
  const GstStructure *details = gst_message_get_structure(message);
  gint index = -1;
  gst_structure_get_int(details, "gpu", &index);
  const gchar *text = gst_structure_get_string(details, "error");
  if (gpu) *gpu = index;
  if (error) *error = text ? text : "";
  return true;
}
