/* Class labels along the stream. The candidates and result metas carry class ids only, so a
 * detector announces the name of each class it emits with a custom sticky downstream event
 * "cudanms-label-<class id>" (fields: "class-id" int, "label" string); elements that draw or
 * publish boxes collect them. Sticky, so an element linked later still receives them. */
#pragma once

#include <gst/gst.h>

#include <map>
#include <string>

/* The event announcing that @class_id is called @label. */
GstEvent *gst_cv_label_event_new(gint class_id, const gchar *label);

/* TRUE and *class_id/ *label filled when @event is such an announcement. */
gboolean gst_cv_label_event_parse(GstEvent *event, gint *class_id, std::string *label);

/* The name of @class_id: the announced label, else @fallback when given, else the number. */
std::string gst_cv_label_lookup(const std::map<gint, std::string> &labels, gint class_id,
                                const gchar *fallback = nullptr);
