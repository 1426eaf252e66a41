/* Class labels along the stream, as announced by gst_cuda_nms_label_event_new() (the meta
 * library): elements that draw or publish boxes collect them. */
#pragma once

#include <gst/gst.h>

#include <map>
#include <string>

/* TRUE and *class_id/ *label filled when @event is such an announcement. */
gboolean gst_cv_label_event_parse(GstEvent *event, gint *class_id, std::string *label);

/* The name of @class_id: the announced label, else @fallback when given, else the number. */
std::string gst_cv_label_lookup(const std::map<gint, std::string> &labels, gint class_id,
                                const gchar *fallback = nullptr);
