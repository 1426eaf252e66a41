#include "detectionsjson.h"

#include <gst/cudanms/cudanmsmeta.h>
#include <gst/video/video.h>
#include <json-glib/json-glib.h>

#include <cmath>
#include <vector>

#include "keptboxes.h"
#include "labels.h"

GType gst_detections_format_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {static_cast<gint>(DetectionsFormat::kCudanms), "cudanms's own JSON", "cudanms"},
      {static_cast<gint>(DetectionsFormat::kDlStreamer),
       "DL Streamer gvametaconvert's JSON (objects[], resolution, timestamp)", "dlstreamer"},
      {0, nullptr, nullptr}};
  if (g_once_init_enter(&type)) {
    g_once_init_leave(&type, g_enum_register_static("GstDetectionsFormat", values));
  }
  return type;
}

DetectionsStream::~DetectionsStream() {
  if (generator_) g_object_unref(generator_);
}

void DetectionsStream::reset() {
  frames_ = 0;
  width_ = height_ = 0;
  labels_.clear();
}

void DetectionsStream::on_event(GstEvent *event) {
  if (GST_EVENT_TYPE(event) == GST_EVENT_CAPS) {
    GstCaps *caps = nullptr;
    gst_event_parse_caps(event, &caps);
    GstVideoInfo info;
    if (gst_video_info_from_caps(&info, caps)) {
      width_ = GST_VIDEO_INFO_WIDTH(&info);
      height_ = GST_VIDEO_INFO_HEIGHT(&info);
    }
    return;
  }
  gint class_id;
  std::string label;
  if (gst_cv_label_event_parse(event, &class_id, &label)) labels_[class_id] = label;
}

