/**
 * SECTION:element-boxcount
 * @title: boxcount
 *
 * Counts the tracked boxes of each frame (the ids boxtrack gives them) as they cross lines and
 * enter and leave zones, and attaches the frame's events and the running counts as a
 * #GstCudaNmsCountsMeta, which jsonmetawriter and metapublish write ("events", "counts") and
 * boxoverlay draws.
 *
 * lines="NAME:x1,y1,x2,y2;NAME2:..." and zones="NAME:x1,y1 x2,y2 x3,y3 ...;..." are in frame
 * pixels, or in 0..1 of the frame with normalized=true. A track crosses a line "in" when its
 * anchor (anchor=bottom-center, where a person stands; or center, top-center) goes from
 * s < 0 to s > 0, s = (x2-x1)(py-y1) - (y2-y1)(px-x1), through the segment itself; "out" the
 * other way. Against double counts a track changes side only once it is more than hysteresis x
 * its box's height from the line: a track jittering on the line counts once; a crossing counts
 * once the track was seen past the band crossing-frames times (a box jumping over the line as its
 * track ends crosses nothing). A zone is entered
 * and left by the same band; its occupancy is the number of tracks in it, by label. A track not
 * seen for track-timeout frames leaves its zones (set it to boxtrack's track-buffer); zone-left
 * says how long it stayed, and with loitering-time a track that stays that long fires
 * zone-loitering once a stay. classes
 * keeps the count to some labels or class ids ("person,car"; empty: every box).
 *
 * Bad lines or zones are an error when the element starts (with the reason: a degenerate line, a
 * polygon of fewer than 3 points or one that crosses itself, a name given twice ...); set while
 * playing they are a warning and the lines and zones before stay. New lines and zones while
 * playing keep the counts of those of the same name and points. The counts property reads the
 * running counts, and sets them (to carry counts over into a new element, as the camera service
 * does across a camera's reconnection): a structure with one field a line, itself a structure
 * "line" with guint64 fields "in" and "out". Time is the PTS, as boxtrack counts it; a PTS before
 * the previous one forgets the tracks and keeps the counts.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 filesrc location=vtest.avi ! decodebin ! videoconvert ! \
 *     cvdetect model=hog-people ! cudanms iou-threshold=0.3 ! boxtrack ! \
 *     boxcount lines="door:0,300,768,300" zones="hall:0,0 400,0 400,250 0,250" ! \
 *     jsonmetawriter location=counts.jsonl ! boxoverlay ! videoconvert ! autovideosink
 * ]|
 */
#include "gstboxcount.h"

#include <cudanms/count.h>
#include <gst/cudanms/cudanmsmeta.h>
#include <gst/video/video.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <set>

#include "boxcountproperties.h"
#include "countsstructure.h"
#include "elementclass.h"
#include "frameclock.h"
#include "keptboxes.h"
#include "labels.h"

GST_DEBUG_CATEGORY_STATIC(gst_box_count_debug);
#define GST_CAT_DEFAULT gst_box_count_debug

struct GstBoxCountPrivate {
  std::mutex lock; /* guards settings and the counter's counts */
  BoxCountSettings settings;
  cudanms::LabelledCounter counter{settings.params};

  /* Streaming thread (and start) only. */
  FrameClock clock;
  int width = 0, height = 0;
  Geometry geometry; /* as parsed, before scaling */
  bool normalized = DEFAULT_NORMALIZED;
  cudanms::CounterParams params; /* as set; the loitering frames come from the frame clock */
  double loitering_time = DEFAULT_LOITERING_TIME;
  std::set<std::string> classes;
  std::map<gint, std::string> labels; /* announced by detectors */
  bool warned_untracked = false;
  /* Scratch, kept between frames. */
  std::vector<cudanms::CountObservation> seen;
  std::vector<cudanms::CountEvent> events;
  std::vector<gfloat> zone_points;
  std::vector<GstCudaNmsZoneLabel> zone_labels;
  std::vector<GstCudaNmsLineLabel> line_labels;
};

