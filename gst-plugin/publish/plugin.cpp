/* The cudanms publishing plugin: registers its elements, nothing else. */
#include <gst/gst.h>

#include "gstjsonmetawriter.h"
#ifdef CUDANMS_HAVE_MQTT
#include "gstmetapublish.h"
#endif

static gboolean plugin_init(GstPlugin *plugin) {
  gboolean ok = GST_ELEMENT_REGISTER(jsonmetawriter, plugin);
#ifdef CUDANMS_HAVE_MQTT
  ok |= GST_ELEMENT_REGISTER(metapublish, plugin);
#endif
  return ok;
}

GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, cudanmspublish,
                  "Publishes the boxes cudanms kept: JSON lines files and MQTT",
                  plugin_init, VERSION, "LGPL", "cudanms", "https://cudanms.invalid/")
