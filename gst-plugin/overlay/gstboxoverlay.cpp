/**
 * SECTION:element-boxoverlay
 * @title: boxoverlay
 *
 * Draws every #GstVideoRegionOfInterestMeta of a frame (the boxes cudanms kept, or any other
 * detector's) as a rectangle line-width pixels thick, drawn inside the box, in the color of its
 * class, with a "label score" tag above it. The label is the "detection" structure's "label"
 * field, else the name a detector announced for its class id (cvdetect does), else the ROI type;
 * the score is the structure's "confidence", followed by "x N" where its "members" says how many
 * windows the box stands for (cudanms method=group, or min-neighbors). The points cudanms's result
 * meta carries for the kept boxes (e.g. blazeface's facial keypoints) are drawn as small squares in
 * the box's color.
 *
 * A box that boxtrack tracks (its ROI meta's "object_id") is drawn in its track's color with
 * "#ID" first in its tag, and a trail through its centre on its last trail-length frames (the
 * centre: a detector's boxes change size from frame to frame less at their middle than at their
 * feet). Tags never cover one another: a tag that would goes inside the box's top, below it, or
 * further up or down. The lines and zones boxcount counts (its #GstCudaNmsCountsMeta) are drawn
 * with their counts: a line with an arrow to its "in" side and "NAME in N out M", a zone's
 * outline with "NAME", its occupancy by label and the tracks loitering in it (draw-counts).
 *
 * With highlight-events=true a frame with counting events (boxcount's) shows whom they happened
 * to: the boxes of the events' tracks drawn as always, every other box one pixel thick in a light
 * tint, without its tag or trail (an event's picture, e.g. the camera service's snapshots).
 *
 * With draw-candidates=true the frame's #GstCudaNmsCandidatesMeta windows are drawn first, one
 * pixel thick in a light tint of their class color: the detector's raw output and what NMS kept,
 * in one picture. cudanms removes the candidates unless its keep-candidates property is true.
 *
 * Packed RGB formats are drawn exactly; on YUV 4:2:0 formats the luma is exact and the chroma
 * covers every 2x2 block a drawn pixel touches.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 ... ! cvdetect ! cudanms keep-candidates=true ! \
 *     boxoverlay draw-candidates=true line-width=3 ! videoconvert ! autovideosink
 * ]|
 */
#include "gstboxoverlay.h"

#include <gst/cudanms/cudanmsmeta.h>
#include <gst/video/video.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <string>

#include "canvas.h"
#include "elementclass.h"
#include "keptboxes.h"
#include "labels.h"
#include "propertytable.h"
#include "tagplacer.h"
#include "trails.h"

GST_DEBUG_CATEGORY_STATIC(gst_box_overlay_debug);
#define GST_CAT_DEFAULT gst_box_overlay_debug

#define DEFAULT_LINE_WIDTH 3
#define DEFAULT_FONT_SCALE 0.5
#define DEFAULT_DRAW_LABELS TRUE
#define DEFAULT_DRAW_CANDIDATES FALSE
#define DEFAULT_TRAIL_LENGTH 30
#define DEFAULT_DRAW_COUNTS TRUE
#define DEFAULT_HIGHLIGHT_EVENTS FALSE
#define MAX_TRAIL_LENGTH 1000

#define VIDEO_FORMATS "{ BGRx, RGBx, BGRA, RGBA, BGR, RGB, I420, YV12, NV12, NV21 }"

namespace {

struct Settings {
  guint line_width = DEFAULT_LINE_WIDTH;
  double font_scale = DEFAULT_FONT_SCALE;
  bool draw_labels = DEFAULT_DRAW_LABELS;
  bool draw_candidates = DEFAULT_DRAW_CANDIDATES;
  guint trail_length = DEFAULT_TRAIL_LENGTH;
  bool draw_counts = DEFAULT_DRAW_COUNTS;
  bool highlight_events = DEFAULT_HIGHLIGHT_EVENTS;
};

/* highlight-events: the tracks the frame's counting events happened to; empty: none (every box
 * drawn as always). */
std::vector<guint64> event_tracks(GstBuffer *buf) {
  std::vector<guint64> tracks;
  if (const GstCudaNmsCountsMeta *counts = gst_buffer_get_cuda_nms_counts_meta(buf))
    for (guint i = 0; i < counts->n_events; i++) tracks.push_back(counts->events[i].track_id);
  return tracks;
}

/* Lines and zones: their color, and the arrow's length to a line's "in" side. */
const Rgb kCountColor = {255, 220, 0};
constexpr int kArrowLength = 24;

}  // namespace

