#include "detectorproperties.h"

#include <gst/gst.h>

namespace {

const GParamFlags kReadWrite = static_cast<GParamFlags>(
    G_PARAM_READWRITE | GST_PARAM_MUTABLE_PLAYING | G_PARAM_STATIC_STRINGS);

bool is(const GParamSpec *pspec, const gchar *name) { return g_str_equal(pspec->name, name); }

/* TRUE and *width, *height set when @text is "WxH" with W, H >= 0 and each at most G_MAXINT. */
bool parse_size(const gchar *text, gint *width, gint *height) {
  gchar *end = nullptr;
  const guint64 w = g_ascii_strtoull(text, &end, 10);
  if (end == text || (*end != 'x' && *end != 'X')) return false;
  const gchar *h_text = end + 1;
  const guint64 h = g_ascii_strtoull(h_text, &end, 10);
  if (end == h_text || *end != '\0' || w > G_MAXINT || h > G_MAXINT) return false;
  *width = static_cast<gint>(w);
  *height = static_cast<gint>(h);
  return true;
}

}  // namespace

std::string string_value(const GValue *value) {
  const gchar *text = g_value_get_string(value);
  return text ? text : "";
}

void DetectorClass::install(GObjectClass *klass, guint label_id, guint class_id_id,
                            const gchar *label_default, const gchar *label_blurb) {
  g_object_class_install_property(
      klass, label_id,
      g_param_spec_string("label", "Label", label_blurb, label_default, kReadWrite));
  g_object_class_install_property(
      klass, class_id_id,
      g_param_spec_int("class-id", "Class id", "Class id of the candidates it attaches", 0,
                       G_MAXINT, 0, kReadWrite));
}

bool DetectorClass::set(const GParamSpec *pspec, const GValue *value) {
  if (is(pspec, "label")) {
    label = string_value(value);
  } else if (is(pspec, "class-id")) {
    class_id = g_value_get_int(value);
  } else {
    return false;
  }
  return true;
}

bool DetectorClass::get(const GParamSpec *pspec, GValue *value) const {
  if (is(pspec, "label")) {
    g_value_set_string(value, label.c_str());
  } else if (is(pspec, "class-id")) {
    g_value_set_int(value, class_id);
  } else {
    return false;
  }
  return true;
}

void WindowSizes::install(GObjectClass *klass, guint min_id, guint max_id, const gchar *min_blurb) {
  g_object_class_install_property(
      klass, min_id, g_param_spec_string("min-size", "Minimum size", min_blurb, "0x0", kReadWrite));
  g_object_class_install_property(
      klass, max_id,
      g_param_spec_string("max-size", "Maximum size",
                          "Largest window, WxH in frame pixels. 0x0: as large as the frame", "0x0",
                          kReadWrite));
}

bool WindowSizes::set(const GParamSpec *pspec, const GValue *value, bool *bad) {
  const bool min = is(pspec, "min-size");
  if (!min && !is(pspec, "max-size")) return false;
  const gchar *text = g_value_get_string(value);
  gint w = 0, h = 0;
  *bad = text && !parse_size(text, &w, &h);
  if (*bad) return true;
  (min ? min_width : max_width) = w;
  (min ? min_height : max_height) = h;
  return true;
}

bool WindowSizes::get(const GParamSpec *pspec, GValue *value) const {
  if (is(pspec, "min-size")) {
    g_value_take_string(value, g_strdup_printf("%dx%d", min_width, min_height));
  } else if (is(pspec, "max-size")) {
    g_value_take_string(value, g_strdup_printf("%dx%d", max_width, max_height));
  } else {
    return false;
  }
  return true;
}
