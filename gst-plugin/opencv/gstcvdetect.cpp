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
#include <cmath>
#include <memory>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/objdetect.hpp>
#include <string>
#include <vector>

#include "detections.h"
#include "elementclass.h"
#include "grayframe.h"
#include "propertytable.h"

GST_DEBUG_CATEGORY_STATIC(gst_cv_detect_debug);
#define GST_CAT_DEFAULT gst_cv_detect_debug

#define MODEL_HOG_PEOPLE "hog-people"

#define DEFAULT_MODEL MODEL_HOG_PEOPLE
#define DEFAULT_SCALE_FACTOR 1.1
#define DEFAULT_WIN_STRIDE 8
#define DEFAULT_HIT_THRESHOLD 0.0
#define DEFAULT_DOWNSCALE 1.0

#define VIDEO_FORMATS "{ BGR, RGB, BGRx, BGRA, RGBx, RGBA, I420, YV12, NV12, NV21, GRAY8 }"

namespace {

/* What its own properties say (guarded by the base's lock). */
struct Settings {
  double scale_factor = DEFAULT_SCALE_FACTOR;
  guint win_stride = DEFAULT_WIN_STRIDE;
  double downscale = DEFAULT_DOWNSCALE;
};

/* The model its property names, read at start. */
std::string model_of(const GstCudaNmsDetectorSettings &shared) {
  return shared.model.empty() ? DEFAULT_MODEL : shared.model;
}

}  // namespace

struct GstCvDetectPrivate {
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
};

ELEMENT_DEFINE(GstCvDetect, gst_cv_detect, GstCudaNmsDetector, GST_TYPE_CUDA_NMS_DETECTOR, cvdetect,
               "OpenCV sliding-window detector");

/* Its own properties as they are now. */
static Settings settings_of(GstCvDetect *self) {
  auto lock = gst_cuda_nms_detector_lock(GST_CUDA_NMS_DETECTOR(self));
  return self->priv->settings;
}

/* ------------------------------------------------------------------------------------------ */
/* The model                                                                                   */
/* ------------------------------------------------------------------------------------------ */