ELEMENT_DEFINE(GstBoxCount, gst_box_count, GstBaseTransform, GST_TYPE_BASE_TRANSFORM, boxcount,
               "Line crossings and zone occupancy of tracks");

static void gst_box_count_install_counts(GObjectClass *klass) {
  PropertyTable<GstBoxCountPrivate>(klass, locked_private<GstBoxCount>)
      .row(
          g_param_spec_boxed(
              "counts", "Counts",
              "The lines' running counts: one field a line, a structure \"line\" "
              "with guint64 fields in and out; set them to carry counts over",
              GST_TYPE_STRUCTURE,
              static_cast<GParamFlags>(G_PARAM_READWRITE | GST_PARAM_MUTABLE_PLAYING |
                                       G_PARAM_STATIC_STRINGS)),
          [](GstBoxCountPrivate &priv, const GValue *value) {
            if (const GstStructure *counts = gst_value_get_structure(value))
              priv.counter.resume(gst_cuda_nms_counts_from_structure(counts));
          },
          [](const GstBoxCountPrivate &priv, GValue *value) {
            g_value_take_boxed(value, gst_cuda_nms_counts_structure(priv.counter.tallies()));
          });
}

/* The counter takes the geometry in pixels (with lock held); lines and zones of the same name
 * and points keep what they had. */
static void apply_geometry(GstBoxCountPrivate *priv) {
  // Normalized shapes wait for the frame's size: placed in a frame of 0 x 0 they would be other
  // lines than the same ones placed in the frame later, and lose the counts they resumed.
  if (priv->normalized && (priv->width <= 0 || priv->height <= 0)) return;
  const Geometry g = in_pixels(priv->geometry, priv->normalized, priv->width, priv->height);
  priv->counter.set_lines(g.lines);
  priv->counter.set_zones(g.zones);
}

/* Takes changed settings in; false (and nothing changes) when lines or zones are bad. */
static bool take_settings(GstBoxCount *self, std::string *error) {
  GstBoxCountPrivate *priv = self->priv;
  std::lock_guard<std::mutex> guard(priv->lock);
  if (!priv->settings.changed) return true;
  const BoxCountSettings s = priv->settings;
  priv->settings.changed = false;
  Geometry g;
  if (!parse_geometry(s, &g, error)) return false;
  priv->geometry = std::move(g);
  priv->normalized = s.normalized;
  priv->params = s.params;
  priv->loitering_time = s.loitering_time;
  priv->classes.clear();
  gchar **names = g_strsplit(s.classes.c_str(), ",", -1);
  for (gchar **n = names; *n; ++n) {
    const std::string name = g_strstrip(*n);
    if (!name.empty()) priv->classes.insert(name);
  }
  g_strfreev(names);
  apply_geometry(priv);
  return true;
}

static gboolean gst_box_count_start(GstBaseTransform *trans) {
  GstBoxCount *self = GST_BOX_COUNT(trans);
  GstBoxCountPrivate *priv = self->priv;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    priv->settings.changed = true;
    priv->counter.forget_tracks();
  }
  std::string error;
  if (!take_settings(self, &error)) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("Invalid %s", error.c_str()), (nullptr));
    return FALSE;
  }
  priv->clock.reset();
  priv->labels.clear();
  priv->warned_untracked = false;
  return TRUE;
}

static gboolean gst_box_count_set_caps(GstBaseTransform *trans, GstCaps *incaps, GstCaps *outcaps) {
  (void)outcaps;
  GstBoxCountPrivate *priv = GST_BOX_COUNT(trans)->priv;
  GstVideoInfo info;
  if (!gst_video_info_from_caps(&info, incaps)) {
    priv->clock.set_rate(0, 1);
    return TRUE;
  }
  priv->clock.set_rate(GST_VIDEO_INFO_FPS_N(&info), GST_VIDEO_INFO_FPS_D(&info));
  priv->width = GST_VIDEO_INFO_WIDTH(&info);
  priv->height = GST_VIDEO_INFO_HEIGHT(&info);
  std::lock_guard<std::mutex> guard(priv->lock);
  if (priv->normalized) apply_geometry(priv);
  return TRUE;
}

