/* Class labels along the stream, as announced by gst_cuda_nms_label_event_new() (the meta
 * library): elements that draw or publish boxes collect them. */
#pragma once

#include <gst/gst.h>

#include <map>
#include <string>
#include <string_view>

/* TRUE and *class_id/ *label filled when @event is such an announcement. */
gboolean gst_cv_label_event_parse(GstEvent *event, gint *class_id, std::string *label);

/* The class id of a DL Streamer "detection" structure: its "label_id", an int or a uint (as
 * detectors write it) within 0..G_MAXINT. FALSE when it has none. */
gboolean gst_cv_detection_label_id(const GstStructure *detection, gint *class_id);

/* GLib's quark table (g_quark_from_string, g_intern_string, and every GstStructure name or field
 * given as a string) is one lock for the whole process, which a waiting thread sleeps on: 32
 * cameras' threads took it ~20 times a frame each (docs/performance.md, session 35). A frame's
 * path names things through these instead. */

/* The fields of DL Streamer's ROI params ("detection", "object_id") as quarks, looked up once. */
struct GstCvRoiFields {
  GQuark detection, confidence, label, label_id, members, x_min, y_min, x_max, y_max;
  GQuark object_id, id;
};
const GstCvRoiFields &gst_cv_roi_fields();

/* @name's quark and interned string, from a cache of the calling thread's (the table's lock
 * once a name a thread; no copy of @name after that). */
GQuark gst_cv_quark(std::string_view name);
const gchar *gst_cv_interned(std::string_view name);

/* The name of @class_id: the announced label, else @fallback when given, else the number. */
std::string gst_cv_label_lookup(const std::map<gint, std::string> &labels, gint class_id,
                                const gchar *fallback = nullptr);
