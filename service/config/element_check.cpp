#include "element_check.h"

#include <cudanms/bounded_file.h>
#include <gst/gst.h>

#include <map>
#include <set>
#include <sstream>

namespace cudanms::service {
namespace {

// The chain's elements whose properties are camera keys, in the camera's pipeline's order.
const char *const kChain[] = {"cudanms", "boxtrack", "boxcount"};

std::string range_of(GParamSpec *pspec) {
  std::ostringstream range;
  range << " (";
  if (G_IS_PARAM_SPEC_INT(pspec)) {
    range << G_PARAM_SPEC_INT(pspec)->minimum << " to " << G_PARAM_SPEC_INT(pspec)->maximum;
  } else if (G_IS_PARAM_SPEC_UINT(pspec)) {
    range << G_PARAM_SPEC_UINT(pspec)->minimum << " to " << G_PARAM_SPEC_UINT(pspec)->maximum;
  } else if (G_IS_PARAM_SPEC_INT64(pspec)) {
    range << G_PARAM_SPEC_INT64(pspec)->minimum << " to " << G_PARAM_SPEC_INT64(pspec)->maximum;
  } else if (G_IS_PARAM_SPEC_UINT64(pspec)) {
    range << G_PARAM_SPEC_UINT64(pspec)->minimum << " to " << G_PARAM_SPEC_UINT64(pspec)->maximum;
  } else if (G_IS_PARAM_SPEC_FLOAT(pspec)) {
    range << G_PARAM_SPEC_FLOAT(pspec)->minimum << " to " << G_PARAM_SPEC_FLOAT(pspec)->maximum;
  } else if (G_IS_PARAM_SPEC_DOUBLE(pspec)) {
    range << G_PARAM_SPEC_DOUBLE(pspec)->minimum << " to " << G_PARAM_SPEC_DOUBLE(pspec)->maximum;
  } else {
    return "";
  }
  range << ")";
  return range.str();
}

// `value` for the property `pspec`, as gst-launch would set it: "" when it is valid.
std::string check_property(GParamSpec *pspec, const std::string &value) {
  GValue v = G_VALUE_INIT;
  g_value_init(&v, pspec->value_type);
  std::string why;
  if (!gst_value_deserialize(&v, value.c_str())) {
    why = std::string("is not a valid ") + g_type_name(pspec->value_type) + ": \"" + value + "\"";
    if (G_IS_PARAM_SPEC_ENUM(pspec)) {
      why = "must be one of";
      GEnumClass *e = G_PARAM_SPEC_ENUM(pspec)->enum_class;
      for (guint i = 0; i < e->n_values; ++i)
        why += std::string(i ? ", " : " ") + e->values[i].value_nick;
      why += ", not \"" + value + "\"";
    }
  } else if (g_param_value_validate(pspec, &v)) {
    why = "is out of range: \"" + value + "\"" + range_of(pspec);
  }
  g_value_unset(&v);
  return why;
}

// An element of `bin` that takes no input: its factory has no sink pad template.
bool has_source_element(GstElement *bin) {
  bool found = false;
  GstIterator *it = gst_bin_iterate_elements(GST_BIN(bin));
  GValue item = G_VALUE_INIT;
  while (!found && gst_iterator_next(it, &item) == GST_ITERATOR_OK) {
    GstElementFactory *factory = gst_element_get_factory(GST_ELEMENT(g_value_get_object(&item)));
    bool takes_input = false;
    for (const GList *t = factory ? gst_element_factory_get_static_pad_templates(factory) : nullptr;
         t; t = t->next)
      takes_input |= static_cast<GstStaticPadTemplate *>(t->data)->direction == GST_PAD_SINK;
    found = factory && !takes_input;
    g_value_reset(&item);
  }
  g_value_unset(&item);
  gst_iterator_free(it);
  return found;
}

// A gst-launch description, parsed as a bin: "" when it parses and has the pads asked for.
std::string check_description(const std::string &text, bool needs_sink, bool needs_src,
                              GstElement **parsed = nullptr) {
  GError *error = nullptr;
  GstElement *bin = gst_parse_bin_from_description_full(text.c_str(), TRUE, nullptr,
                                                        GST_PARSE_FLAG_FATAL_ERRORS, &error);
  if (!bin && needs_src) {
    // It may end in caps (v4l2src ! video/x-raw,width=640,height=480), which gst-launch's
    // grammar takes only between two elements, as they are in the camera's pipeline.
    GError *again = nullptr;
    bin = gst_parse_bin_from_description_full((text + " ! identity").c_str(), TRUE, nullptr,
                                              GST_PARSE_FLAG_FATAL_ERRORS, &again);
    g_clear_error(&again);
    if (bin) g_clear_error(&error);
  }
  if (!bin) {
    std::string why = error ? error->message : "cannot be parsed";
    g_clear_error(&error);
    return why;
  }
  gst_object_ref_sink(bin);
  GstPad *sink = gst_element_get_static_pad(bin, "sink");
  GstPad *src = gst_element_get_static_pad(bin, "src");
  std::string why;
  // A source's first element makes the video (no sink pad template: rtspsrc, v4l2src...); its
  // next may show a free sink pad only because it links to a pad that comes later.
  if (needs_sink && !sink)
    why = "must take video in (its first element has no free sink pad)";
  else if (!needs_sink && !has_source_element(bin))
    why = "must begin with a source element (rtspsrc, v4l2src, videotestsrc...)";
  else if (needs_src && !src)
    why = "must give video out (its last element has no free source pad)";
  if (sink) gst_object_unref(sink);
  if (src) gst_object_unref(src);
  if (why.empty() && parsed) {
    *parsed = bin;
  } else {
    gst_object_unref(bin);
  }
  return why;
}

// A model file that an element of `bin` names in its "model" property (a path: a value with a
// '/' or a '.'; cvdetect's "hog-people" is a built-in model): readable, within the limit.
std::string check_models(GstElement *bin) {
  std::string why;
  GstIterator *it = gst_bin_iterate_recurse(GST_BIN(bin));
  GValue item = G_VALUE_INIT;
  while (why.empty() && gst_iterator_next(it, &item) == GST_ITERATOR_OK) {
    GstElement *element = GST_ELEMENT(g_value_get_object(&item));
    GParamSpec *pspec = g_object_class_find_property(G_OBJECT_GET_CLASS(element), "model");
    if (pspec && pspec->value_type == G_TYPE_STRING) {
      gchar *model = nullptr;
      g_object_get(element, "model", &model, NULL);
      const std::string path = model ? model : "";
      g_free(model);
      std::string unreadable;
      if (path.find_first_of("/.") != std::string::npos &&
          !check_bounded_file(path, kModelFileLimit, &unreadable))
        why = "model \"" + path + "\" cannot be read: " + unreadable;
    }
    g_value_reset(&item);
  }
  g_value_unset(&item);
  gst_iterator_free(it);
  return why;
}

// The chain's elements, made once, and their writable properties that a camera key may set
// (the service carries boxtrack's next-id and boxcount's counts across connections itself).
class Chain {
 public:
  Chain() {
    for (const char *name : kChain) {
      GstElement *element = gst_element_factory_make(name, nullptr);
      if (!element) {
        missing_.push_back(name);
        continue;
      }
      elements_.push_back(GST_ELEMENT(gst_object_ref_sink(element)));
      guint n = 0;
      GParamSpec **specs = g_object_class_list_properties(G_OBJECT_GET_CLASS(element), &n);
      for (guint i = 0; i < n; ++i) {
        const std::string key = specs[i]->name;
        if (!(specs[i]->flags & G_PARAM_WRITABLE) || (specs[i]->flags & G_PARAM_CONSTRUCT_ONLY) ||
            key == "name" || key == "parent" || key == "next-id" || key == "counts")
          continue;
        properties_.emplace(key, specs[i]);
      }
      g_free(specs);
    }
  }
  ~Chain() {
    for (GstElement *element : elements_) gst_object_unref(element);
  }
  Chain(const Chain &) = delete;
  Chain &operator=(const Chain &) = delete;

