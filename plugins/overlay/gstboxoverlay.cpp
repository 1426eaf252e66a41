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

#include "labels.h"

GST_DEBUG_CATEGORY_STATIC(gst_box_overlay_debug);
#define GST_CAT_DEFAULT gst_box_overlay_debug

enum {
  PROP_0,
  PROP_LINE_WIDTH,
  PROP_FONT_SCALE,
  PROP_DRAW_LABELS,
  PROP_DRAW_CANDIDATES,
};

#define DEFAULT_LINE_WIDTH 3
#define DEFAULT_FONT_SCALE 0.5
#define DEFAULT_DRAW_LABELS TRUE
#define DEFAULT_DRAW_CANDIDATES FALSE

#define VIDEO_FORMATS "{ BGRx, RGBx, BGRA, RGBA, BGR, RGB, I420, YV12, NV12, NV21 }"

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE(
    "sink", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS(GST_VIDEO_CAPS_MAKE(VIDEO_FORMATS)));
static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE(
    "src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS(GST_VIDEO_CAPS_MAKE(VIDEO_FORMATS)));

namespace {

struct Settings {
  guint line_width = DEFAULT_LINE_WIDTH;
  double font_scale = DEFAULT_FONT_SCALE;
  bool draw_labels = DEFAULT_DRAW_LABELS;
  bool draw_candidates = DEFAULT_DRAW_CANDIDATES;
};

struct Rgb {
  int r, g, b;
};

/* Class colors, by class id modulo the size. */
const Rgb kPalette[] = {{0, 230, 0},   {255, 48, 48}, {40, 120, 255}, {255, 210, 0},
                        {230, 0, 230}, {0, 220, 220}, {255, 128, 0},  {150, 60, 255}};

Rgb class_color(gint class_id) {
  const int n = G_N_ELEMENTS(kPalette);
  return kPalette[((class_id % n) + n) % n];
}

/* A light tint: two thirds of the way to white. */
Rgb light(Rgb c) { return {(c.r + 2 * 255) / 3, (c.g + 2 * 255) / 3, (c.b + 2 * 255) / 3}; }

/* Black or white, whichever reads better on c. */
Rgb text_color_on(Rgb c) {
  return 0.299 * c.r + 0.587 * c.g + 0.114 * c.b > 140 ? Rgb{0, 0, 0} : Rgb{255, 255, 255};
}

/* Where a frame's pixels are and how a color is written into them. */
class Canvas {
 public:
  explicit Canvas(GstVideoFrame *frame) : frame_(frame) {
    const GstVideoFormatInfo *finfo = frame->info.finfo;
    width_ = GST_VIDEO_FRAME_WIDTH(frame);
    height_ = GST_VIDEO_FRAME_HEIGHT(frame);
    yuv_ = GST_VIDEO_FORMAT_INFO_IS_YUV(finfo);
    if (!yuv_) {
      channels_ = GST_VIDEO_FRAME_COMP_PSTRIDE(frame, 0);
      packed_ = plane(0, width_, height_, channels_);
    }
  }

  int width() const { return width_; }
  int height() const { return height_; }

  /* Fills r (clipped to the frame) with c. */
  void fill(cv::Rect r, Rgb c) {
    r &= cv::Rect(0, 0, width_, height_);
    if (r.empty()) return;
    if (!yuv_) {
      packed_(r).setTo(packed_value(c));
      return;
    }
    plane(0, width_, height_, 1)(r).setTo(cv::Scalar(luma(c)));
    const cv::Rect cr = chroma_rect(r);
    fill_chroma(cr, c, cv::noArray());
  }

  /* Sets the pixels where mask (CV_8UC1, placed at origin) is non-zero to c. */
  void fill_mask(cv::Point origin, const cv::Mat &mask, Rgb c) {
    const cv::Rect r = cv::Rect(origin, mask.size()) & cv::Rect(0, 0, width_, height_);
    if (r.empty()) return;
    const cv::Mat m = mask(cv::Rect(r.tl() - origin, r.size()));
    if (!yuv_) {
      packed_(r).setTo(packed_value(c), m);
      return;
    }
    plane(0, width_, height_, 1)(r).setTo(cv::Scalar(luma(c)), m);
    /* The chroma of every 2x2 block with a pixel set. */
    const cv::Rect cr = chroma_rect(r);
    cv::Mat block = cv::Mat::zeros(cr.height * 2, cr.width * 2, CV_8UC1);
    m.copyTo(block(cv::Rect(r.x - cr.x * 2, r.y - cr.y * 2, r.width, r.height)));
    cv::Mat small;
    cv::resize(block, small, cr.size(), 0, 0, cv::INTER_AREA);
    fill_chroma(cr, c, small > 0);
  }

 private:
  cv::Mat plane(int p, int w, int h, int channels) const {
    return cv::Mat(h, w, CV_8UC(channels), GST_VIDEO_FRAME_PLANE_DATA(frame_, p),
                   GST_VIDEO_FRAME_PLANE_STRIDE(frame_, p));
  }

  cv::Scalar packed_value(Rgb c) const {
    cv::Scalar v = cv::Scalar::all(255); /* alpha and padding bytes */
    const int offsets[3] = {static_cast<int>(GST_VIDEO_FRAME_COMP_POFFSET(frame_, 0)),
                            static_cast<int>(GST_VIDEO_FRAME_COMP_POFFSET(frame_, 1)),
                            static_cast<int>(GST_VIDEO_FRAME_COMP_POFFSET(frame_, 2))};
    v[offsets[0]] = c.r;
    v[offsets[1]] = c.g;
    v[offsets[2]] = c.b;
    return v;
  }

  /* BT.601, limited range. */
  static int luma(Rgb c) { return cvRound(16 + 0.257 * c.r + 0.504 * c.g + 0.098 * c.b); }
  static int cb(Rgb c) { return cvRound(128 - 0.148 * c.r - 0.291 * c.g + 0.439 * c.b); }
  static int cr(Rgb c) { return cvRound(128 + 0.439 * c.r - 0.368 * c.g - 0.071 * c.b); }

  cv::Rect chroma_rect(const cv::Rect &r) const {
    const int cw = (width_ + 1) / 2, ch = (height_ + 1) / 2;
    const int x0 = r.x / 2, y0 = r.y / 2;
    const int x1 = std::min(cw, (r.x + r.width + 1) / 2),
              y1 = std::min(ch, (r.y + r.height + 1) / 2);
    return cv::Rect(x0, y0, x1 - x0, y1 - y0);
  }

  void fill_chroma(const cv::Rect &cr_rect, Rgb c, cv::InputArray mask) {
    const int cw = (width_ + 1) / 2, ch = (height_ + 1) / 2;
    const int u = cb(c), v = cr(c);
    switch (GST_VIDEO_FRAME_FORMAT(frame_)) {
      case GST_VIDEO_FORMAT_I420:
        plane(1, cw, ch, 1)(cr_rect).setTo(cv::Scalar(u), mask);
        plane(2, cw, ch, 1)(cr_rect).setTo(cv::Scalar(v), mask);
        break;
      case GST_VIDEO_FORMAT_YV12:
        plane(1, cw, ch, 1)(cr_rect).setTo(cv::Scalar(v), mask);
        plane(2, cw, ch, 1)(cr_rect).setTo(cv::Scalar(u), mask);
        break;
      case GST_VIDEO_FORMAT_NV12:
        plane(1, cw, ch, 2)(cr_rect).setTo(cv::Scalar(u, v), mask);
        break;
      case GST_VIDEO_FORMAT_NV21:
        plane(1, cw, ch, 2)(cr_rect).setTo(cv::Scalar(v, u), mask);
        break;
      default:
        break;
    }
  }

  GstVideoFrame *frame_;
  int width_ = 0, height_ = 0;
  bool yuv_ = false;
  int channels_ = 0;
  cv::Mat packed_;
};

/* The outline of box, width pixels thick, inside the box. */
void draw_outline(Canvas &canvas, const cv::Rect &box, int width, Rgb c) {
  if (box.width <= 0 || box.height <= 0) return;
  const int tw = std::min(width, box.width), th = std::min(width, box.height);
  canvas.fill(cv::Rect(box.x, box.y, box.width, th), c);
  canvas.fill(cv::Rect(box.x, box.y + box.height - th, box.width, th), c);
  canvas.fill(cv::Rect(box.x, box.y, tw, box.height), c);
  canvas.fill(cv::Rect(box.x + box.width - tw, box.y, tw, box.height), c);
}

/* A filled tag with the text, just above the box (inside it at the frame's top edge). */
void draw_tag(Canvas &canvas, const cv::Rect &box, const std::string &text, double font_scale,
              Rgb c) {
  const int font = cv::FONT_HERSHEY_SIMPLEX;
  const int thickness = std::max(1, cvRound(font_scale * 2));
  int baseline = 0;
  const cv::Size size = cv::getTextSize(text, font, font_scale, thickness, &baseline);
  const int pad = 2;
  cv::Rect tag(box.x, box.y - size.height - baseline - 2 * pad, size.width + 2 * pad,
               size.height + baseline + 2 * pad);
  if (tag.y < 0) tag.y = std::max(0, box.y);
  canvas.fill(tag, c);
  cv::Mat mask = cv::Mat::zeros(tag.size(), CV_8UC1);
  cv::putText(mask, text, cv::Point(pad, pad + size.height), font, font_scale, cv::Scalar(255),
              thickness, cv::LINE_8);
  canvas.fill_mask(tag.tl(), mask, text_color_on(c));
}

/* The pixels of a box; empty for NaN/inf. Candidates are raw detector output: coordinates are
 * clamped far outside any frame before they become ints (a float past INT_MAX cast to int is
 * undefined behaviour), and drawing clips to the frame anyway. */
cv::Rect pixel_rect(const float *b) {
  if (!(std::isfinite(b[0]) && std::isfinite(b[1]) && std::isfinite(b[2]) && std::isfinite(b[3])))
    return cv::Rect();
  static constexpr float kFar = 1 << 24;
  auto pixel = [](float v) { return static_cast<int>(std::min(std::max(v, -kFar), kFar)); };
  const int x1 = pixel(std::floor(b[0])), y1 = pixel(std::floor(b[1]));
  const int x2 = pixel(std::ceil(b[2])), y2 = pixel(std::ceil(b[3]));
  return cv::Rect(x1, y1, std::max(0, x2 - x1), std::max(0, y2 - y1));
}

}  // namespace

struct GstBoxOverlayPrivate {
  std::mutex lock; /* guards settings */
  Settings settings;

  /* Streaming thread only. */
  std::map<gint, std::string> labels; /* announced by detectors upstream */
  bool warned_no_candidates = false;
};

struct _GstBoxOverlay {
  GstVideoFilter parent;
  GstBoxOverlayPrivate *priv;
};

#define gst_box_overlay_parent_class parent_class
G_DEFINE_TYPE_WITH_CODE(GstBoxOverlay, gst_box_overlay, GST_TYPE_VIDEO_FILTER,
                        GST_DEBUG_CATEGORY_INIT(gst_box_overlay_debug, "boxoverlay", 0,
                                                "Draws detection boxes"));
GST_ELEMENT_REGISTER_DEFINE(boxoverlay, "boxoverlay", GST_RANK_NONE, GST_TYPE_BOX_OVERLAY);

static void gst_box_overlay_finalize(GObject *object);
static void gst_box_overlay_set_property(GObject *object, guint prop_id, const GValue *value,
                                         GParamSpec *pspec);
static void gst_box_overlay_get_property(GObject *object, guint prop_id, GValue *value,
                                         GParamSpec *pspec);
static gboolean gst_box_overlay_start(GstBaseTransform *trans);
static gboolean gst_box_overlay_sink_event(GstBaseTransform *trans, GstEvent *event);
static GstFlowReturn gst_box_overlay_transform_frame_ip(GstVideoFilter *filter,
                                                        GstVideoFrame *frame);

static void gst_box_overlay_class_init(GstBoxOverlayClass *klass) {
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS(klass);
  GstVideoFilterClass *filter_class = GST_VIDEO_FILTER_CLASS(klass);
  const GParamFlags rw = static_cast<GParamFlags>(G_PARAM_READWRITE | GST_PARAM_MUTABLE_PLAYING |
                                                  G_PARAM_STATIC_STRINGS);

  gobject_class->finalize = gst_box_overlay_finalize;
  gobject_class->set_property = gst_box_overlay_set_property;
  gobject_class->get_property = gst_box_overlay_get_property;

  g_object_class_install_property(
      gobject_class, PROP_LINE_WIDTH,
      g_param_spec_uint("line-width", "Line width",
                        "Thickness of a kept box's outline in pixels, drawn inside the box", 1, 64,
                        DEFAULT_LINE_WIDTH, rw));
  g_object_class_install_property(
      gobject_class, PROP_FONT_SCALE,
      g_param_spec_double("font-scale", "Font scale",
                          "Size of the label text (OpenCV Hershey font scale)", 0.1, 10.0,
                          DEFAULT_FONT_SCALE, rw));
  g_object_class_install_property(
      gobject_class, PROP_DRAW_LABELS,
      g_param_spec_boolean("draw-labels", "Draw labels", "Tag each kept box with 'label score'",
                           DEFAULT_DRAW_LABELS, rw));
  g_object_class_install_property(
      gobject_class, PROP_DRAW_CANDIDATES,
      g_param_spec_boolean("draw-candidates", "Draw candidates",
                           "Also draw the candidates meta as thin light boxes (needs "
                           "keep-candidates=true on cudanms)",
                           DEFAULT_DRAW_CANDIDATES, rw));

  gst_element_class_add_static_pad_template(element_class, &sink_template);
  gst_element_class_add_static_pad_template(element_class, &src_template);
  gst_element_class_set_static_metadata(
      element_class, "Detection box overlay", "Filter/Effect/Video",
      "Draws region-of-interest boxes with label and score, and optionally the raw candidate "
      "windows of cudanms candidates metadata",
      "cudanms developers");

  trans_class->start = GST_DEBUG_FUNCPTR(gst_box_overlay_start);
  trans_class->sink_event = GST_DEBUG_FUNCPTR(gst_box_overlay_sink_event);
  filter_class->transform_frame_ip = GST_DEBUG_FUNCPTR(gst_box_overlay_transform_frame_ip);
}

static void gst_box_overlay_init(GstBoxOverlay *self) {
  self->priv = new GstBoxOverlayPrivate();
  /* The defaults, applied here (the member initialisers take them from DEFAULT_*). */
  self->priv->settings = Settings();
  gst_base_transform_set_in_place(GST_BASE_TRANSFORM(self), TRUE);
  gst_base_transform_set_passthrough(GST_BASE_TRANSFORM(self), FALSE);
}

static void gst_box_overlay_finalize(GObject *object) {
  GstBoxOverlay *self = GST_BOX_OVERLAY(object);
  delete self->priv;
  self->priv = nullptr;
  G_OBJECT_CLASS(parent_class)->finalize(object);
}

static void gst_box_overlay_set_property(GObject *object, guint prop_id, const GValue *value,
                                         GParamSpec *pspec) {
  GstBoxOverlay *self = GST_BOX_OVERLAY(object);
  std::lock_guard<std::mutex> guard(self->priv->lock);
  Settings &s = self->priv->settings;

  switch (prop_id) {
    case PROP_LINE_WIDTH:
      s.line_width = g_value_get_uint(value);
      break;
    case PROP_FONT_SCALE:
      s.font_scale = g_value_get_double(value);
      break;
    case PROP_DRAW_LABELS:
      s.draw_labels = g_value_get_boolean(value);
      break;
    case PROP_DRAW_CANDIDATES:
      s.draw_candidates = g_value_get_boolean(value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
}

static void gst_box_overlay_get_property(GObject *object, guint prop_id, GValue *value,
                                         GParamSpec *pspec) {
  GstBoxOverlay *self = GST_BOX_OVERLAY(object);
  std::lock_guard<std::mutex> guard(self->priv->lock);
  const Settings &s = self->priv->settings;

  switch (prop_id) {
    case PROP_LINE_WIDTH:
      g_value_set_uint(value, s.line_width);
      break;
    case PROP_FONT_SCALE:
      g_value_set_double(value, s.font_scale);
      break;
    case PROP_DRAW_LABELS:
      g_value_set_boolean(value, s.draw_labels);
      break;
    case PROP_DRAW_CANDIDATES:
      g_value_set_boolean(value, s.draw_candidates);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
}

static gboolean gst_box_overlay_start(GstBaseTransform *trans) {
  GstBoxOverlay *self = GST_BOX_OVERLAY(trans);
  self->priv->labels.clear();
  self->priv->warned_no_candidates = false;
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
  return GST_BASE_TRANSFORM_CLASS(parent_class)->sink_event(trans, event);
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

  struct Tag {
    cv::Rect box;
    std::string text;
    Rgb color;
  };
  std::vector<Tag> tags;
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
      const bool has_id = gst_structure_get_int(detection, "label_id", &class_id);
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
    const Rgb color = class_color(class_id);
    draw_outline(canvas, box, static_cast<int>(s.line_width), color);
    if (s.draw_labels && !text.empty()) tags.push_back({box, text, color});
  }
  draw_points(canvas, frame->buffer, static_cast<int>(s.line_width));
  /* Tags last, so that no box is drawn over one. */
  for (const Tag &tag : tags) draw_tag(canvas, tag.box, tag.text, s.font_scale, tag.color);
  return GST_FLOW_OK;
}
