/* The cudanms OpenCV plugin: registers its elements, nothing else. */
#include <gst/gst.h>

#include "gstboxoverlay.h"
#include "gstcudacascade.h"
#include "gstcvdetect.h"
#include "gstjsonmetawriter.h"

static gboolean plugin_init(GstPlugin *plugin) {
  gboolean ok = FALSE;
  ok |= GST_ELEMENT_REGISTER(cvdetect, plugin);
  ok |= GST_ELEMENT_REGISTER(cudacascade, plugin);
  ok |= GST_ELEMENT_REGISTER(boxoverlay, plugin);
  ok |= GST_ELEMENT_REGISTER(jsonmetawriter, plugin);
  return ok;
}

GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, cudanmsopencv,
                  "OpenCV detectors (CPU and CUDA cascades), box overlay and JSON metadata writer "
                  "for cudanms pipelines",
                  plugin_init, VERSION, "LGPL", "cudanms", "https://cudanms.invalid/")
