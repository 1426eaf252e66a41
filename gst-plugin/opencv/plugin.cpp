/* The cudanms OpenCV plugin: registers its elements, nothing else. */
#include <gst/gst.h>

#include "gstblazeface.h"
#include "gstboxoverlay.h"
#include "gstcudacascade.h"
#include "gstcvdetect.h"
#include "gstjsonmetawriter.h"
#ifdef CUDANMS_HAVE_MQTT
#include "gstmetapublish.h"
#endif

static gboolean plugin_init(GstPlugin *plugin) {
  gboolean ok = FALSE;
  ok |= GST_ELEMENT_REGISTER(cvdetect, plugin);
  ok |= GST_ELEMENT_REGISTER(cudacascade, plugin);
  ok |= GST_ELEMENT_REGISTER(blazeface, plugin);
  ok |= GST_ELEMENT_REGISTER(boxoverlay, plugin);
  ok |= GST_ELEMENT_REGISTER(jsonmetawriter, plugin);
#ifdef CUDANMS_HAVE_MQTT
  ok |= GST_ELEMENT_REGISTER(metapublish, plugin);
#endif
  return ok;
}

GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, cudanmsopencv,
                  "OpenCV detectors (CPU and CUDA cascades, BlazeFace DNN), box overlay, JSON "
                  "metadata writer and "
                  "MQTT publisher for cudanms pipelines",
                  plugin_init, VERSION, "LGPL", "cudanms", "https://cudanms.invalid/")
