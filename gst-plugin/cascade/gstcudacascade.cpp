/**
 * SECTION:element-cudacascade
 * @title: cudacascade
 *
 * OpenCV's Haar and LBP cascade detectors (the XML files of Debian's opencv-data) on a CUDA GPU:
 * every raw window of every scale, the same windows and scores as OpenCV's
 * cv::CascadeClassifier::detectMultiScale3 with grouping off (minNeighbors = 0,
 * outputRejectLevels = true), attached with their scores (the last stage's level weight) as one
 * #GstCudaNmsCandidatesMeta per frame for cudanms to group. Without a usable GPU (backend=auto)
 * it warns once and runs the library's CPU twin, which finds the same windows.
 *
 * The cascade runs on the frame's luma plane as it is (GRAY8, I420, YV12, NV12, NV21) or on the
 * grey conversion of RGB formats; unlike cvdetect it does not equalize the histogram. Frames in
 * GPU memory (memory:CUDAMemory, from cudaupload or nvh264dec) are read in place in the
 * pipeline's CUDA context, which it shares with them and with cudanms; with device-candidates
 * (the default) the windows stay in GPU memory for cudanms to group in place.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 filesrc location=Megamind.avi ! decodebin ! videoconvert ! \
 *     cudacascade model=/usr/share/opencv4/haarcascades/haarcascade_frontalface_alt2.xml \
 *         min-size=40x40 label=face ! cudanms iou-threshold=0.3 ! boxoverlay ! videoconvert ! \
 *     autovideosink
 * ]|
 */
#include "gstcudacascade.h"

#include <cudanms/cascade.h>
#include <gst/cudanms/cudanmsmeta.h>
#include <gst/video/video.h>

#include <memory>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <vector>

#include "cudaframe.h"
#include "detections.h"
#include "devicecandidates.h"
#include "elementclass.h"
#include "elementcudacontext.h"
#include "grayframe.h"
#include "propertytable.h"

GST_DEBUG_CATEGORY_STATIC(gst_cuda_cascade_debug);
#define GST_CAT_DEFAULT gst_cuda_cascade_debug

#define DEFAULT_MODEL "/usr/share/opencv4/haarcascades/haarcascade_frontalface_alt2.xml"
#define DEFAULT_SCALE_FACTOR 1.1
#define DEFAULT_HIT_THRESHOLD (-G_MAXDOUBLE)

/* The windows one device candidates buffer holds at most (1.5 MiB): far more than a face
 * cascade's raw windows on a 4K frame. A frame finding more makes cudanms fail loudly (its count
 * is kept whole); device-candidates=false has no such bound. */
#define DEVICE_CANDIDATES_MAX_WINDOWS (64u * 1024)

#define VIDEO_FORMATS "{ GRAY8, I420, YV12, NV12, NV21, BGR, RGB, BGRx, BGRA, RGBx, RGBA }"
/* Frames in GPU memory (gstreamer-cuda's GstCudaMemory) are read in place: luma-first formats. */
#define CUDA_FORMATS "{ GRAY8, I420, YV12, NV12, NV21 }"

/* What its own property says (guarded by the base's lock). */
struct CascadeSettings {
  double scale_factor = DEFAULT_SCALE_FACTOR;
};

struct GstCudaCascadePrivate {
  CascadeSettings settings;

  /* Streaming thread (and start/stop) only. */
  std::shared_ptr<const cudanms::cascade::Model> model;
  std::unique_ptr<cudanms::cascade::Detector> detector;
  cv::Mat gray;
  std::vector<cudanms::cascade::Window> windows;
  std::vector<float> boxes, scores;
};

ELEMENT_DEFINE(GstCudaCascade, gst_cuda_cascade, GstCudaNmsDetector, GST_TYPE_CUDA_NMS_DETECTOR,
               cudacascade, "Cascade detector on CUDA");

