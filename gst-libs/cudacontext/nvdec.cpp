#include "nvdec.h"

#include <map>
#include <mutex>

namespace {

bool is_nvidia_decoder(GstElementFactory *factory) {
  const gchar *name = gst_plugin_feature_get_name(GST_PLUGIN_FEATURE(factory));
  return g_str_has_prefix(name, "nv") && g_str_has_suffix(name, "dec") &&
         gst_element_factory_list_is_type(factory, GST_ELEMENT_FACTORY_TYPE_DECODER);
}

}  // namespace

int gst_cv_nvdec_device(GstElementFactory *factory) {
  if (!factory || !is_nvidia_decoder(factory)) return -1;
  static std::mutex lock;
  static std::map<std::string, int> devices;
  const std::string name = gst_plugin_feature_get_name(GST_PLUGIN_FEATURE(factory));
  std::lock_guard<std::mutex> guard(lock);
  auto found = devices.find(name);
  if (found != devices.end()) return found->second;
  int device = -1;
  /* Made, not started: an element opens its device only from READY on. */
  if (GstElement *element = gst_element_factory_create(factory, nullptr)) {
    GParamSpec *pspec = g_object_class_find_property(G_OBJECT_GET_CLASS(element), "cuda-device-id");
    if (pspec && pspec->value_type == G_TYPE_UINT) {
      guint id = 0;
      g_object_get(element, "cuda-device-id", &id, NULL);
      device = static_cast<int>(id);
    } else if (pspec && pspec->value_type == G_TYPE_INT) {
      g_object_get(element, "cuda-device-id", &device, NULL);
    }
    gst_object_unref(gst_object_ref_sink(element));
  }
  devices.emplace(name, device);
  return device;
}

std::string gst_cv_nvdec_for(const std::string &codec, int gpu) {
  GList *factories =
      gst_element_factory_list_get_elements(GST_ELEMENT_FACTORY_TYPE_DECODER, GST_RANK_NONE);
  /* Highest rank first: of a device's decoders (nvh264dec, nvh264sldec), decodebin's choice. */
  factories = g_list_sort(factories, gst_plugin_feature_rank_compare_func);
  const std::string prefix = "nv" + codec;
  std::string found;
  for (GList *f = factories; f && found.empty(); f = f->next) {
    auto *factory = GST_ELEMENT_FACTORY(f->data);
    const gchar *name = gst_plugin_feature_get_name(GST_PLUGIN_FEATURE(factory));
    if (g_str_has_prefix(name, prefix.c_str()) && gst_cv_nvdec_device(factory) == gpu) found = name;
  }
  gst_plugin_feature_list_free(factories);
  return found;
}
