/**
 * SECTION:element-cvdetect
 * @title: cvdetect
 *
 * An OpenCV sliding-window detector that attaches every window it scores above hit-threshold,
 * ungrouped, with its score, as one #GstCudaNmsCandidatesMeta per frame: dozens to hundreds of
 * overlapping windows per object, which cudanms reduces to one box each.
 *
 * model=hog-people (the default) is OpenCV's built-in HOG + linear SVM people detector
 * (64x128 window) run over an image pyramid with grouping off; the scores are the SVM margins.
 * Any other value is the path of a Haar or LBP cascade XML file, run with
 * detectMultiScale3 (minNeighbors=0, outputRejectLevels=true) on the histogram-equalized gray
 * frame; the scores are the level weights of its last stage.
 *
 * Boxes are in pixels of the incoming frame whatever downscale says. The frame itself is not
 * changed.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 filesrc location=vtest.avi ! decodebin ! cvdetect min-size=48x96 ! \
 *     cudanms iou-threshold=0.3 ! boxoverlay ! autovideosink
 * ]|
 */
#include "gstcvdetect.h"

#include <cudanms/bounded_file.h>
#include <gst/cudanms/cudanmsmeta.h>
#include <gst/video/video.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/objdetect.hpp>
#include <string>
#include <vector>

#include "detections.h"
#include "detectorproperties.h"
#include "grayframe.h"
#include "labels.h"

GST_DEBUG_CATEGORY_STATIC(gst_cv_detect_debug);
#define GST_CAT_DEFAULT gst_cv_detect_debug

enum {
  PROP_0,
  PROP_MODEL,
  PROP_SCALE_FACTOR,
  PROP_WIN_STRIDE,
  PROP_MIN_SIZE,
  PROP_MAX_SIZE,
  PROP_HIT_THRESHOLD,
  PROP_DOWNSCALE,
  PROP_LABEL,
  PROP_CLASS_ID,
};

#define MODEL_HOG_PEOPLE "hog-people"

#define DEFAULT_MODEL MODEL_HOG_PEOPLE
#define DEFAULT_SCALE_FACTOR 1.1
#define DEFAULT_WIN_STRIDE 8
#define DEFAULT_HIT_THRESHOLD 0.0
#define DEFAULT_DOWNSCALE 1.0

#define VIDEO_FORMATS "{ BGR, RGB, BGRx, BGRA, RGBx, RGBA, I420, YV12, NV12, NV21, GRAY8 }"

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE(
    "sink", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS(GST_VIDEO_CAPS_MAKE(VIDEO_FORMATS)));
