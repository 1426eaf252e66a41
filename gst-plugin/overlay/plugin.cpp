/* The cudanms overlay plugin: registers its element, nothing else. */
#include <gst/gst.h>

#include "gstboxoverlay.h"

static gboolean plugin_init(GstPlugin *plugin) { return GST_ELEMENT_REGISTER(boxoverlay, plugin); }

GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, cudanmsoverlay,
                  "Draws the boxes cudanms kept, with their labels and points", plugin_init,
                  VERSION, "LGPL", "cudanms", "https://cudanms.invalid/")
