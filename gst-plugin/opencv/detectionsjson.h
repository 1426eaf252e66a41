/* One JSON object per frame from its detection metadata, shared by jsonmetawriter and
 * metapublish. Two formats:
 *   cudanms     the project's own: frame, pts, width, height, candidates, kept, backend,
 *               nms_latency_us, boxes[{label, class_id, score, x, y, w, h}] (+ source)
 *   dlstreamer  DL Streamer gvametaconvert's (dlstreamer/dlstreamer
 *               gst/elements/gvametaconvert/jsonconverter.cpp, get_frame_data and
 *               convert_roi_detection): resolution{width, height}, source, timestamp (ns of
 *               stream time), objects[{x, y, w, h, roi_type, detection{bounding_box{x_min,
 *               y_min, x_max, y_max} (0..1 of the frame), confidence, label, label_id}}]
 * The boxes come from the frame's GstCudaNmsResultMeta, else from its ROI metas. */
#pragma once

#include <gst/gst.h>

#include <map>
#include <string>

enum class DetectionsFormat { kCudanms, kDlStreamer };

#define GST_TYPE_DETECTIONS_FORMAT (gst_detections_format_get_type())
GType gst_detections_format_get_type(void);

/* What the encoder needs besides the buffer. */
struct DetectionsFrame {
  guint64 frame = 0; /* index in the stream */
  int width = 0;     /* 0 when unknown */
  int height = 0;
  const std::map<gint, std::string> *labels = nullptr; /* announced by detectors */
  std::string source;                                  /* camera id; "" leaves it out */
  const GstSegment *segment = nullptr;                 /* for the stream time; may be null */
};

/* What an element tracks of its stream for the encoder: the frame count, the frame size from the
 * caps, the labels detectors announce in events. */
struct DetectionsStream {
  guint64 frames = 0;
  int width = 0;
  int height = 0;
  std::map<gint, std::string> labels;

  void reset() { *this = DetectionsStream(); }
  void on_caps(GstCaps *caps);
  void on_event(GstEvent *event);
  /* The next frame's context; counts it. */
  DetectionsFrame next_frame(const std::string &source = "", const GstSegment *segment = nullptr);
};

/* The frame's JSON object, one line without the newline: g_free it. `element` logs. */
gchar *gst_detections_json_encode(GstObject *element, GstBuffer *buf, const DetectionsFrame &frame,
                                  DetectionsFormat format, gsize *length);
