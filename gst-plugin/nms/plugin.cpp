/* The cudanms plugin: registers its elements, nothing else. */
#include <gst/gst.h>

#include "gstcudanms.h"

static gboolean plugin_init(GstPlugin *plugin) { return GST_ELEMENT_REGISTER(cudanms, plugin); }

GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, cudanms,
                  "Non-maximum suppression of detector candidates on CUDA GPUs or the CPU",
                  plugin_init, VERSION, "LGPL", "cudanms", "https://cudanms.invalid/")