namespace {

/* One frame's fields besides its boxes. */
struct DetectionsFrame {
  guint64 frame;
  int width, height;
  const std::string &source;
  const GstSegment *segment;
};

void add_int(JsonBuilder *b, const char *name, gint64 value) {
  json_builder_set_member_name(b, name);
  json_builder_add_int_value(b, value);
}
void add_double(JsonBuilder *b, const char *name, double value) {
  json_builder_set_member_name(b, name);
  json_builder_add_double_value(b, value);
}
void add_string(JsonBuilder *b, const char *name, const std::string &value) {
  json_builder_set_member_name(b, name);
  json_builder_add_string_value(b, value.c_str());
}

void encode_cudanms(GstObject *element, JsonBuilder *b, GstBuffer *buf,
                    GstCudaNmsResultMeta *result, const std::vector<KeptBox> &boxes,
                    const DetectionsFrame &frame) {
  add_int(b, "frame", static_cast<gint64>(frame.frame));
  json_builder_set_member_name(b, "pts");
  if (GST_BUFFER_PTS_IS_VALID(buf)) {
    json_builder_add_int_value(b, static_cast<gint64>(GST_BUFFER_PTS(buf)));
  } else {
    json_builder_add_null_value(b);
  }
  if (!frame.source.empty()) add_string(b, "source", frame.source);
  add_int(b, "width", frame.width);
  add_int(b, "height", frame.height);
  if (result) {
    add_int(b, "candidates", static_cast<gint64>(result->candidates_in));
  } else {
    GstCudaNmsCandidatesMeta *c = gst_buffer_get_cuda_nms_candidates_meta(buf);
    if (c && !gst_cuda_nms_candidates_meta_map(c, nullptr)) {  // device candidates: downloaded once
      GST_WARNING_OBJECT(element, "could not download the device candidates to count them");
    }
    add_int(b, "candidates", c ? c->n : 0);
  }
  add_int(b, "kept", static_cast<gint64>(boxes.size()));
  if (result) {
    add_string(b, "backend", result->backend ? result->backend : "");
    add_double(b, "nms_latency_us", result->latency_ns / 1000.0);
  }
  json_builder_set_member_name(b, "boxes");
  json_builder_begin_array(b);
  for (const KeptBox &box : boxes) {
    json_builder_begin_object(b);
    add_string(b, "label", box.label);
    if (box.class_id >= 0) add_int(b, "class_id", box.class_id);  // an ROI type alone: none
    add_double(b, "score", box.score);
    add_double(b, "x", box.x1);
    add_double(b, "y", box.y1);
    add_double(b, "w", box.x2 - box.x1);
    add_double(b, "h", box.y2 - box.y1);
    if (box.track_id > 0) add_int(b, "track_id", static_cast<gint64>(box.track_id));
    if (box.members > 0) add_int(b, "members", box.members);
    if (!box.points.empty()) {
      /* [[x, y], ...]; a point the candidates did not have (NaN) is null: JSON has no NaN. */
      json_builder_set_member_name(b, "points");
      json_builder_begin_array(b);
      for (size_t k = 0; k + 1 < box.points.size(); k += 2) {
        if (std::isfinite(box.points[k]) && std::isfinite(box.points[k + 1])) {
          json_builder_begin_array(b);
          json_builder_add_double_value(b, box.points[k]);
          json_builder_add_double_value(b, box.points[k + 1]);
          json_builder_end_array(b);
        } else {
          json_builder_add_null_value(b);
        }
      }
      json_builder_end_array(b);
    }
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
}

/* gvametaconvert's layout. Its x, y, w, h are the ROI meta's integers; ours are rounded to
 * the nearest pixel the same way; bounding_box keeps the exact box, as a fraction of the frame
 * (of 1 x 1 when the frame size is unknown, as then nothing can be normalised). */
void encode_dlstreamer(JsonBuilder *b, GstBuffer *buf, const std::vector<KeptBox> &boxes,
                       const DetectionsFrame &frame) {
  json_builder_set_member_name(b, "resolution");
  json_builder_begin_object(b);
  add_int(b, "width", frame.width);
  add_int(b, "height", frame.height);
  json_builder_end_object(b);
  if (!frame.source.empty()) add_string(b, "source", frame.source);
  if (GST_BUFFER_PTS_IS_VALID(buf)) {
    guint64 t = GST_BUFFER_PTS(buf);
    if (frame.segment && frame.segment->format == GST_FORMAT_TIME) {
      const guint64 stream_time =
          gst_segment_to_stream_time(frame.segment, GST_FORMAT_TIME, GST_BUFFER_PTS(buf));
      if (stream_time != GST_CLOCK_TIME_NONE) t = stream_time - frame.segment->time;
    }
    add_int(b, "timestamp", static_cast<gint64>(t));
  }
  const double fw = frame.width > 0 ? frame.width : 1.0;
  const double fh = frame.height > 0 ? frame.height : 1.0;
  json_builder_set_member_name(b, "objects");
  json_builder_begin_array(b);
  for (const KeptBox &box : boxes) {
    json_builder_begin_object(b);
    const double x = box.x1, y = box.y1, w = box.x2 - box.x1, h = box.y2 - box.y1;
    add_int(b, "x", static_cast<gint64>(std::lround(x)));
    add_int(b, "y", static_cast<gint64>(std::lround(y)));
    add_int(b, "w", static_cast<gint64>(std::lround(w)));
    add_int(b, "h", static_cast<gint64>(std::lround(h)));
    if (box.track_id > 0) add_int(b, "id", static_cast<gint64>(box.track_id));
    add_string(b, "roi_type", box.label);
    json_builder_set_member_name(b, "detection");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "bounding_box");
    json_builder_begin_object(b);
    add_double(b, "x_min", x / fw);
    add_double(b, "y_min", y / fh);
    add_double(b, "x_max", (x + w) / fw);
    add_double(b, "y_max", (y + h) / fh);
    json_builder_end_object(b);
    add_double(b, "confidence", box.score);
    add_string(b, "label", box.label);
    if (box.class_id >= 0) add_int(b, "label_id", box.class_id);
    if (box.members > 0) add_int(b, "members", box.members);
    json_builder_end_object(b);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
}

/* One event's members: kind, name, direction (lines), track_id, label. */
/* `id`: the event's number among its camera's events (0: none given). */
void add_event(JsonBuilder *b, const GstCudaNmsCountEvent &e, guint64 id) {
  if (id) add_int(b, "id", static_cast<gint64>(id));
  add_string(b, "kind", gst_cuda_nms_count_event_kind_name(e.kind));
  add_string(b, "name", e.name ? e.name : "");
  if (e.kind == GST_CUDA_NMS_COUNT_LINE_CROSSED)
    add_string(b, "direction", e.direction > 0 ? "in" : "out");
  add_int(b, "track_id", static_cast<gint64>(e.track_id));
  add_string(b, "label", e.label ? e.label : "");
  if (e.kind == GST_CUDA_NMS_COUNT_ZONE_LEFT || e.kind == GST_CUDA_NMS_COUNT_ZONE_LOITERING) {
    json_builder_set_member_name(b, "dwell_s");
    json_builder_add_double_value(b, std::round(e.dwell * 1000) / 1000);
  }
}

/* "events": [...], "counts": {"lines": {NAME: {"in", "out", "labels": {LABEL: {"in", "out"}}}},
 * "zones": {NAME: {LABEL: n}},
 * "loitering": {ZONE: n}}. */
void encode_counts(JsonBuilder *b, const GstCudaNmsCountsMeta *counts, guint64 first_event_id) {
  json_builder_set_member_name(b, "events");
  json_builder_begin_array(b);
  for (guint i = 0; i < counts->n_events; i++) {
    json_builder_begin_object(b);
    add_event(b, counts->events[i], first_event_id ? first_event_id + i : 0);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_set_member_name(b, "counts");
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "lines");
  json_builder_begin_object(b);
  for (guint i = 0; i < counts->n_lines; i++) {
    const GstCudaNmsLineCount &line = counts->lines[i];
    json_builder_set_member_name(b, line.name);
    json_builder_begin_object(b);
    add_int(b, "in", static_cast<gint64>(line.in));
    add_int(b, "out", static_cast<gint64>(line.out));
    json_builder_set_member_name(b, "labels");
    json_builder_begin_object(b);
    for (guint k = 0; k < line.n_labels; k++) {
      json_builder_set_member_name(b, line.labels[k].label);
      json_builder_begin_object(b);
      add_int(b, "in", static_cast<gint64>(line.labels[k].in));
      add_int(b, "out", static_cast<gint64>(line.labels[k].out));
      json_builder_end_object(b);
    }
    json_builder_end_object(b);
    json_builder_end_object(b);
  }
  json_builder_end_object(b);
  json_builder_set_member_name(b, "zones");
  json_builder_begin_object(b);
  for (guint i = 0; i < counts->n_zones; i++) {
    const GstCudaNmsZoneCount &zone = counts->zones[i];
    json_builder_set_member_name(b, zone.name);
    json_builder_begin_object(b);
    for (guint k = 0; k < zone.n_labels; k++)
      add_int(b, zone.labels[k].label, zone.labels[k].occupancy);
    json_builder_end_object(b);
  }
  json_builder_end_object(b);
  json_builder_set_member_name(b, "loitering");
  json_builder_begin_object(b);
  for (guint i = 0; i < counts->n_zones; i++)
    add_int(b, counts->zones[i].name, counts->zones[i].loitering);
  json_builder_end_object(b);
  json_builder_end_object(b);
}

gchar *to_text(JsonGenerator **generator, JsonBuilder *b, gsize *length) {
  JsonNode *root = json_builder_get_root(b);
  if (!*generator) *generator = json_generator_new();
  json_generator_set_root(*generator, root);
  gchar *text = json_generator_to_data(*generator, length);
  json_node_unref(root);
  return text;
}

}  // namespace

gchar *DetectionsStream::encode(GstObject *element, GstBuffer *buf, DetectionsFormat format,
                                const std::string &source, const GstSegment *segment, gsize *length,
                                guint64 first_event_id) {
  const DetectionsFrame frame{frames_++, width_, height_, source, segment};
  GstCudaNmsResultMeta *result = gst_buffer_get_cuda_nms_result_meta(buf);
  const std::vector<KeptBox> boxes = gst_cv_kept_boxes(buf, labels_);
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  if (format == DetectionsFormat::kDlStreamer) {
    encode_dlstreamer(b, buf, boxes, frame);
  } else {
    encode_cudanms(element, b, buf, result, boxes, frame);
  }
  if (const GstCudaNmsCountsMeta *counts = gst_buffer_get_cuda_nms_counts_meta(buf))
    encode_counts(b, counts, first_event_id);
  json_builder_end_object(b);
  gchar *text = to_text(&generator_, b, length);
  g_object_unref(b);
  return text;
}

std::vector<std::string> DetectionsStream::encode_events(GstBuffer *buf, const std::string &source,
                                                         guint64 first_event_id) {
  std::vector<std::string> out;
  const GstCudaNmsCountsMeta *counts = gst_buffer_get_cuda_nms_counts_meta(buf);
  for (guint i = 0; counts && i < counts->n_events; i++) {
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    add_event(b, counts->events[i], first_event_id ? first_event_id + i : 0);
    if (!source.empty()) add_string(b, "source", source);
    /* The frame the last encode() wrote: frames_ counts from 1 there. */
    add_int(b, "frame", static_cast<gint64>(frames_ > 0 ? frames_ - 1 : 0));
    if (GST_BUFFER_PTS_IS_VALID(buf)) add_int(b, "pts", static_cast<gint64>(GST_BUFFER_PTS(buf)));
    json_builder_end_object(b);
    gsize length = 0;
    gchar *text = to_text(&generator_, b, &length);
    out.emplace_back(text, length);
    g_free(text);
    g_object_unref(b);
  }
  return out;
}