static gboolean gst_box_count_sink_event(GstBaseTransform *trans, GstEvent *event) {
  GstBoxCountPrivate *priv = GST_BOX_COUNT(trans)->priv;
  gint class_id;
  std::string label;
  if (gst_cv_label_event_parse(event, &class_id, &label)) priv->labels[class_id] = label;
  if (GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP) {
    std::lock_guard<std::mutex> guard(priv->lock);
    priv->counter.forget_tracks();
    priv->clock.reset();
  }
  return GST_BASE_TRANSFORM_CLASS(gst_box_count_parent_class)->sink_event(trans, event);
}

static bool counted(const GstBoxCountPrivate *priv, const KeptBox &box) {
  if (priv->classes.empty()) return true;
  return priv->classes.count(box.label) > 0 ||
         priv->classes.count(std::to_string(box.class_id)) > 0;
}

static GstCudaNmsCountEventKind event_kind(cudanms::CountEventKind kind) {
  switch (kind) {
    case cudanms::CountEventKind::kLineCrossed:
      break;
    case cudanms::CountEventKind::kZoneEntered:
      return GST_CUDA_NMS_COUNT_ZONE_ENTERED;
    case cudanms::CountEventKind::kZoneLeft:
      return GST_CUDA_NMS_COUNT_ZONE_LEFT;
    case cudanms::CountEventKind::kZoneLoitering:
      return GST_CUDA_NMS_COUNT_ZONE_LOITERING;
  }
  return GST_CUDA_NMS_COUNT_LINE_CROSSED;
}

/* The counter's parameters for this frame: loitering-time in frames of the stream's time. */
static cudanms::CounterParams frame_params(const GstBoxCountPrivate *priv) {
  cudanms::CounterParams params = priv->params;
  const double per_frame = priv->clock.frame_seconds();
  params.loiter_frames =
      priv->loitering_time > 0 && per_frame > 0
          ? std::max<int64_t>(
                1, static_cast<int64_t>(std::ceil(priv->loitering_time / per_frame - 1e-9)))
          : 0;
  return params;
}

