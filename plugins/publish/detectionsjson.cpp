#include "detectionsjson.h"

#include <gst/cudanms/cudanmsmeta.h>
#include <gst/video/video.h>
#include <json-glib/json-glib.h>

#include <cmath>
#include <vector>

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

void DetectionsStream::on_caps(GstCaps *caps) {
  GstVideoInfo info;
  if (gst_video_info_from_caps(&info, caps)) {
    width_ = GST_VIDEO_INFO_WIDTH(&info);
    height_ = GST_VIDEO_INFO_HEIGHT(&info);
  }
}

void DetectionsStream::on_event(GstEvent *event) {
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

struct Box {
  std::string label;
  gint class_id;
  double score, x, y, w, h;
  std::vector<double> points; /* x, y, ...: the result meta's points of the box */
  guint members = 0;          /* the candidates it stands for, where NMS counted them; else 0 */
};

/* The kept boxes of the result meta, or the ROI metas in the order they were added. */
std::vector<Box> boxes_of(GstBuffer *buf, GstCudaNmsResultMeta *result,
                          const std::map<gint, std::string> &labels) {
  std::vector<Box> boxes;
  if (result) {
    for (guint i = 0; i < result->n_kept; i++) {
      const gfloat *b = result->boxes + 4 * static_cast<size_t>(i);
      const gint class_id = result->class_ids[i];
      /* cudanms names every kept box; a result meta from elsewhere may leave labels NULL. */
      const gchar *label = result->labels ? result->labels[i] : nullptr;
      boxes.push_back({label ? std::string(label) : gst_cv_label_lookup(labels, class_id),
                       class_id,
                       result->scores[i],
                       b[0],
                       b[1],
                       b[2] - b[0],
                       b[3] - b[1],
                       {}});
      if (result->points) {
        const size_t per = 2 * static_cast<size_t>(result->points_per_box);
        const gfloat *p = result->points + per * i;
        boxes.back().points.assign(p, p + per);
      }
      if (result->members) boxes.back().members = result->members[i];
    }
    return boxes;
  }
  gpointer state = nullptr;
  GstMeta *meta;
  while ((meta = gst_buffer_iterate_meta_filtered(buf, &state,
                                                  GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE))) {
    auto *roi = reinterpret_cast<GstVideoRegionOfInterestMeta *>(meta);
    const gchar *roi_type = g_quark_to_string(roi->roi_type);
    Box box{roi_type ? roi_type : "", 0, 1.0, double(roi->x), double(roi->y), double(roi->w),
            double(roi->h),           {}};
    if (GstStructure *d = gst_video_region_of_interest_meta_get_param(roi, "detection")) {
      gst_structure_get_double(d, "confidence", &box.score);
      if (gst_structure_get_int(d, "label_id", &box.class_id))
        box.label = gst_cv_label_lookup(labels, box.class_id, roi_type);
      if (const gchar *l = gst_structure_get_string(d, "label")) box.label = l;
      gst_structure_get_uint(d, "members", &box.members);
    }
    boxes.push_back(box);
  }
  return boxes;
}

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
                    GstCudaNmsResultMeta *result, const std::vector<Box> &boxes,
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
  for (const Box &box : boxes) {
    json_builder_begin_object(b);
    add_string(b, "label", box.label);
    add_int(b, "class_id", box.class_id);
    add_double(b, "score", box.score);
    add_double(b, "x", box.x);
    add_double(b, "y", box.y);
    add_double(b, "w", box.w);
    add_double(b, "h", box.h);
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
void encode_dlstreamer(JsonBuilder *b, GstBuffer *buf, const std::vector<Box> &boxes,
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
  for (const Box &box : boxes) {
    json_builder_begin_object(b);
    add_int(b, "x", static_cast<gint64>(std::lround(box.x)));
    add_int(b, "y", static_cast<gint64>(std::lround(box.y)));
    add_int(b, "w", static_cast<gint64>(std::lround(box.w)));
    add_int(b, "h", static_cast<gint64>(std::lround(box.h)));
    add_string(b, "roi_type", box.label);
    json_builder_set_member_name(b, "detection");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "bounding_box");
    json_builder_begin_object(b);
    add_double(b, "x_min", box.x / fw);
    add_double(b, "y_min", box.y / fh);
    add_double(b, "x_max", (box.x + box.w) / fw);
    add_double(b, "y_max", (box.y + box.h) / fh);
    json_builder_end_object(b);
    add_double(b, "confidence", box.score);
    add_string(b, "label", box.label);
    add_int(b, "label_id", box.class_id);
    if (box.members > 0) add_int(b, "members", box.members);
    json_builder_end_object(b);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
}

}  // namespace

gchar *DetectionsStream::encode(GstObject *element, GstBuffer *buf, DetectionsFormat format,
                                const std::string &source, const GstSegment *segment,
                                gsize *length) {
  const DetectionsFrame frame{frames_++, width_, height_, source, segment};
  GstCudaNmsResultMeta *result = gst_buffer_get_cuda_nms_result_meta(buf);
  const std::vector<Box> boxes = boxes_of(buf, result, labels_);
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  if (format == DetectionsFormat::kDlStreamer) {
    encode_dlstreamer(b, buf, boxes, frame);
  } else {
    encode_cudanms(element, b, buf, result, boxes, frame);
  }
  json_builder_end_object(b);
  JsonNode *root = json_builder_get_root(b);
  if (!generator_) generator_ = json_generator_new();
  json_generator_set_root(generator_, root);
  gchar *text = json_generator_to_data(generator_, length);
  json_node_unref(root);
  g_object_unref(b);
  return text;
}
