/* Class labels along the stream, as announced by gst_cuda_nms_label_event_new() (the meta
 * library): elements that draw or publish boxes collect them. */
#pragma once

#include <gst/gst.h>

#include <map>
#include <string>

/* TRUE and *class_id/ *label filled when @event is such an announcement. */
gboolean gst_cv_label_event_parse(GstEvent *event, gint *class_id, std::string *label);

/* The class id of a DL Streamer "detection" structure: its "label_id", an int or a uint (as
 * detectors write it) within 0..G_MAXINT. FALSE when it has none. */
gboolean gst_cv_detection_label_id(const GstStructure *detection, gint *class_id);

/* The name of @class_id: the announced label, else @fallback when given, else the number. */
std::string gst_cv_label_lookup(const std::map<gint, std::string> &labels, gint class_id,
                                const gchar *fallback = nullptr);
