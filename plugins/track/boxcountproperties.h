/* boxcount's properties: the lines, zones and counting rules as set (BoxCountSettings) and their
 * geometry parsed; the element answers "counts" (the running counts) itself. */
#pragma once

#include <cudanms/count.h>
#include <gst/gst.h>

#include <string>
#include <vector>

#define DEFAULT_NORMALIZED FALSE
#define DEFAULT_ANCHOR cudanms::CountAnchor::kBottomCenter
#define DEFAULT_HYSTERESIS 0.1
#define DEFAULT_TRACK_TIMEOUT 30
#define DEFAULT_CROSSING_FRAMES 4
#define DEFAULT_LOITERING_TIME 0.0

enum {
  PROP_0,
  PROP_LINES,
  PROP_ZONES,
  PROP_NORMALIZED,
  PROP_ANCHOR,
  PROP_CLASSES,
  PROP_HYSTERESIS,
  PROP_TRACK_TIMEOUT,
  PROP_CROSSING_FRAMES,
  PROP_LOITERING_TIME,
  PROP_COUNTS,
};

/* What the properties say, as set. */
struct BoxCountSettings {
  std::string lines, zones, classes;
  bool normalized = DEFAULT_NORMALIZED;
  double loitering_time = DEFAULT_LOITERING_TIME; /* seconds; the counter's loiter_frames follow */
  cudanms::CounterParams params{DEFAULT_ANCHOR, DEFAULT_HYSTERESIS, DEFAULT_TRACK_TIMEOUT,
                                DEFAULT_CROSSING_FRAMES};
};

/* Lines and zones parsed, in the units of the text. */
struct Geometry {
  std::vector<cudanms::CountLine> lines;
  std::vector<cudanms::CountZone> zones;
};

bool parse_geometry(const BoxCountSettings &s, Geometry *g, std::string *error);
/* The geometry in frame pixels. */
Geometry in_pixels(Geometry g, bool normalized, int width, int height);

/* Installs every property on @klass; set and get answer the settings' ids, FALSE for another. */
void gst_box_count_install_properties(GObjectClass *klass);
bool gst_box_count_set_setting(BoxCountSettings *settings, guint prop_id, const GValue *value);
bool gst_box_count_get_setting(const BoxCountSettings &settings, guint prop_id, GValue *value);
