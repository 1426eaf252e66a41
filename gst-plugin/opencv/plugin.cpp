/* The cudanms OpenCV plugin: OpenCV's detectors. Registers its elements, nothing else. */
#include <gst/gst.h>

#include "gstblazeface.h"
#include "gstcvdetect.h"

static gboolean plugin_init(GstPlugin *plugin) {
  gboolean ok = FALSE;
  ok |= GST_ELEMENT_REGISTER(cvdetect, plugin);
  ok |= GST_ELEMENT_REGISTER(blazeface, plugin);
  return ok;
}

GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, cudanmsopencv,
                  "OpenCV's detectors (cascades and HOG on the CPU, the BlazeFace DNN) for cudanms "
                  "pipelines",
                  plugin_init, VERSION, "LGPL", "cudanms", "https://cudanms.invalid/")
