/* The cudanms cascade plugin: registers its element, nothing else. */
#include <gst/gst.h>

#include "gstcudacascade.h"

static gboolean plugin_init(GstPlugin *plugin) { return GST_ELEMENT_REGISTER(cudacascade, plugin); }

GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, cudanmscascade,
                  "OpenCV's Haar and LBP cascades on CUDA GPUs, every window a candidate for "
                  "cudanms",
                  plugin_init, VERSION, "LGPL", "cudanms", "https://cudanms.invalid/")
