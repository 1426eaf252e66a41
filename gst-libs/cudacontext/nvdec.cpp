#include "nvdec.h"

#include <cctype>
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

namespace {

/* nvh264dec, nvh264sldec, nvh264device2dec -> h264. */
std::string codec_of(const std::string &name) {
  std::string codec = name.substr(2, name.size() - 5);  // between "nv" and "dec"
  const size_t device = codec.find("device");
  if (device != std::string::npos) codec.erase(device);
  if (codec.size() > 2 && codec.compare(codec.size() - 2, 2, "sl") == 0)
    codec.erase(codec.size() - 2);
  return codec;
}

}  // namespace

std::string gst_cv_nvdec_moved(const std::string &description, int gpu,
                               const std::function<int(const std::string &)> &device_of,
                               const std::function<std::string(const std::string &, int)> &decoder_for,
                               std::vector<std::string> *moved) {
  if (gpu < 0) return description;
  std::string out;
  size_t at = 0;
  while (at < description.size()) {
    /* An element is a word of its own: between blanks or links ("!"), never inside a quoted
     * property value, which holds no element. */
    if (description[at] == '"') {
      const size_t close = description.find('"', at + 1);
      const size_t end = close == std::string::npos ? description.size() : close + 1;
      out += description.substr(at, end - at);
      at = end;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(description[at])) || description[at] == '!') {
      out += description[at++];
      continue;
    }
    size_t end = at;
    while (end < description.size() && description[end] != '"' && description[end] != '!' &&
           !std::isspace(static_cast<unsigned char>(description[end])))
      ++end;
    const std::string word = description.substr(at, end - at);
    const int device = word.find('=') == std::string::npos ? device_of(word) : -1;
    std::string replacement = word;
    if (device >= 0 && device != gpu && word.size() > 5) {
      const std::string ours = decoder_for(codec_of(word), gpu);
      if (!ours.empty()) {
        replacement = ours;
        if (moved) moved->push_back(word + " -> " + ours);
      }
    }
    out += replacement;
    at = end;
  }
  return out;
}

std::string gst_cv_nvdec_moved(const std::string &description, int gpu,
                               std::vector<std::string> *moved) {
  auto device_of = [](const std::string &name) {
    GstElementFactory *factory = gst_element_factory_find(name.c_str());
    const int device = gst_cv_nvdec_device(factory);
    if (factory) gst_object_unref(factory);
    return device;
  };
  return gst_cv_nvdec_moved(description, gpu, device_of, gst_cv_nvdec_for, moved);
}