/* ------------------------------------------------------------------------------------------ */
/* The model and the detector                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* The detector made, told to the base (where it runs, the CUDA context of frames it reads in
 * place). */
static void use_detector(GstCudaCascade *self,
                         std::unique_ptr<cudanms::cascade::Detector> detector) {
  self->priv->detector = std::move(detector);
  const cudanms::cascade::Detector &d = *self->priv->detector;
  gst_cuda_nms_detector_set_device(
      GST_CUDA_NMS_DETECTOR(self), d.device_name(),
      d.backend() == cudanms::Backend::kCuda ? d.cuda_context() : nullptr);
}

static gboolean gst_cuda_cascade_open(GstCudaNmsDetector *detector,
                                      const GstCudaNmsDetectorSettings &shared) {
  GstCudaCascade *self = GST_CUDA_CASCADE(detector);
  GstCudaCascadePrivate *priv = self->priv;
  const std::string &model = shared.model;
  cudanms::Status status;
  priv->model = cudanms::cascade::Model::load(model, &status);
  if (!priv->model) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("Cannot use model \"%s\"", model.c_str()),
                      ("%s. model must be the path of an OpenCV Haar or LBP cascade XML file, "
                       "e.g. " DEFAULT_MODEL " (Debian package opencv-data)",
                       status.message().c_str()));
    return FALSE;
  }
  std::unique_ptr<cudanms::cascade::Detector> made;
  if (shared.backend != GST_CUDA_NMS_BACKEND_CPU) {
    cudanms::cascade::DetectorOptions options;
    options.backend = cudanms::Backend::kCuda;
    options.device = shared.gpu_id;
    /* In the pipeline's CUDA context, where the base found or made one. */
    ElementCudaContext::Scope scope(gst_cuda_nms_detector_cuda_context(detector));
    made = cudanms::cascade::Detector::create(priv->model, options, &status);
    if (!made && !gst_cuda_nms_backend_falls_back(GST_ELEMENT(self), shared.backend, shared.gpu_id,
                                                  "the cascade", status.message()))
      return FALSE;
  }
  if (!made) made = cudanms::cascade::Detector::create(priv->model, {}, &status);
  if (!made) {
    GST_ELEMENT_ERROR(self, RESOURCE, FAILED, ("Cannot create the cascade detector"),
                      ("%s", status.message().c_str()));
    return FALSE;
  }
  use_detector(self, std::move(made));
  GST_INFO_OBJECT(self, "model %s (%zu stages) on %s", model.c_str(), priv->model->stages.size(),
                  priv->detector->device_name().c_str());
  return TRUE;
}

static void gst_cuda_cascade_close(GstCudaNmsDetector *detector) {
  GstCudaCascadePrivate *priv = GST_CUDA_CASCADE(detector)->priv;
  priv->detector.reset();
  priv->model.reset();
}

/* The CPU twin, which finds the same windows. */
static gboolean gst_cuda_cascade_fall_back_to_cpu(GstCudaNmsDetector *detector,
                                                  const GstCudaNmsDetectorSettings &) {
  GstCudaCascade *self = GST_CUDA_CASCADE(detector);
  cudanms::Status status;
  std::unique_ptr<cudanms::cascade::Detector> twin =
      cudanms::cascade::Detector::create(self->priv->model, {}, &status);
  if (!twin) return FALSE;
  use_detector(self, std::move(twin));
  return TRUE;
}

static std::string gst_cuda_cascade_default_label(GstCudaNmsDetector *detector,
                                                  const GstCudaNmsDetectorSettings &) {
  return GST_CUDA_CASCADE(detector)->priv->model->name;
}

/* ------------------------------------------------------------------------------------------ */
/* The frame                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* The windows into GPU memory, in a device candidates buffer of the base's pool (made, or made
 * again, for the frame's most windows), attached for cudanms to use in place. */