struct GstBoxOverlayPrivate {
  std::mutex lock; /* guards settings */
  Settings settings;

  /* Streaming thread only. */
  std::map<gint, std::string> labels; /* announced by detectors upstream */
  bool warned_no_candidates = false;
  Trails trails;
};

ELEMENT_DEFINE(GstBoxOverlay, gst_box_overlay, GstVideoFilter, GST_TYPE_VIDEO_FILTER, boxoverlay,
               "Draws detection boxes");

static gboolean gst_box_overlay_start(GstBaseTransform *trans) {
  GstBoxOverlay *self = GST_BOX_OVERLAY(trans);
  self->priv->labels.clear();
  self->priv->warned_no_candidates = false;
  self->priv->trails.clear();
  return TRUE;
}

static gboolean gst_box_overlay_sink_event(GstBaseTransform *trans, GstEvent *event) {
  GstBoxOverlay *self = GST_BOX_OVERLAY(trans);
  gint class_id;
  std::string label;
  if (gst_cv_label_event_parse(event, &class_id, &label)) {
    GST_DEBUG_OBJECT(self, "class %d is '%s'", class_id, label.c_str());
    self->priv->labels[class_id] = label;
  }
  return GST_BASE_TRANSFORM_CLASS(gst_box_overlay_parent_class)->sink_event(trans, event);
}

static void draw_candidates(GstBoxOverlay *self, Canvas &canvas, GstBuffer *buf) {
  GstBoxOverlayPrivate *priv = self->priv;
  gpointer state = nullptr;
  GstMeta *meta;
  bool any = false;
  while ((meta = gst_buffer_iterate_meta_filtered(buf, &state,
                                                  GST_CUDA_NMS_CANDIDATES_META_API_TYPE))) {
    any = true;
    auto *c = reinterpret_cast<GstCudaNmsCandidatesMeta *>(meta);
    if (!gst_cuda_nms_candidates_meta_map(c, nullptr)) {  // device candidates: downloaded once
      GST_WARNING_OBJECT(self, "could not download the device candidates to draw them");
      continue;
    }
    for (guint i = 0; i < c->n; i++)
      draw_outline(canvas, pixel_rect(c->boxes + 4 * static_cast<size_t>(i)), 1,
                   light(class_color(c->class_ids[i])));
  }
  if (!any && !priv->warned_no_candidates && gst_buffer_get_cuda_nms_result_meta(buf)) {
    GST_ELEMENT_WARNING(self, STREAM, FAILED, ("draw-candidates=true but no candidates to draw"),
                        ("The frames carry a cudanms result but no candidates meta: set "
                         "keep-candidates=true on cudanms"));
    priv->warned_no_candidates = true;
  }
}

/* The kept boxes' points (a face's landmarks) from the cudanms result meta: a small square each,
 * in the box's colour; NaN points (none known) are skipped. */
static void draw_points(Canvas &canvas, GstBuffer *buf, int line_width) {
  const GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(buf);
  if (!r || !r->points) return;
  const int side = 2 * line_width + 1;
  for (guint k = 0; k < r->n_kept; k++) {
    const Rgb color = class_color(r->class_ids[k]);
    for (guint j = 0; j < r->points_per_box; j++) {
      const float *p = r->points + 2 * (static_cast<size_t>(k) * r->points_per_box + j);
      if (!std::isfinite(p[0]) || !std::isfinite(p[1])) continue;
      const float at[4] = {p[0], p[1], p[0], p[1]};
      const cv::Rect pixel = pixel_rect(at);  // its top-left corner is the point's pixel
      canvas.fill(cv::Rect(pixel.x - line_width, pixel.y - line_width, side, side), color);
    }
  }
}

