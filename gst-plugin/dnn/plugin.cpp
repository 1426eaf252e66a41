/* The cudanms DNN plugin: registers its element, nothing else. */
#include <gst/gst.h>

#include "gstdnndetect.h"

static gboolean plugin_init(GstPlugin *plugin) { return GST_ELEMENT_REGISTER(dnndetect, plugin); }

GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, cudanmsdnn,
                  "DNN detectors (TorchScript through LibTorch) whose candidates go to cudanms",
                  plugin_init, VERSION, "LGPL", "cudanms", "https://cudanms.invalid/")