static gboolean gst_cv_detect_open(GstCudaNmsDetector *detector,
                                   const GstCudaNmsDetectorSettings &shared) {
  GstCvDetect *self = GST_CV_DETECT(detector);
  GstCvDetectPrivate *priv = self->priv;
  const std::string model = model_of(shared);
  gst_cuda_nms_detector_set_device(detector, "cpu", nullptr);
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

static void gst_cv_detect_close(GstCudaNmsDetector *detector) {
  GstCvDetect *self = GST_CV_DETECT(detector);
  self->priv->hog.reset();
  self->priv->cascade.reset();
}

/* 'person' for the HOG people detector, else the model file's name. */
static std::string gst_cv_detect_default_label(GstCudaNmsDetector *,
                                               const GstCudaNmsDetectorSettings &shared) {
  const std::string model = model_of(shared);
  if (model == MODEL_HOG_PEOPLE) return "person";
  gchar *base = g_path_get_basename(model.c_str());
  std::string name = base;
  g_free(base);
  const size_t dot = name.rfind('.');
  if (dot != std::string::npos && dot > 0) name.resize(dot);
  return name;
}

/* ------------------------------------------------------------------------------------------ */
/* The frame                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* HOG over a pyramid of levels whose windows span [min-size, max-size] in frame pixels. Levels run
 * in parallel; hits are emitted level by level, in OpenCV's scan order, so a frame's candidates are
 * always in the same order. */
static void detect_hog(GstCvDetect *self, const Settings &s,
                       const GstCudaNmsDetectorSettings &shared, const cv::Mat &gray) {
  GstCvDetectPrivate *priv = self->priv;
  const cv::Size win = priv->hog->winSize;
  /* The smallest window: min-size when set (smaller than the model's window: the frame is
   * upscaled), else the model's window on the downscaled copy. */
  double s_min = 1.0 / s.downscale;
  if (shared.sizes.min_width > 0 || shared.sizes.min_height > 0)
    s_min = std::max(double(shared.sizes.min_width) / win.width,
                     double(shared.sizes.min_height) / win.height);
  double s_max = std::min(double(gray.cols) / win.width, double(gray.rows) / win.height);
  if (shared.sizes.max_width > 0 && shared.sizes.max_height > 0)
    s_max = std::min(s_max, std::min(double(shared.sizes.max_width) / win.width,
                                     double(shared.sizes.max_height) / win.height));
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
      hog.detect(level, priv->level_hits[k], priv->level_weights[k], shared.threshold, stride,
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
static void detect_cascade(GstCvDetect *self, const Settings &s,
                           const GstCudaNmsDetectorSettings &shared, const cv::Mat &gray) {
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
  const cv::Size min_size(cvRound(shared.sizes.min_width / sx),
                          cvRound(shared.sizes.min_height / sy));
  const cv::Size max_size(cvRound(shared.sizes.max_width / sx),
                          cvRound(shared.sizes.max_height / sy));
  std::vector<cv::Rect> objects;
  std::vector<int> levels;
  std::vector<double> weights;
  priv->cascade->detectMultiScale(priv->small, objects, levels, weights, s.scale_factor, 0, 0,
                                  min_size, max_size, true);
  for (size_t i = 0; i < objects.size(); i++) {
    if (i < weights.size() && weights[i] < shared.threshold) continue;
    const cv::Rect &r = objects[i];
    priv->boxes.insert(
        priv->boxes.end(),
        {static_cast<float>(r.x * sx), static_cast<float>(r.y * sy),
         static_cast<float>((r.x + r.width) * sx), static_cast<float>((r.y + r.height) * sy)});
    priv->scores.push_back(i < weights.size() ? static_cast<float>(weights[i]) : 1.0f);
  }
}

static GstCudaNmsDetection gst_cv_detect_detect_on_host(GstCudaNmsDetector *detector,
                                                        GstBuffer *buffer, GstVideoFrame *frame,
                                                        const GstCudaNmsDetectorSettings &shared) {
  GstCvDetect *self = GST_CV_DETECT(detector);
  GstCvDetectPrivate *priv = self->priv;
  const Settings s = settings_of(self);
  cv::Mat gray;
  if (!gst_cv_gray_of(frame, &priv->gray, &gray))
    return GstCudaNmsDetection::failed(std::string("Unsupported format ") +
                                       gst_video_format_to_string(GST_VIDEO_FRAME_FORMAT(frame)));
  priv->boxes.clear();
  priv->scores.clear();
  try {
    if (priv->hog) {
      detect_hog(self, s, shared, gray);
    } else if (priv->cascade) {
      detect_cascade(self, s, shared, gray);
    }
  } catch (const cv::Exception &e) {
    return GstCudaNmsDetection::failed("OpenCV detection failed", e.what());
  }
  GST_LOG_OBJECT(self, "%zu candidates", priv->scores.size());
  if (!gst_cv_attach_candidates(buffer, priv->boxes, priv->scores, shared.detected.class_id))
    return GstCudaNmsDetection::failed("Could not add the candidates meta");
  return GstCudaNmsDetection::done();
}

/* ------------------------------------------------------------------------------------------ */
/* The element: its instance and its class                                                     */
/* ------------------------------------------------------------------------------------------ */

static void gst_cv_detect_class_init(GstCvDetectClass *klass) {
  GstCudaNmsDetectorClass *detector_class = GST_CUDA_NMS_DETECTOR_CLASS(klass);
  const GParamFlags rw = static_cast<GParamFlags>(G_PARAM_READWRITE | GST_PARAM_MUTABLE_PLAYING |
                                                  G_PARAM_STATIC_STRINGS);

  own_private<GstCvDetect>(klass);

  GstCudaNmsDetectorProperties shared;
  shared.model_default = DEFAULT_MODEL;
  shared.model_blurb =
      "'hog-people' (OpenCV's built-in HOG people detector) or the path of a Haar/LBP cascade "
      "XML file; loaded when the element starts";
  shared.label_blurb =
      "Name of the detected class, announced downstream for overlays and writers; empty: "
      "'person' for hog-people, else the model file's name";
  shared.threshold_name = "hit-threshold";
  shared.threshold_blurb =
      "Windows scoring below this are not emitted (HOG: SVM margin; cascades: last-stage level "
      "weight)";
  shared.threshold_min = -G_MAXDOUBLE, shared.threshold_max = G_MAXDOUBLE;
  shared.threshold_default = DEFAULT_HIT_THRESHOLD;
  shared.min_size_blurb =
      "Smallest window, WxH in frame pixels; smaller than the model's window (64x128 for "
      "hog-people) upscales the frame. 0x0: the model's window";
  gst_cuda_nms_detector_class_install_properties(detector_class, shared);
  PropertyTable<Settings>(
      G_OBJECT_CLASS(klass),
      locked_member<GstCvDetect, &GstCvDetectPrivate::settings, gst_cuda_nms_detector_mutex>)
      .field(g_param_spec_double("scale-factor", "Scale factor",
                                 "Ratio between the window sizes of consecutive pyramid levels",
                                 1.001, 4.0, DEFAULT_SCALE_FACTOR, rw),
             &Settings::scale_factor)
      .field(g_param_spec_uint("win-stride", "Window stride",
                               "Step of the sliding window in pixels of a pyramid level (HOG only; "
                               "a multiple of 8 is fastest; cascades step by 1-2 pixels "
                               "themselves)",
                               1, 256, DEFAULT_WIN_STRIDE, rw),
             &Settings::win_stride)
      .field(g_param_spec_double("downscale", "Downscale",
                                 "Detect on a copy of the frame this much smaller (1 = full "
                                 "size), for speed: the smallest window becomes the model's "
                                 "window / downscale (HOG: unless min-size says otherwise); boxes "
                                 "are in frame pixels",
                                 0.05, 1.0, DEFAULT_DOWNSCALE, rw),
             &Settings::downscale);

  gst_cuda_nms_detector_class_add_pad_templates(detector_class, VIDEO_FORMATS, nullptr);
  describe_element(
      klass, "OpenCV sliding-window detector", "Filter/Analyzer/Video",
      "Runs an OpenCV HOG or cascade detector and attaches its raw, ungrouped candidate windows "
      "with scores as cudanms candidates metadata");

  ELEMENT_VFUNCS(detector_class, gst_cv_detect, open, close, detect_on_host, default_label);
}