/* boxcount's lines, each with an arrow to its "in" side, and zones, with their counts as tags. */
static void draw_counts(Canvas &canvas, GstBuffer *buf, const Settings &s, TagPlacer *tags) {
  const GstCudaNmsCountsMeta *counts = gst_buffer_get_cuda_nms_counts_meta(buf);
  if (!counts) return;
  const int thickness = static_cast<int>(s.line_width);
  for (guint i = 0; i < counts->n_lines; i++) {
    const GstCudaNmsLineCount &l = counts->lines[i];
    const cv::Point a(cvRound(l.x1), cvRound(l.y1)), b(cvRound(l.x2), cvRound(l.y2));
    draw_polyline(canvas, {a, b}, false, thickness, kCountColor);
    /* "in" is where s = (b - a) x (p - a) > 0: along (-(by - ay), bx - ax). */
    const double dx = l.x2 - l.x1, dy = l.y2 - l.y1, length = std::hypot(dx, dy);
    const cv::Point middle((a + b) / 2);
    if (length > 0)
      draw_arrow(canvas, middle,
                 middle + cv::Point(cvRound(-dy / length * kArrowLength),
                                    cvRound(dx / length * kArrowLength)),
                 std::max(1, thickness - 1), kCountColor);
    const std::string text =
        std::string(l.name) + " in " + std::to_string(l.in) + " out " + std::to_string(l.out);
    const cv::Size size = tag_size(text, s.font_scale);
    draw_tag(canvas, tags->place(cv::Rect(middle, cv::Size(1, 1)), size), text, s.font_scale,
             kCountColor);
  }
  for (guint i = 0; i < counts->n_zones; i++) {
    const GstCudaNmsZoneCount &z = counts->zones[i];
    std::vector<cv::Point> polygon;
    for (guint k = 0; k < z.n_points; k++)
      polygon.emplace_back(cvRound(z.points[2 * k]), cvRound(z.points[2 * k + 1]));
    draw_polyline(canvas, polygon, true, thickness, kCountColor);
    std::string text = z.name;
    for (guint k = 0; k < z.n_labels; k++)
      text += std::string(k ? ", " : " ") + z.labels[k].label + " " +
              std::to_string(z.labels[k].occupancy);
    if (z.loitering) text += ", " + std::to_string(z.loitering) + " loitering";
    if (polygon.empty()) continue;
    const cv::Rect bounds = cv::boundingRect(polygon);
    draw_tag(canvas,
             tags->place(cv::Rect(bounds.tl(), cv::Size(1, 1)), tag_size(text, s.font_scale)), text,
             s.font_scale, kCountColor);
  }
}

static GstFlowReturn gst_box_overlay_transform_frame_ip(GstVideoFilter *filter,
                                                        GstVideoFrame *frame) {
  GstBoxOverlay *self = GST_BOX_OVERLAY(filter);
  GstBoxOverlayPrivate *priv = self->priv;
  Settings s;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    s = priv->settings;
  }
  Canvas canvas(frame);
  if (s.draw_candidates) draw_candidates(self, canvas, frame->buffer);
  priv->trails.next_frame(s.trail_length);

  struct Tag {
    cv::Rect box;
    std::string text;
    Rgb color;
  };
  std::vector<Tag> tags;
  const std::vector<guint64> highlighted =
      s.highlight_events ? event_tracks(frame->buffer) : std::vector<guint64>();
  gpointer state = nullptr;
  GstMeta *meta;
  while ((meta = gst_buffer_iterate_meta_filtered(frame->buffer, &state,
                                                  GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE))) {
    auto *roi = reinterpret_cast<GstVideoRegionOfInterestMeta *>(meta);
    const cv::Rect box(static_cast<int>(roi->x), static_cast<int>(roi->y), static_cast<int>(roi->w),
                       static_cast<int>(roi->h));
    const gchar *roi_type = g_quark_to_string(roi->roi_type);
    gint class_id = static_cast<gint>(g_str_hash(roi_type ? roi_type : ""));
    std::string text = roi_type ? roi_type : "";
    GstStructure *detection = gst_video_region_of_interest_meta_get_param(roi, "detection");
    if (detection) {
      const gchar *label = gst_structure_get_string(detection, "label");
      const bool has_id = gst_cv_detection_label_id(detection, &class_id);
      if (label) {
        text = label;
      } else if (has_id) {
        text = gst_cv_label_lookup(priv->labels, class_id, roi_type);
      }
      gdouble confidence;
      if (gst_structure_get_double(detection, "confidence", &confidence)) {
        gchar score[32];
        g_snprintf(score, sizeof(score), " %.2f", confidence);
        text += score;
      }
      guint members;  // the windows a grouped box stands for
      if (gst_structure_get_uint(detection, "members", &members))
        text += " x" + std::to_string(members);
    }
    const guint64 track = gst_cv_roi_track_id(roi);
    const Rgb color = track ? track_color(track) : class_color(class_id);
    if (!highlighted.empty() &&
        std::find(highlighted.begin(), highlighted.end(), track) == highlighted.end()) {
      draw_outline(canvas, box, 1, light(color));  // faint: not whom the event is about
      continue;
    }
    if (track) {
      text = "#" + std::to_string(track) + " " + text;
      if (s.trail_length > 0) {
        priv->trails.add(track, cv::Point(box.x + box.width / 2, box.y + box.height / 2),
                         s.trail_length);
        draw_polyline(canvas, *priv->trails.points(track), false,
                      std::max(1, static_cast<int>(s.line_width) - 1), color);
      }
    }
    draw_outline(canvas, box, static_cast<int>(s.line_width), color);
    if (s.draw_labels && !text.empty()) tags.push_back({box, text, color});
  }
  draw_points(canvas, frame->buffer, static_cast<int>(s.line_width));
  /* Tags last, so that no box is drawn over one, and placed so that none covers another. */
  TagPlacer placer(cv::Size(canvas.width(), canvas.height()));
  if (s.draw_counts) draw_counts(canvas, frame->buffer, s, &placer);
  for (const Tag &tag : tags)
    draw_tag(canvas, placer.place(tag.box, tag_size(tag.text, s.font_scale)), tag.text,
             s.font_scale, tag.color);
  return GST_FLOW_OK;
}

