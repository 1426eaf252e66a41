/* boxcount's properties: the lines, zones and counting rules as set (BoxCountSettings) and their
 * geometry parsed; the element answers "counts" (the running counts) itself. */
#pragma once

#include <cudanms/count.h>
#include <gst/gst.h>

#include <string>
#include <vector>

#include "propertytable.h"

#define DEFAULT_NORMALIZED FALSE
#define DEFAULT_ANCHOR cudanms::CountAnchor::kBottomCenter
#define DEFAULT_HYSTERESIS 0.1
#define DEFAULT_TRACK_TIMEOUT 30
#define DEFAULT_CROSSING_FRAMES 4
#define DEFAULT_LOITERING_TIME 0.0

/* What the properties say, as set. */
struct BoxCountSettings {
  bool changed = true; /* since the streaming thread last took them */
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

/* Installs the settings' properties on @klass (the element answers "counts" itself). */
void gst_box_count_install_properties(GObjectClass *klass,
                                      PropertyTable<BoxCountSettings>::StateOf settings_of);