static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE(
    "src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS(GST_VIDEO_CAPS_MAKE(VIDEO_FORMATS)));

namespace {

/* What the properties say; copied under the lock at the top of each frame. */
struct Settings {
  std::string model = DEFAULT_MODEL;
  double scale_factor = DEFAULT_SCALE_FACTOR;
  guint win_stride = DEFAULT_WIN_STRIDE;
  WindowSizes sizes;
  double hit_threshold = DEFAULT_HIT_THRESHOLD;
  double downscale = DEFAULT_DOWNSCALE;
  DetectorClass detected;
};

std::string label_for(const Settings &s) {
  if (!s.detected.label.empty()) return s.detected.label;
  if (s.model == MODEL_HOG_PEOPLE) return "person";
  gchar *base = g_path_get_basename(s.model.c_str());
  std::string name = base;
  g_free(base);
  const size_t dot = name.rfind('.');
  if (dot != std::string::npos && dot > 0) name.resize(dot);
  return name;
}

}  // namespace

struct GstCvDetectPrivate {
  std::mutex lock; /* guards settings */
  Settings settings;

  /* Streaming thread (and start/stop) only. */
  std::unique_ptr<cv::HOGDescriptor> hog;
  std::unique_ptr<cv::CascadeClassifier> cascade;
  cv::Mat gray;  /* the frame in gray, when it has no gray plane to wrap */
  cv::Mat small; /* the downscaled copy for cascades */
  std::vector<std::vector<cv::Point>> level_hits;
  std::vector<std::vector<double>> level_weights;
  std::vector<float> boxes;
  std::vector<float> scores;
  GstCvLabelAnnouncer announcer;
};

struct _GstCvDetect {
  GstVideoFilter parent;
  GstCvDetectPrivate *priv;
};

#define gst_cv_detect_parent_class parent_class
G_DEFINE_TYPE_WITH_CODE(GstCvDetect, gst_cv_detect, GST_TYPE_VIDEO_FILTER,
                        GST_DEBUG_CATEGORY_INIT(gst_cv_detect_debug, "cvdetect", 0,
                                                "OpenCV sliding-window detector"));
GST_ELEMENT_REGISTER_DEFINE(cvdetect, "cvdetect", GST_RANK_NONE, GST_TYPE_CV_DETECT);

static void gst_cv_detect_finalize(GObject *object);
static void gst_cv_detect_set_property(GObject *object, guint prop_id, const GValue *value,
                                       GParamSpec *pspec);
static void gst_cv_detect_get_property(GObject *object, guint prop_id, GValue *value,
                                       GParamSpec *pspec);
static gboolean gst_cv_detect_start(GstBaseTransform *trans);
static gboolean gst_cv_detect_stop(GstBaseTransform *trans);
static GstFlowReturn gst_cv_detect_transform_frame_ip(GstVideoFilter *filter, GstVideoFrame *frame);

static void gst_cv_detect_class_init(GstCvDetectClass *klass) {
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS(klass);
  GstVideoFilterClass *filter_class = GST_VIDEO_FILTER_CLASS(klass);
  const GParamFlags rw = static_cast<GParamFlags>(G_PARAM_READWRITE | GST_PARAM_MUTABLE_PLAYING |
                                                  G_PARAM_STATIC_STRINGS);
  const GParamFlags rw_ready = static_cast<GParamFlags>(
      G_PARAM_READWRITE | GST_PARAM_MUTABLE_READY | G_PARAM_STATIC_STRINGS);

  gobject_class->finalize = gst_cv_detect_finalize;
  gobject_class->set_property = gst_cv_detect_set_property;
  gobject_class->get_property = gst_cv_detect_get_property;

  g_object_class_install_property(
      gobject_class, PROP_MODEL,
      g_param_spec_string("model", "Model",
                          "'hog-people' (OpenCV's built-in HOG people detector) or the path of a "
                          "Haar/LBP cascade XML file; loaded when the element starts",
                          DEFAULT_MODEL, rw_ready));
  g_object_class_install_property(
      gobject_class, PROP_SCALE_FACTOR,
      g_param_spec_double("scale-factor", "Scale factor",
                          "Ratio between the window sizes of consecutive pyramid levels", 1.001,
                          4.0, DEFAULT_SCALE_FACTOR, rw));
  g_object_class_install_property(
      gobject_class, PROP_WIN_STRIDE,
      g_param_spec_uint("win-stride", "Window stride",
                        "Step of the sliding window in pixels of a pyramid level (HOG only; a "
                        "multiple of 8 is fastest; cascades step by 1-2 pixels themselves)",
                        1, 256, DEFAULT_WIN_STRIDE, rw));
  WindowSizes::install(gobject_class, PROP_MIN_SIZE, PROP_MAX_SIZE,
                       "Smallest window, WxH in frame pixels; smaller than the model's window "
                       "(64x128 for hog-people) upscales the frame. 0x0: the model's window");
  g_object_class_install_property(
      gobject_class, PROP_HIT_THRESHOLD,
      g_param_spec_double("hit-threshold", "Hit threshold",
                          "Windows scoring below this are not emitted (HOG: SVM margin; "
                          "cascades: last-stage level weight)",
                          -G_MAXDOUBLE, G_MAXDOUBLE, DEFAULT_HIT_THRESHOLD, rw));
  g_object_class_install_property(
      gobject_class, PROP_DOWNSCALE,
      g_param_spec_double("downscale", "Downscale",
                          "Detect on a copy of the frame this much smaller (1 = full size), for "
                          "speed: the smallest window becomes the model's window / downscale "
                          "(HOG: unless min-size says otherwise); boxes are in frame pixels",
                          0.05, 1.0, DEFAULT_DOWNSCALE, rw));
  DetectorClass::install(gobject_class, PROP_LABEL, PROP_CLASS_ID, "",
                         "Name of the detected class, announced downstream for overlays and "
                         "writers; empty: 'person' for hog-people, else the model file's name");

  gst_element_class_add_static_pad_template(element_class, &sink_template);
  gst_element_class_add_static_pad_template(element_class, &src_template);
  gst_element_class_set_static_metadata(
      element_class, "OpenCV sliding-window detector", "Filter/Analyzer/Video",
      "Runs an OpenCV HOG or cascade detector and attaches its raw, ungrouped candidate windows "
      "with scores as cudanms candidates metadata",
      "cudanms developers");

  trans_class->start = GST_DEBUG_FUNCPTR(gst_cv_detect_start);
  trans_class->stop = GST_DEBUG_FUNCPTR(gst_cv_detect_stop);
  filter_class->transform_frame_ip = GST_DEBUG_FUNCPTR(gst_cv_detect_transform_frame_ip);
}

static void gst_cv_detect_init(GstCvDetect *self) {
  self->priv = new GstCvDetectPrivate();
  /* The defaults, applied here (the member initialisers take them from DEFAULT_*). */
  self->priv->settings = Settings();
  /* Adds metadata: in place, never passthrough, so that the buffer is writable. */
  gst_base_transform_set_in_place(GST_BASE_TRANSFORM(self), TRUE);
  gst_base_transform_set_passthrough(GST_BASE_TRANSFORM(self), FALSE);
  gst_base_transform_set_qos_enabled(GST_BASE_TRANSFORM(self), FALSE);
}

static void gst_cv_detect_finalize(GObject *object) {
  GstCvDetect *self = GST_CV_DETECT(object);
  delete self->priv;
  self->priv = nullptr;
  G_OBJECT_CLASS(parent_class)->finalize(object);
}

static void gst_cv_detect_set_property(GObject *object, guint prop_id, const GValue *value,
                                       GParamSpec *pspec) {
  GstCvDetect *self = GST_CV_DETECT(object);
  std::lock_guard<std::mutex> guard(self->priv->lock);
  Settings &s = self->priv->settings;
  bool bad_size = false;
  if (s.detected.set(pspec, value)) return;
  if (s.sizes.set(pspec, value, &bad_size)) {
    if (bad_size) {
      GST_WARNING_OBJECT(self, "ignoring %s=\"%s\": expected WxH, e.g. 64x128", pspec->name,
                         g_value_get_string(value));
    }
    return;
  }
  switch (prop_id) {
    case PROP_MODEL: {
      const gchar *model = g_value_get_string(value);
      s.model = model && *model ? model : DEFAULT_MODEL;
      break;
    }
    case PROP_SCALE_FACTOR:
      s.scale_factor = g_value_get_double(value);
      break;
    case PROP_WIN_STRIDE:
      s.win_stride = g_value_get_uint(value);
      break;
    case PROP_HIT_THRESHOLD:
      s.hit_threshold = g_value_get_double(value);
      break;
    case PROP_DOWNSCALE:
      s.downscale = g_value_get_double(value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
}

static void gst_cv_detect_get_property(GObject *object, guint prop_id, GValue *value,
                                       GParamSpec *pspec) {
  GstCvDetect *self = GST_CV_DETECT(object);
  std::lock_guard<std::mutex> guard(self->priv->lock);
  const Settings &s = self->priv->settings;
  if (s.detected.get(pspec, value) || s.sizes.get(pspec, value)) return;
  switch (prop_id) {
    case PROP_MODEL:
      g_value_set_string(value, s.model.c_str());
      break;
    case PROP_SCALE_FACTOR:
      g_value_set_double(value, s.scale_factor);
      break;
    case PROP_WIN_STRIDE:
      g_value_set_uint(value, s.win_stride);
      break;
    case PROP_HIT_THRESHOLD:
      g_value_set_double(value, s.hit_threshold);
      break;
    case PROP_DOWNSCALE:
      g_value_set_double(value, s.downscale);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
}

/* ------------------------------------------------------------------------------------------ */
/* The model                                                                                   */
/* ------------------------------------------------------------------------------------------ */

static gboolean gst_cv_detect_start(GstBaseTransform *trans) {
  GstCvDetect *self = GST_CV_DETECT(trans);
  GstCvDetectPrivate *priv = self->priv;
  std::string model;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    model = priv->settings.model;
  }
  priv->hog.reset();
  priv->cascade.reset();
  priv->announcer.reset();

  if (model == MODEL_HOG_PEOPLE) {
    priv->hog = std::make_unique<cv::HOGDescriptor>();
    priv->hog->setSVMDetector(cv::HOGDescriptor::getDefaultPeopleDetector());
    GST_INFO_OBJECT(self, "model: OpenCV's HOG people detector");
    return TRUE;
  }
  std::string unreadable;
  if (!cudanms::check_bounded_file(model, cudanms::kModelFileLimit, &unreadable)) {
    GST_ELEMENT_ERROR(self, RESOURCE, NOT_FOUND,
                      ("Model file \"%s\" cannot be read: %s", model.c_str(), unreadable.c_str()),
                      ("model must be '" MODEL_HOG_PEOPLE "' or the path of a Haar/LBP cascade "
                       "XML file, e.g. /usr/share/opencv4/haarcascades/"
                       "haarcascade_frontalface_default.xml (Debian package opencv-data)"));
    return FALSE;
  }
  auto cascade = std::make_unique<cv::CascadeClassifier>();
  std::string why = "not an OpenCV Haar or LBP cascade";
  bool loaded = false;
  try {
    loaded = cascade->load(model) && !cascade->empty();
  } catch (const cv::Exception &e) {
    why = e.what();
  }
  if (!loaded) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                      ("Model file \"%s\" is not a valid cascade", model.c_str()),
                      ("%s", why.c_str()));
    return FALSE;
  }
  priv->cascade = std::move(cascade);
  GST_INFO_OBJECT(self, "model: cascade %s", model.c_str());
  return TRUE;
}

static gboolean gst_cv_detect_stop(GstBaseTransform *trans) {
  GstCvDetect *self = GST_CV_DETECT(trans);
  self->priv->hog.reset();
  self->priv->cascade.reset();
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* The frame                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* The frame as 8-bit grey (gst_cv_gray_of), or an element error for a format it does not know. */
static bool gray_of(GstCvDetect *self, GstVideoFrame *frame, cv::Mat *gray) {
  if (gst_cv_gray_of(frame, &self->priv->gray, gray)) return true;
  GST_ELEMENT_ERROR(
      self, STREAM, FORMAT,
      ("Unsupported format %s", gst_video_format_to_string(GST_VIDEO_FRAME_FORMAT(frame))), (NULL));
  return false;
}

/* HOG over a pyramid of levels whose windows span [min-size, max-size] in frame pixels. Levels run
 * in parallel; hits are emitted level by level, in OpenCV's scan order, so a frame's candidates are
 * always in the same order. */
static void detect_hog(GstCvDetect *self, const Settings &s, const cv::Mat &gray) {
  GstCvDetectPrivate *priv = self->priv;
  const cv::Size win = priv->hog->winSize;
  /* The smallest window: min-size when set (smaller than the model's window: the frame is
   * upscaled), else the model's window on the downscaled copy. */
  double s_min = 1.0 / s.downscale;
  if (s.sizes.min_width > 0 || s.sizes.min_height > 0)
    s_min =
        std::max(double(s.sizes.min_width) / win.width, double(s.sizes.min_height) / win.height);
  double s_max = std::min(double(gray.cols) / win.width, double(gray.rows) / win.height);
  if (s.sizes.max_width > 0 && s.sizes.max_height > 0)
    s_max = std::min(s_max, std::min(double(s.sizes.max_width) / win.width,
                                     double(s.sizes.max_height) / win.height));
  std::vector<double> scales;
  for (double sc = s_min; sc <= s_max * (1 + 1e-9) && scales.size() < 256; sc *= s.scale_factor)
    scales.push_back(sc);

  priv->level_hits.assign(scales.size(), {});
  priv->level_weights.assign(scales.size(), {});
  std::vector<cv::Size2d> level_scale(scales.size());
  const cv::HOGDescriptor &hog = *priv->hog;
  const cv::Size stride(s.win_stride, s.win_stride);
  cv::parallel_for_(cv::Range(0, static_cast<int>(scales.size())), [&](const cv::Range &range) {
    cv::Mat level;
    for (int k = range.start; k < range.end; k++) {
      const cv::Size size(cvRound(gray.cols / scales[k]), cvRound(gray.rows / scales[k]));
      if (size.width < win.width || size.height < win.height) continue;
      if (size == gray.size()) {
        level = gray;
      } else {
        cv::resize(gray, level, size, 0, 0, scales[k] < 1 ? cv::INTER_LINEAR : cv::INTER_AREA);
      }
      level_scale[k] = cv::Size2d(double(gray.cols) / size.width, double(gray.rows) / size.height);
      hog.detect(level, priv->level_hits[k], priv->level_weights[k], s.hit_threshold, stride,
                 cv::Size());
    }
  });

  for (size_t k = 0; k < scales.size(); k++) {
    const cv::Size2d sc = level_scale[k];
    for (size_t i = 0; i < priv->level_hits[k].size(); i++) {
      const cv::Point p = priv->level_hits[k][i];
      const float x1 = static_cast<float>(p.x * sc.width), y1 = static_cast<float>(p.y * sc.height);
      priv->boxes.insert(priv->boxes.end(), {x1, y1, static_cast<float>(x1 + win.width * sc.width),
                                             static_cast<float>(y1 + win.height * sc.height)});
      priv->scores.push_back(static_cast<float>(priv->level_weights[k][i]));
    }
  }
}

/* A cascade with grouping off (minNeighbors = 0) and the last stage's level weights as scores. */
static void detect_cascade(GstCvDetect *self, const Settings &s, const cv::Mat &gray) {
  GstCvDetectPrivate *priv = self->priv;
  const double d = s.downscale;
  if (d < 1.0) {
    cv::resize(gray, priv->small,
               cv::Size(std::max(1, cvRound(gray.cols * d)), std::max(1, cvRound(gray.rows * d))),
               0, 0, cv::INTER_AREA);
  } else {
    gray.copyTo(priv->small);
  }
  cv::equalizeHist(priv->small, priv->small);
  const double sx = double(gray.cols) / priv->small.cols, sy = double(gray.rows) / priv->small.rows;
  const cv::Size min_size(cvRound(s.sizes.min_width / sx), cvRound(s.sizes.min_height / sy));
  const cv::Size max_size(cvRound(s.sizes.max_width / sx), cvRound(s.sizes.max_height / sy));
  std::vector<cv::Rect> objects;
  std::vector<int> levels;
  std::vector<double> weights;
  priv->cascade->detectMultiScale(priv->small, objects, levels, weights, s.scale_factor, 0, 0,
                                  min_size, max_size, true);
  for (size_t i = 0; i < objects.size(); i++) {
    if (i < weights.size() && weights[i] < s.hit_threshold) continue;
    const cv::Rect &r = objects[i];
    priv->boxes.insert(
        priv->boxes.end(),
        {static_cast<float>(r.x * sx), static_cast<float>(r.y * sy),
         static_cast<float>((r.x + r.width) * sx), static_cast<float>((r.y + r.height) * sy)});
    priv->scores.push_back(i < weights.size() ? static_cast<float>(weights[i]) : 1.0f);
  }
}

/* Tells downstream the name of the class, once and whenever it changes. */
static void announce_label(GstCvDetect *self, const Settings &s) {
  self->priv->announcer.announce(GST_BASE_TRANSFORM_SRC_PAD(self), s.detected.class_id,
                                 label_for(s));
}

static GstFlowReturn gst_cv_detect_transform_frame_ip(GstVideoFilter *filter,
                                                      GstVideoFrame *frame) {
  GstCvDetect *self = GST_CV_DETECT(filter);
  GstCvDetectPrivate *priv = self->priv;
  Settings s;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    s = priv->settings;
  }
  announce_label(self, s);

  cv::Mat gray;
  if (!gray_of(self, frame, &gray)) return GST_FLOW_ERROR;
  priv->boxes.clear();
  priv->scores.clear();
  const auto start = std::chrono::steady_clock::now();
  try {
    if (priv->hog) {
      detect_hog(self, s, gray);
    } else if (priv->cascade) {
      detect_cascade(self, s, gray);
    }
  } catch (const cv::Exception &e) {
    GST_ELEMENT_ERROR(self, LIBRARY, FAILED, ("OpenCV detection failed"), ("%s", e.what()));
    return GST_FLOW_ERROR;
  }
  const guint n = static_cast<guint>(priv->scores.size());
  GST_LOG_OBJECT(
      self, "%u candidates in %.1f ms", n,
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());

  if (!gst_cv_attach_candidates(frame->buffer, priv->boxes, priv->scores, s.detected.class_id)) {
    GST_ELEMENT_ERROR(self, CORE, FAILED, ("Could not add the candidates meta"), (NULL));
    return GST_FLOW_ERROR;
  }
  return GST_FLOW_OK;
}