static GstCudaNmsDetection detect_into_device(GstCudaCascade *self, GstBuffer *buffer,
                                              const GstCudaNmsDetectorSettings &shared,
                                              const cudanms::cascade::GrayView &view,
                                              const cudanms::cascade::DetectParams &params,
                                              std::shared_ptr<cudanms::DeviceCandidates> out) {
  cudanms::cascade::DeviceOutput output;
  output.class_id = shared.detected.class_id;
  output.min_score = shared.threshold;
  const cudanms::Status status = self->priv->detector->detect(view, params, output, out.get());
  if (!status.ok()) return GstCudaNmsDetection::gpu_failed(status.message());
  if (!gst_cv_attach_device_candidates(buffer, std::move(out), shared.gpu_id))
    return GstCudaNmsDetection::failed("Could not attach the device candidates");
  return GstCudaNmsDetection::done();
}

/* The windows into host memory, those at or above hit-threshold attached. */
static GstCudaNmsDetection detect_into_host(GstCudaCascade *self, GstBuffer *buffer,
                                            const GstCudaNmsDetectorSettings &shared,
                                            const cudanms::cascade::GrayView &view,
                                            const cudanms::cascade::DetectParams &params) {
  GstCudaCascadePrivate *priv = self->priv;
  const cudanms::Status status = priv->detector->detect(view, params, &priv->windows);
  if (!status.ok()) {
    if (priv->detector->backend() == cudanms::Backend::kCuda)
      return GstCudaNmsDetection::gpu_failed(status.message());
    return GstCudaNmsDetection::failed("Cascade detection failed", status.message());
  }
  priv->boxes.clear();
  priv->scores.clear();
  for (const cudanms::cascade::Window &w : priv->windows) {
    if (w.score < shared.threshold) continue;
    priv->boxes.insert(priv->boxes.end(),
                       {static_cast<float>(w.x), static_cast<float>(w.y),
                        static_cast<float>(w.x + w.width), static_cast<float>(w.y + w.height)});
    priv->scores.push_back(static_cast<float>(w.score));
  }
  GST_LOG_OBJECT(self, "%zu windows", priv->scores.size());
  if (!gst_cv_attach_candidates(buffer, priv->boxes, priv->scores, shared.detected.class_id))
    return GstCudaNmsDetection::failed("Could not add the candidates meta");
  return GstCudaNmsDetection::done();
}

/* The windows of the frame's grey pixels (in host or GPU memory): left in GPU memory where the
 * base's pool gives a buffer, else in host memory. */
static GstCudaNmsDetection detect(GstCudaCascade *self, GstBuffer *buffer,
                                  const GstCudaNmsDetectorSettings &shared,
                                  const cudanms::cascade::GrayView &view) {
  GstCudaCascadePrivate *priv = self->priv;
  cudanms::cascade::DetectParams params;
  {
    auto lock = gst_cuda_nms_detector_lock(GST_CUDA_NMS_DETECTOR(self));
    params.scale_factor = priv->settings.scale_factor;
  }
  params.min_width = shared.sizes.min_width, params.min_height = shared.sizes.min_height;
  params.max_width = shared.sizes.max_width, params.max_height = shared.sizes.max_height;
  const size_t most = std::min<size_t>(priv->detector->max_windows(view.width, view.height, params),
                                       DEVICE_CANDIDATES_MAX_WINDOWS);
  std::shared_ptr<cudanms::DeviceCandidates> out =
      gst_cuda_nms_detector_device_candidates(GST_CUDA_NMS_DETECTOR(self), buffer, shared, most);
  if (out) return detect_into_device(self, buffer, shared, view, params, std::move(out));
  return detect_into_host(self, buffer, shared, view, params);
}

static GstCudaNmsDetection gst_cuda_cascade_detect_on_host(
    GstCudaNmsDetector *detector, GstBuffer *buffer, GstVideoFrame *frame,
    const GstCudaNmsDetectorSettings &shared) {
  GstCudaCascade *self = GST_CUDA_CASCADE(detector);
  cv::Mat gray;
  if (!gst_cv_gray_of(frame, &self->priv->gray, &gray))
    return GstCudaNmsDetection::failed(std::string("Unsupported format ") +
                                       gst_video_format_to_string(GST_VIDEO_FRAME_FORMAT(frame)));
  const cudanms::cascade::GrayView view{gray.data, gray.cols, gray.rows, gray.step[0]};
  return detect(self, buffer, shared, view);
}

