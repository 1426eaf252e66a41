/* One JSON object per frame from its detection metadata, shared by jsonmetawriter and
 * metapublish. Two formats:
 *   cudanms     the project's own: frame, pts, width, height, candidates, kept, backend,
 *               nms_latency_us, boxes[{label, class_id, score, x, y, w, h, points[[x, y]]
 *               (only with points, e.g. facial keypoints)}] (+ source)
 *   dlstreamer  DL Streamer gvametaconvert's (dlstreamer/dlstreamer
 *               gst/elements/gvametaconvert/jsonconverter.cpp, get_frame_data and
 *               convert_roi_detection): resolution{width, height}, source, timestamp (ns of
 *               stream time), objects[{x, y, w, h, roi_type, detection{bounding_box{x_min,
 *               y_min, x_max, y_max} (0..1 of the frame), confidence, label, label_id}}]
 * The boxes come from the frame's GstCudaNmsResultMeta, else from its ROI metas; a box's track
 * id (boxtrack) is "track_id" (cudanms) or "id" (dlstreamer, as gvametaconvert writes it), absent
 * for a box of no track. With a GstCudaNmsCountsMeta (boxcount) both formats add
 *   events      [{id (when the caller numbers its events), kind: line-crossed |
 *               zone-entered | zone-left | zone-loitering, name, direction: in | out (lines),
 *               track_id, label, dwell_s (zone-left, zone-loitering: seconds in the zone)}]
 *   counts      {lines: {NAME: {in, out, labels: {LABEL: {in, out}}}},
 *               zones: {NAME: {LABEL: occupancy}},
 *               loitering: {ZONE: tracks loitering in it now}} */
#pragma once

#include <gst/gst.h>
#include <json-glib/json-glib.h>

#include <map>
#include <string>
#include <vector>

enum class DetectionsFormat { kCudanms, kDlStreamer };

#define GST_TYPE_DETECTIONS_FORMAT (gst_detections_format_get_type())
GType gst_detections_format_get_type(void);

/* An element's encoder: what it tracks of its stream (the frame count, the frame size from the
 * caps, the labels detectors announce in events) and one JSON generator for all its frames. */
class DetectionsStream {
 public:
  DetectionsStream() = default;
  ~DetectionsStream();
  DetectionsStream(const DetectionsStream &) = delete;
  DetectionsStream &operator=(const DetectionsStream &) = delete;

  void reset(); /* a new stream: frames count from 0, size and labels unknown */
  /* Each event of the stream before its frames: the caps give the frame size, a detector's
   * label events the labels; the others say nothing to it. */
  void on_event(GstEvent *event);
  /* The next frame's JSON object, one line without the newline: g_free it. `source` names the
   * camera ("" leaves it out); `segment` (may be null) gives the stream time; `element` logs.
   * `first_event_id`: the frame's events are numbered from it (0: no ids). */
  gchar *encode(GstObject *element, GstBuffer *buf, DetectionsFormat format,
                const std::string &source, const GstSegment *segment, gsize *length,
                guint64 first_event_id = 0);
  /* The frame's counting events (its GstCudaNmsCountsMeta), one JSON object each, for consumers
   * that want events alone (metapublish's events topic): kind, name, direction, track_id,
   * label, source, frame (as the last encode() numbered it) and pts; numbered from
   * `first_event_id` as encode() numbers them (0: no ids). */
  std::vector<std::string> encode_events(GstBuffer *buf, const std::string &source,
                                         guint64 first_event_id = 0);

 private:
  guint64 frames_ = 0;
  int width_ = 0; /* 0 when unknown */
  int height_ = 0;
  std::map<gint, std::string> labels_;
  JsonGenerator *generator_ = nullptr;
};