/* The frame's counts meta: its events, every line's counts, every zone's occupancy. */
static void attach_counts(GstBoxCountPrivate *priv, GstBuffer *buf) {
  const std::vector<cudanms::CountEvent> &events = priv->events;
  const cudanms::Counter &counter = priv->counter.counter();
  const auto &lines = counter.lines();
  const auto &zones = counter.zones();
  GstCudaNmsCountsMeta *meta = gst_buffer_add_cuda_nms_counts_meta(
      buf, static_cast<guint>(events.size()), static_cast<guint>(lines.size()),
      static_cast<guint>(zones.size()));
  if (!meta) return;
  for (size_t i = 0; i < events.size(); i++) {
    const cudanms::CountEvent &e = events[i];
    const bool line = e.kind == cudanms::CountEventKind::kLineCrossed;
    meta->events[i].kind = event_kind(e.kind);
    meta->events[i].name =
        gst_cv_interned(line ? lines[e.index].name : zones[e.index].name);
    meta->events[i].direction = e.direction;
    meta->events[i].track_id = e.track_id;
    meta->events[i].label = gst_cv_interned(priv->counter.label_of(e.class_id));
    meta->events[i].dwell = static_cast<gdouble>(e.dwell_frames) * priv->clock.frame_seconds();
  }
  for (size_t l = 0; l < lines.size(); l++) {
    const cudanms::LineCounts c = counter.line_counts(l);
    meta->lines[l] = {gst_cv_interned(lines[l].name),
                      static_cast<gfloat>(lines[l].a.x),
                      static_cast<gfloat>(lines[l].a.y),
                      static_cast<gfloat>(lines[l].b.x),
                      static_cast<gfloat>(lines[l].b.y),
                      c.in,
                      c.out,
                      0,
                      nullptr};
    priv->line_labels.clear();
    for (const auto &[label, n] : priv->counter.by_label(l))
      priv->line_labels.push_back({gst_cv_interned(label), n.in, n.out});
    gst_cuda_nms_counts_meta_set_line_labels(meta, static_cast<guint>(l), priv->line_labels.data(),
                                             static_cast<guint>(priv->line_labels.size()));
  }
  for (size_t z = 0; z < zones.size(); z++) {
    std::vector<gfloat> &points = priv->zone_points;
    points.clear();
    for (const auto &p : zones[z].polygon) {
      points.push_back(static_cast<gfloat>(p.x));
      points.push_back(static_cast<gfloat>(p.y));
    }
    std::vector<GstCudaNmsZoneLabel> &labels = priv->zone_labels;
    labels.clear();
    for (const auto &[code, n] : counter.occupancy(z))
      labels.push_back(
          {gst_cv_interned(priv->counter.label_of(code)), static_cast<guint>(n)});
    gst_cuda_nms_counts_meta_set_zone(meta, static_cast<guint>(z), zones[z].name.c_str(),
                                      points.data(), static_cast<guint>(zones[z].polygon.size()),
                                      labels.data(), static_cast<guint>(labels.size()));
    meta->zones[z].loitering = static_cast<guint>(counter.loitering(z));
  }
}

static GstFlowReturn gst_box_count_transform_ip(GstBaseTransform *trans, GstBuffer *buf) {
  GstBoxCount *self = GST_BOX_COUNT(trans);
  GstBoxCountPrivate *priv = self->priv;
  std::string error;
  if (!take_settings(self, &error))
    GST_ELEMENT_WARNING(self, RESOURCE, SETTINGS, ("Invalid %s", error.c_str()),
                        ("the lines and zones before stay"));
  priv->seen.clear();
  bool any_box = false;
  for (const KeptBox &box : gst_cv_kept_boxes(buf, priv->labels)) {
    any_box = true;
    if (box.track_id == 0 || !counted(priv, box)) continue;
    priv->seen.push_back(
        {box.track_id, box.x1, box.y1, box.x2, box.y2, priv->counter.class_of(box.label)});
  }
  const GstCudaNmsResultMeta *result = gst_buffer_get_cuda_nms_result_meta(buf);
  if (any_box && result && !result->track_ids && !priv->warned_untracked) {
    GST_ELEMENT_WARNING(self, STREAM, FAILED, ("The boxes have no track ids"),
                        ("put boxtrack before boxcount: untracked boxes are not counted"));
    priv->warned_untracked = true;
  }
  const int64_t frame = priv->clock.frame_of(GST_BUFFER_PTS(buf));
  priv->events.clear();
  std::lock_guard<std::mutex> guard(priv->lock);
  priv->counter.set_params(frame_params(priv));
  priv->counter.update(frame, priv->seen, &priv->events);
  attach_counts(priv, buf);
  return GST_FLOW_OK;
}

static void gst_box_count_class_init(GstBoxCountClass *klass) {
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  own_private<GstBoxCount>(klass);
  gst_box_count_install_properties(gobject_class,
                                   locked_member<GstBoxCount, &GstBoxCountPrivate::settings>);
  gst_box_count_install_counts(gobject_class);

  describe_element(
      klass, "Box counter", "Filter/Analyzer/Video",
      "Counts tracked boxes crossing lines and occupying zones; attaches each frame's events and "
      "running counts as metadata",
      "video/x-raw(ANY)");

  ELEMENT_VFUNCS(GST_BASE_TRANSFORM_CLASS(klass), gst_box_count, start, set_caps, sink_event,
                 transform_ip);
}