/* The luma plane, read where it is. */
static GstCudaNmsDetection gst_cuda_cascade_detect_on_device(
    GstCudaNmsDetector *detector, GstBuffer *buffer, const CudaFrame &frame,
    const GstCudaNmsDetectorSettings &shared) {
  const cudanms::cascade::GrayView view{frame.plane(0), frame.width(), frame.height(),
                                        static_cast<size_t>(frame.stride(0)), true};
  return detect(GST_CUDA_CASCADE(detector), buffer, shared, view);
}

/* Formats whose first plane is the luma, which the cascade reads as it is. */
static gboolean gst_cuda_cascade_reads_in_place(GstVideoFormat format) {
  return gst_cv_first_plane_is_luma(format);
}

/* ------------------------------------------------------------------------------------------ */
/* The element: its instance and its class                                                     */
/* ------------------------------------------------------------------------------------------ */

static void gst_cuda_cascade_class_init(GstCudaCascadeClass *klass) {
  GstCudaNmsDetectorClass *detector_class = GST_CUDA_NMS_DETECTOR_CLASS(klass);

  own_private<GstCudaCascade>(klass);

  GstCudaNmsDetectorProperties shared;
  shared.model_default = DEFAULT_MODEL;
  shared.model_blurb =
      "Path of an OpenCV Haar or LBP cascade XML file (Debian package opencv-data); loaded when "
      "the element starts";
  shared.label_blurb =
      "Name of the detected class, announced downstream for overlays and writers; empty: the "
      "model file's name";
  shared.threshold_name = "hit-threshold";
  shared.threshold_blurb =
      "Windows whose level weight (the last stage's sum) is below this are not attached; the "
      "default attaches every window";
  shared.threshold_min = -G_MAXDOUBLE, shared.threshold_max = G_MAXDOUBLE;
  shared.threshold_default = DEFAULT_HIT_THRESHOLD;
  shared.min_size_blurb = "Smallest window, WxH in frame pixels. 0x0: the model's window";
  shared.backend_blurb = "Where the cascade runs";
  shared.device_candidates_blurb =
      "With the CUDA detector, leave the candidates in GPU memory for cudanms to use in place "
      "(readers on the host download them once); false: copy them to host memory each frame";
  gst_cuda_nms_detector_class_install_properties(detector_class, shared);
  PropertyTable<CascadeSettings>(
      G_OBJECT_CLASS(klass),
      locked_member<GstCudaCascade, &GstCudaCascadePrivate::settings, gst_cuda_nms_detector_mutex>)
      .field(g_param_spec_double(
                 "scale-factor", "Scale factor",
                 "Ratio between the window sizes of consecutive scales", 1.01, 4.0,
                 DEFAULT_SCALE_FACTOR,
                 static_cast<GParamFlags>(G_PARAM_READWRITE | GST_PARAM_MUTABLE_PLAYING |
                                          G_PARAM_STATIC_STRINGS)),
             &CascadeSettings::scale_factor);

  gst_cuda_nms_detector_class_add_pad_templates(detector_class, VIDEO_FORMATS, CUDA_FORMATS);
  describe_element(
      klass, "Cascade detector on CUDA", "Filter/Analyzer/Video",
      "Runs an OpenCV Haar or LBP cascade on the GPU (or its CPU twin) and attaches every raw "
      "window with its score as cudanms candidates metadata");

  ELEMENT_VFUNCS(detector_class, gst_cuda_cascade, open, close, fall_back_to_cpu, detect_on_host,
                 detect_on_device, reads_in_place, default_label);
}
