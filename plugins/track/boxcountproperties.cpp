#include "boxcountproperties.h"

#include "detectorproperties.h"

#define GST_TYPE_BOX_COUNT_ANCHOR (gst_box_count_anchor_get_type())
static GType gst_box_count_anchor_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {static_cast<gint>(cudanms::CountAnchor::kBottomCenter), "The box's bottom centre",
       "bottom-center"},
      {static_cast<gint>(cudanms::CountAnchor::kCenter), "The box's centre", "center"},
      {static_cast<gint>(cudanms::CountAnchor::kTopCenter), "The box's top centre", "top-center"},
      {0, nullptr, nullptr}};
  if (g_once_init_enter(&type)) {
    g_once_init_leave(&type, g_enum_register_static("GstBoxCountAnchor", values));
  }
  return type;
}

bool parse_geometry(const BoxCountSettings &s, Geometry *g, std::string *error) {
  std::string why;
  if (!cudanms::parse_lines(s.lines, s.normalized, &g->lines, &why)) {
    *error = "lines: " + why;
    return false;
  }
  if (!cudanms::parse_zones(s.zones, s.normalized, &g->zones, &why)) {
    *error = "zones: " + why;
    return false;
  }
  return true;
}

/* The geometry in frame pixels. */
Geometry in_pixels(Geometry g, bool normalized, int width, int height) {
  if (!normalized) return g;
  auto scale = [&](cudanms::CountPoint &p) {
    p.x *= width;
    p.y *= height;
  };
  for (auto &line : g.lines) {
    scale(line.a);
    scale(line.b);
  }
  for (auto &zone : g.zones)
    for (auto &p : zone.polygon) scale(p);
  return g;
}

void gst_box_count_install_properties(GObjectClass *klass) {
  const GParamFlags rw = static_cast<GParamFlags>(G_PARAM_READWRITE | GST_PARAM_MUTABLE_PLAYING |
                                                  G_PARAM_STATIC_STRINGS);
  g_object_class_install_property(
      klass, PROP_LINES,
      g_param_spec_string("lines", "Lines",
                          "Counting lines, NAME:x1,y1,x2,y2 separated by ';': in crosses from "
                          "s < 0 to s > 0, s = (x2-x1)(py-y1) - (y2-y1)(px-x1)",
                          "", rw));
  g_object_class_install_property(
      klass, PROP_ZONES,
      g_param_spec_string("zones", "Zones",
                          "Zones, NAME:x1,y1 x2,y2 x3,y3 ... separated by ';': simple polygons "
                          "of at least 3 points",
                          "", rw));
  g_object_class_install_property(
      klass, PROP_NORMALIZED,
      g_param_spec_boolean("normalized", "Normalized",
                           "Lines and zones are in 0..1 of the frame, not in pixels",
                           DEFAULT_NORMALIZED, rw));
  g_object_class_install_property(
      klass, PROP_ANCHOR,
      g_param_spec_enum("anchor", "Anchor", "The point of a box that counts",
                        GST_TYPE_BOX_COUNT_ANCHOR, static_cast<gint>(DEFAULT_ANCHOR), rw));
  g_object_class_install_property(
      klass, PROP_CLASSES,
      g_param_spec_string("classes", "Classes",
                          "Count only boxes of these labels or class ids, comma-separated "
                          "(\"person,car\"); empty: every box",
                          "", rw));
  g_object_class_install_property(
      klass, PROP_HYSTERESIS,
      g_param_spec_double("hysteresis", "Hysteresis",
                          "A track changes side of a line or zone edge once its anchor is more "
                          "than this times its box's height from it (0: at once)",
                          0.0, 10.0, DEFAULT_HYSTERESIS, rw));
  g_object_class_install_property(
      klass, PROP_TRACK_TIMEOUT,
      g_param_spec_uint("track-timeout", "Track timeout",
                        "Frames (of time) a track may go unseen before it is forgotten and "
                        "leaves its zones; boxtrack's track-buffer",
                        1, 1000000, DEFAULT_TRACK_TIMEOUT, rw));
  g_object_class_install_property(
      klass, PROP_CROSSING_FRAMES,
      g_param_spec_uint("crossing-frames", "Crossing frames",
                        "A crossing counts once the track was seen this many times past the band "
                        "on the other side (1: at once): a box that jumps to another object as "
                        "the track ends crosses nothing",
                        1, 1000, DEFAULT_CROSSING_FRAMES, rw));
  g_object_class_install_property(
      klass, PROP_LOITERING_TIME,
      g_param_spec_double("loitering-time", "Loitering time",
                          "Seconds in a zone after which a track loiters: a zone-loitering event "
                          "once a stay, counted as loitering until it leaves (0: never)",
                          0.0, 31536000.0, DEFAULT_LOITERING_TIME, rw));
  g_object_class_install_property(
      klass, PROP_COUNTS,
      g_param_spec_boxed("counts", "Counts",
                         "The lines' running counts: one field a line, a structure \"line\" "
                         "with guint64 fields in and out; set them to carry counts over",
                         GST_TYPE_STRUCTURE, rw));

  gst_type_mark_as_plugin_api(GST_TYPE_BOX_COUNT_ANCHOR, static_cast<GstPluginAPIFlags>(0));
}

bool gst_box_count_set_setting(BoxCountSettings *s, guint prop_id, const GValue *value) {
  switch (prop_id) {
    case PROP_LINES:
      s->lines = string_value(value);
      break;
    case PROP_ZONES:
      s->zones = string_value(value);
      break;
    case PROP_NORMALIZED:
      s->normalized = g_value_get_boolean(value);
      break;
    case PROP_ANCHOR:
      s->params.anchor = static_cast<cudanms::CountAnchor>(g_value_get_enum(value));
      break;
    case PROP_CLASSES:
      s->classes = string_value(value);
      break;
    case PROP_HYSTERESIS:
      s->params.hysteresis = g_value_get_double(value);
      break;
    case PROP_TRACK_TIMEOUT:
      s->params.track_timeout = g_value_get_uint(value);
      break;
    case PROP_CROSSING_FRAMES:
      s->params.crossing_frames = g_value_get_uint(value);
      break;
    case PROP_LOITERING_TIME:
      s->loitering_time = g_value_get_double(value);
      break;
    default:
      return false;
  }
  return true;
}

bool gst_box_count_get_setting(const BoxCountSettings &s, guint prop_id, GValue *value) {
  switch (prop_id) {
    case PROP_LINES:
      g_value_set_string(value, s.lines.c_str());
      break;
    case PROP_ZONES:
      g_value_set_string(value, s.zones.c_str());
      break;
    case PROP_NORMALIZED:
      g_value_set_boolean(value, s.normalized);
      break;
    case PROP_ANCHOR:
      g_value_set_enum(value, static_cast<gint>(s.params.anchor));
      break;
    case PROP_CLASSES:
      g_value_set_string(value, s.classes.c_str());
      break;
    case PROP_HYSTERESIS:
      g_value_set_double(value, s.params.hysteresis);
      break;
    case PROP_TRACK_TIMEOUT:
      g_value_set_uint(value, static_cast<guint>(s.params.track_timeout));
      break;
    case PROP_CROSSING_FRAMES:
      g_value_set_uint(value, static_cast<guint>(s.params.crossing_frames));
      break;
    case PROP_LOITERING_TIME:
      g_value_set_double(value, s.loitering_time);
      break;
    default:
      return false;
  }
  return true;
}