  const std::vector<std::string> &missing() const { return missing_; }

  // "" when an element of the chain takes `key` = `value`.
  std::string check(const std::string &key, const std::string &value) const {
    const auto property = properties_.find(key);
    if (property == properties_.end()) return "unknown key";
    std::string why = check_property(property->second, value);
    std::string unreadable;
    if (why.empty() && key == "labels-file" && !value.empty() &&
        !check_bounded_file(value, kLabelsFileLimit, &unreadable))
      why = "cannot read \"" + value + "\": " + unreadable;
    return why;
  }

 private:
  std::vector<GstElement *> elements_;  // they own the GParamSpecs' classes
  std::multimap<std::string, GParamSpec *> properties_;
  std::vector<std::string> missing_;
};

// A key's value as the elements take it: "" when they do.
std::string check_key(const Chain &chain, const std::string &key, const std::string &value) {
  if (key == "source") return check_description(value, false, true);
  if (key == "record-encoder") return check_description(value, true, true);
  if (key == "detector") {
    GstElement *bin = nullptr;
    std::string why = check_description(value, true, true, &bin);
    if (bin) {
      why = check_models(bin);
      gst_object_unref(bin);
    }
    return why;
  }
  return chain.check(key, value);
}

}  // namespace

bool check_elements(const std::vector<CameraConfig> &cameras, const std::string &name,
                    std::vector<std::string> *errors) {
  const size_t before = errors->size();
  const Chain chain;
  for (const std::string &element : chain.missing())
    errors->push_back(name + ": the " + element +
                      " element is not installed (set GST_PLUGIN_PATH to the build's plugins "
                      "folder, or install the plugin)");
  std::map<std::pair<std::string, std::string>, std::string> checked;  // (key, value) -> why
  std::set<std::string> said;
  for (const CameraConfig &camera : cameras) {
    std::vector<std::pair<std::string, std::string>> keys(camera.elements.begin(),
                                                          camera.elements.end());
    for (const char *key : {"source", "detector", "record-encoder"}) {
      const auto given = camera.settings.find(key);
      if (given != camera.settings.end()) keys.emplace_back(key, given->second);
    }
    for (const auto &[key, value] : keys) {
      if (!chain.missing().empty() && camera.elements.count(key)) continue;  // said above
      auto [found, fresh] = checked.emplace(std::pair{key, value}, "");
      if (fresh) found->second = check_key(chain, key, value);
      if (found->second.empty()) continue;
      const std::string group = camera.own_keys.count(key) ? "camera." + camera.name : "service";
      const std::string error = name + ":" + group + ":" + key + ": " + found->second;
      if (said.insert(error).second) errors->push_back(error);
    }
  }
  return errors->size() == before;
}

bool load_checked_config(const std::string &path, ServiceConfig *config,
                         std::vector<std::string> *errors, int visible_gpus, std::string *text_read,
                         bool need_camera) {
  return load_config(path, config, errors, visible_gpus, text_read, need_camera, check_elements);
}

bool parse_checked_config(const std::string &text, const std::string &name, ServiceConfig *config,
                          std::vector<std::string> *errors, int visible_gpus, bool need_camera) {
  return parse_config(text, name, config, errors, visible_gpus, need_camera, check_elements);
}

}  // namespace cudanms::service
