/* The cudanms tracking plugin: registers its elements, nothing else. */
#include <gst/gst.h>

#include "gstboxcount.h"
#include "gstboxtrack.h"

static gboolean plugin_init(GstPlugin *plugin) {
  gboolean ok = GST_ELEMENT_REGISTER(boxtrack, plugin);
  ok |= GST_ELEMENT_REGISTER(boxcount, plugin);
  return ok;
}

GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, cudanmstrack,
                  "Tracks the boxes cudanms kept and counts them over lines and zones", plugin_init,
                  VERSION, "LGPL", "cudanms", "https://cudanms.invalid/")