static void gst_box_overlay_class_init(GstBoxOverlayClass *klass) {
  const GParamFlags rw = static_cast<GParamFlags>(G_PARAM_READWRITE | GST_PARAM_MUTABLE_PLAYING |
                                                  G_PARAM_STATIC_STRINGS);

  own_private<GstBoxOverlay>(klass);
  PropertyTable<Settings>(G_OBJECT_CLASS(klass),
                          locked_member<GstBoxOverlay, &GstBoxOverlayPrivate::settings>)
      .field(g_param_spec_uint("line-width", "Line width",
                               "Thickness of a kept box's outline in pixels, drawn inside the box",
                               1, 64, DEFAULT_LINE_WIDTH, rw),
             &Settings::line_width)
      .field(g_param_spec_double("font-scale", "Font scale",
                                 "Size of the label text (OpenCV Hershey font scale)", 0.1, 10.0,
                                 DEFAULT_FONT_SCALE, rw),
             &Settings::font_scale)
      .field(g_param_spec_boolean("draw-labels", "Draw labels",
                                  "Tag each kept box with 'label score'", DEFAULT_DRAW_LABELS, rw),
             &Settings::draw_labels)
      .field(g_param_spec_boolean("draw-candidates", "Draw candidates",
                                  "Also draw the candidates meta as thin light boxes (needs "
                                  "keep-candidates=true on cudanms)",
                                  DEFAULT_DRAW_CANDIDATES, rw),
             &Settings::draw_candidates)
      .field(g_param_spec_uint("trail-length", "Trail length",
                               "Frames of a tracked box's path drawn behind it (boxtrack's ids), "
                               "0 for none",
                               0, MAX_TRAIL_LENGTH, DEFAULT_TRAIL_LENGTH, rw),
             &Settings::trail_length)
      .field(g_param_spec_boolean("draw-counts", "Draw counts",
                                  "Draw boxcount's lines and zones with their counts",
                                  DEFAULT_DRAW_COUNTS, rw),
             &Settings::draw_counts)
      .field(g_param_spec_boolean("highlight-events", "Highlight events",
                                  "On a frame with counting events, draw the boxes of the events' "
                                  "tracks as always and every other box faint (thin, light, no "
                                  "tag or trail)",
                                  DEFAULT_HIGHLIGHT_EVENTS, rw),
             &Settings::highlight_events);

  describe_element(
      klass, "Detection box overlay", "Filter/Effect/Video",
      "Draws region-of-interest boxes with label and score, and optionally the raw candidate "
      "windows of cudanms candidates metadata",
      GST_VIDEO_CAPS_MAKE(VIDEO_FORMATS));

  ELEMENT_VFUNCS(GST_BASE_TRANSFORM_CLASS(klass), gst_box_overlay, start, sink_event);
  ELEMENT_VFUNCS(GST_VIDEO_FILTER_CLASS(klass), gst_box_overlay, transform_frame_ip);
}
