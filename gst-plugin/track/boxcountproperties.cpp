#include "boxcountproperties.h"

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

void gst_box_count_install_properties(GObjectClass *klass,
                                      PropertyTable<BoxCountSettings>::StateOf settings_of) {
  const GParamFlags rw = static_cast<GParamFlags>(G_PARAM_READWRITE | GST_PARAM_MUTABLE_PLAYING |
                                                  G_PARAM_STATIC_STRINGS);
  PropertyTable<BoxCountSettings>(klass, settings_of, [](BoxCountSettings &s) { s.changed = true; })
      .field(
          g_param_spec_string("lines", "Lines",
                              "Counting lines, NAME:x1,y1,x2,y2 separated by ';': in crosses "
                              "from s < 0 to s > 0, s = (x2-x1)(py-y1) - (y2-y1)(px-x1)",
                              "", rw),
          &BoxCountSettings::lines)
      .field(
          g_param_spec_string("zones", "Zones",
                              "Zones, NAME:x1,y1 x2,y2 x3,y3 ... separated by ';': simple "
                              "polygons of at least 3 points",
                              "", rw),
          &BoxCountSettings::zones)
      .field(
          g_param_spec_boolean("normalized", "Normalized",
                               "Lines and zones are in 0..1 of the frame, not in pixels",
                               DEFAULT_NORMALIZED, rw),
          &BoxCountSettings::normalized)
      .field(
          g_param_spec_enum("anchor", "Anchor", "The point of a box that counts",
                            GST_TYPE_BOX_COUNT_ANCHOR, static_cast<gint>(DEFAULT_ANCHOR), rw),
          [](auto &s) -> auto & { return s.params.anchor; })
      .field(
          g_param_spec_string("classes", "Classes",
                              "Count only boxes of these labels or class ids, comma-separated "
                              "(\"person,car\"); empty: every box",
                              "", rw),
          &BoxCountSettings::classes)
      .field(
          g_param_spec_double("hysteresis", "Hysteresis",
                              "A track changes side of a line or zone edge once its anchor is "
                              "more than this times its box's height from it (0: at once)",
                              0.0, 10.0, DEFAULT_HYSTERESIS, rw),
          [](auto &s) -> auto & { return s.params.hysteresis; })
      .field(
          g_param_spec_uint("track-timeout", "Track timeout",
                            "Frames (of time) a track may go unseen before it is forgotten and "
                            "leaves its zones; boxtrack's track-buffer",
                            1, 1000000, DEFAULT_TRACK_TIMEOUT, rw),
          [](auto &s) -> auto & { return s.params.track_timeout; })
      .field(
          g_param_spec_uint("crossing-frames", "Crossing frames",
                            "A crossing counts once the track was seen this many times past "
                            "the band on the other side (1: at once): a box that jumps to "
                            "another object as the track ends crosses nothing",
                            1, 1000, DEFAULT_CROSSING_FRAMES, rw),
          [](auto &s) -> auto & { return s.params.crossing_frames; })
      .field(
          g_param_spec_double("loitering-time", "Loitering time",
                              "Seconds in a zone after which a track loiters: a zone-loitering "
                              "event once a stay, counted as loitering until it leaves (0: "
                              "never)",
                              0.0, 31536000.0, DEFAULT_LOITERING_TIME, rw),
          &BoxCountSettings::loitering_time);
  gst_type_mark_as_plugin_api(GST_TYPE_BOX_COUNT_ANCHOR, static_cast<GstPluginAPIFlags>(0));
}
