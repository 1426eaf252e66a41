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
#include <mutex>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <vector>

#include "cudaframe.h"
#include "detections.h"
#include "detectorproperties.h"
#include "devicecandidates.h"
#include "elementcudacontext.h"
#include "grayframe.h"

GST_DEBUG_CATEGORY_STATIC(gst_cuda_cascade_debug);
#define GST_CAT_DEFAULT gst_cuda_cascade_debug

enum {
  PROP_0,
  PROP_MODEL,
  PROP_SCALE_FACTOR,
  PROP_MIN_SIZE,
  PROP_MAX_SIZE,
  PROP_HIT_THRESHOLD,
  PROP_LABEL,
  PROP_CLASS_ID,
  PROP_BACKEND,
  PROP_GPU_ID,
  PROP_DEVICE,
  PROP_DEVICE_CANDIDATES,
  PROP_FRAMES_IN_GPU_MEMORY,
};

typedef enum {
  GST_CUDA_CASCADE_BACKEND_AUTO,
  GST_CUDA_CASCADE_BACKEND_CUDA,
  GST_CUDA_CASCADE_BACKEND_CPU,
} GstCudaCascadeBackend;

#define DEFAULT_MODEL "/usr/share/opencv4/haarcascades/haarcascade_frontalface_alt2.xml"
#define DEFAULT_SCALE_FACTOR 1.1
#define DEFAULT_HIT_THRESHOLD (-G_MAXDOUBLE)
#define DEFAULT_BACKEND GST_CUDA_CASCADE_BACKEND_AUTO
#define DEFAULT_GPU_ID 0
#define DEFAULT_DEVICE_CANDIDATES TRUE

/* Device candidates buffers in flight per element at most (frames between cudacascade and the
 * element that frees their meta), and the windows one holds at most (1.5 MiB): far more than a
 * face cascade's raw windows on a 4K frame. A frame finding more makes cudanms fail loudly (its
 * count is kept whole); device-candidates=false has no such bound. */
#define DEVICE_CANDIDATES_MAX_WINDOWS (64u * 1024)

#define VIDEO_FORMATS "{ GRAY8, I420, YV12, NV12, NV21, BGR, RGB, BGRx, BGRA, RGBx, RGBA }"

/* Frames in GPU memory (gstreamer-cuda's GstCudaMemory) are read in place: luma-first formats. */
#ifdef CUDANMS_HAVE_GST_CUDA
#define CUDA_MEMORY_CAPS \
  "; " GST_VIDEO_CAPS_MAKE_WITH_FEATURES("memory:CUDAMemory", "{ GRAY8, I420, YV12, NV12, NV21 }")
#else
#define CUDA_MEMORY_CAPS ""
#endif

static GstStaticPadTemplate sink_template =
    GST_STATIC_PAD_TEMPLATE("sink", GST_PAD_SINK, GST_PAD_ALWAYS,
                            GST_STATIC_CAPS(GST_VIDEO_CAPS_MAKE(VIDEO_FORMATS) CUDA_MEMORY_CAPS));
static GstStaticPadTemplate src_template =
    GST_STATIC_PAD_TEMPLATE("src", GST_PAD_SRC, GST_PAD_ALWAYS,
                            GST_STATIC_CAPS(GST_VIDEO_CAPS_MAKE(VIDEO_FORMATS) CUDA_MEMORY_CAPS));

namespace {

/* What the properties say; copied under the lock at the top of each frame. */
struct Settings {
  std::string model = DEFAULT_MODEL;
  double scale_factor = DEFAULT_SCALE_FACTOR;
  WindowSizes sizes;
  double hit_threshold = DEFAULT_HIT_THRESHOLD;
  DetectorClass detected;
  GstCudaCascadeBackend backend = DEFAULT_BACKEND;
  gint gpu_id = DEFAULT_GPU_ID;
  bool device_candidates = DEFAULT_DEVICE_CANDIDATES;
};

}  // namespace

struct GstCudaCascadePrivate {
  std::mutex lock; /* guards settings and device */
  Settings settings;
  std::string device; /* where the detector runs, once started */
  guint64 frames_in_gpu_memory = 0;

  /* Streaming thread (and start/stop) only. */
  std::shared_ptr<const cudanms::cascade::Model> model;
  std::unique_ptr<cudanms::cascade::Detector> detector;
  cv::Mat gray;
  std::vector<cudanms::cascade::Window> windows;
  std::vector<float> boxes, scores;
  GstCvLabelAnnouncer announcer;
  ElementCudaContext cuda; /* the pipeline's CUDA context, where there is one */
  GstCvDeviceCandidatesPool pool; /* sized for the current frames */
};

struct _GstCudaCascade {
  GstVideoFilter parent;
  GstCudaCascadePrivate *priv;
};

#define gst_cuda_cascade_parent_class parent_class
G_DEFINE_TYPE_WITH_CODE(GstCudaCascade, gst_cuda_cascade, GST_TYPE_VIDEO_FILTER,
                        GST_DEBUG_CATEGORY_INIT(gst_cuda_cascade_debug, "cudacascade", 0,
                                                "Cascade detector on CUDA"));
GST_ELEMENT_REGISTER_DEFINE(cudacascade, "cudacascade", GST_RANK_NONE, GST_TYPE_CUDA_CASCADE);

#define GST_TYPE_CUDA_CASCADE_BACKEND (gst_cuda_cascade_backend_get_type())
static GType gst_cuda_cascade_backend_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_CUDA_CASCADE_BACKEND_AUTO,
       "CUDA when a device is usable, else the CPU twin (with a warning)", "auto"},
      {GST_CUDA_CASCADE_BACKEND_CUDA, "CUDA only: an error when no device is usable", "cuda"},
      {GST_CUDA_CASCADE_BACKEND_CPU, "The CPU twin only", "cpu"},
      {0, NULL, NULL}};
  if (g_once_init_enter(&type)) {
    GType t = g_enum_register_static("GstCudaCascadeBackend", values);
    g_once_init_leave(&type, t);
  }
  return type;
}

static void gst_cuda_cascade_finalize(GObject *object);
static void gst_cuda_cascade_set_property(GObject *object, guint prop_id, const GValue *value,
                                          GParamSpec *pspec);
static void gst_cuda_cascade_get_property(GObject *object, guint prop_id, GValue *value,
                                          GParamSpec *pspec);
static gboolean gst_cuda_cascade_start(GstBaseTransform *trans);
static gboolean gst_cuda_cascade_stop(GstBaseTransform *trans);
static GstFlowReturn gst_cuda_cascade_transform_frame_ip(GstVideoFilter *filter,
                                                         GstVideoFrame *frame);
static GstFlowReturn gst_cuda_cascade_transform_ip(GstBaseTransform *trans, GstBuffer *buffer);
static void gst_cuda_cascade_set_context(GstElement *element, GstContext *context);
static gboolean gst_cuda_cascade_query(GstBaseTransform *trans, GstPadDirection direction,
                                       GstQuery *query);

static void gst_cuda_cascade_class_init(GstCudaCascadeClass *klass) {
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS(klass);
  GstVideoFilterClass *filter_class = GST_VIDEO_FILTER_CLASS(klass);
  const GParamFlags rw = static_cast<GParamFlags>(G_PARAM_READWRITE | GST_PARAM_MUTABLE_PLAYING |
                                                  G_PARAM_STATIC_STRINGS);
  const GParamFlags rw_ready = static_cast<GParamFlags>(
      G_PARAM_READWRITE | GST_PARAM_MUTABLE_READY | G_PARAM_STATIC_STRINGS);

  gobject_class->finalize = gst_cuda_cascade_finalize;
  gobject_class->set_property = gst_cuda_cascade_set_property;
  gobject_class->get_property = gst_cuda_cascade_get_property;

  g_object_class_install_property(
      gobject_class, PROP_MODEL,
      g_param_spec_string("model", "Model",
                          "Path of an OpenCV Haar or LBP cascade XML file (Debian package "
                          "opencv-data); loaded when the element starts",
                          DEFAULT_MODEL, rw_ready));
  g_object_class_install_property(
      gobject_class, PROP_SCALE_FACTOR,
      g_param_spec_double("scale-factor", "Scale factor",
                          "Ratio between the window sizes of consecutive scales", 1.01, 4.0,
                          DEFAULT_SCALE_FACTOR, rw));
  WindowSizes::install(gobject_class, PROP_MIN_SIZE, PROP_MAX_SIZE,
                       "Smallest window, WxH in frame pixels. 0x0: the model's window");
  g_object_class_install_property(
      gobject_class, PROP_HIT_THRESHOLD,
      g_param_spec_double("hit-threshold", "Hit threshold",
                          "Windows whose level weight (the last stage's sum) is below this are "
                          "not attached; the default attaches every window",
                          -G_MAXDOUBLE, G_MAXDOUBLE, DEFAULT_HIT_THRESHOLD, rw));
  DetectorClass::install(gobject_class, PROP_LABEL, PROP_CLASS_ID, "",
                         "Name of the detected class, announced downstream for overlays and "
                         "writers; empty: the model file's name");
  g_object_class_install_property(
      gobject_class, PROP_BACKEND,
      g_param_spec_enum("backend", "Backend", "Where the cascade runs",
                        GST_TYPE_CUDA_CASCADE_BACKEND, DEFAULT_BACKEND, rw_ready));
  g_object_class_install_property(gobject_class, PROP_GPU_ID,
                                  g_param_spec_int("gpu-id", "GPU id", "CUDA device index", 0,
                                                   G_MAXINT, DEFAULT_GPU_ID, rw_ready));
  g_object_class_install_property(
      gobject_class, PROP_DEVICE_CANDIDATES,
      g_param_spec_boolean(
          "device-candidates", "Device candidates",
          "With the CUDA detector, leave the candidates in GPU memory for cudanms to use in place "
          "(readers on the host download them once); false: copy them to host memory each frame",
          DEFAULT_DEVICE_CANDIDATES, rw_ready));
  g_object_class_install_property(
      gobject_class, PROP_FRAMES_IN_GPU_MEMORY,
      g_param_spec_uint64("frames-in-gpu-memory", "Frames in GPU memory",
                          "Frames since start read in place in GPU memory (GstCudaMemory of the "
                          "detector's CUDA context), with no download",
                          0, G_MAXUINT64, 0,
                          static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS)));
  g_object_class_install_property(
      gobject_class, PROP_DEVICE,
      g_param_spec_string("device", "Device",
                          "Where the detector runs once started, e.g. \"cuda:0 (NVIDIA H100 "
                          "80GB HBM3)\" or \"cpu\"; empty before",
                          "", static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS)));

  gst_element_class_add_static_pad_template(element_class, &sink_template);
  gst_element_class_add_static_pad_template(element_class, &src_template);
  gst_element_class_set_static_metadata(
      element_class, "Cascade detector on CUDA", "Filter/Analyzer/Video",
      "Runs an OpenCV Haar or LBP cascade on the GPU (or its CPU twin) and attaches every raw "
      "window with its score as cudanms candidates metadata",
      "cudanms developers");

  trans_class->start = GST_DEBUG_FUNCPTR(gst_cuda_cascade_start);
  trans_class->stop = GST_DEBUG_FUNCPTR(gst_cuda_cascade_stop);
  filter_class->transform_frame_ip = GST_DEBUG_FUNCPTR(gst_cuda_cascade_transform_frame_ip);
  trans_class->transform_ip = GST_DEBUG_FUNCPTR(gst_cuda_cascade_transform_ip);
  trans_class->query = GST_DEBUG_FUNCPTR(gst_cuda_cascade_query);
  element_class->set_context = GST_DEBUG_FUNCPTR(gst_cuda_cascade_set_context);
  gst_type_mark_as_plugin_api(GST_TYPE_CUDA_CASCADE_BACKEND, static_cast<GstPluginAPIFlags>(0));
}

static void gst_cuda_cascade_init(GstCudaCascade *self) {
  self->priv = new GstCudaCascadePrivate();
  self->priv->settings = Settings();
  /* Adds metadata: in place, never passthrough, so that the buffer is writable. */
  gst_base_transform_set_in_place(GST_BASE_TRANSFORM(self), TRUE);
  gst_base_transform_set_passthrough(GST_BASE_TRANSFORM(self), FALSE);
  gst_base_transform_set_qos_enabled(GST_BASE_TRANSFORM(self), FALSE);
}

static void gst_cuda_cascade_finalize(GObject *object) {
  GstCudaCascade *self = GST_CUDA_CASCADE(object);
  delete self->priv;
  self->priv = nullptr;
  G_OBJECT_CLASS(parent_class)->finalize(object);
}

static void gst_cuda_cascade_set_property(GObject *object, guint prop_id, const GValue *value,
                                          GParamSpec *pspec) {
  GstCudaCascade *self = GST_CUDA_CASCADE(object);
  std::lock_guard<std::mutex> guard(self->priv->lock);
  Settings &s = self->priv->settings;
  bool bad_size = false;
  if (s.detected.set(pspec, value)) return;
  if (s.sizes.set(pspec, value, &bad_size)) {
    if (bad_size) {
      GST_WARNING_OBJECT(self, "ignoring %s=\"%s\": expected WxH, e.g. 40x40", pspec->name,
                         g_value_get_string(value));
    }
    return;
  }
  switch (prop_id) {
    case PROP_MODEL: {
      const gchar *model = g_value_get_string(value);
      s.model = model ? model : "";
      break;
    }
    case PROP_SCALE_FACTOR:
      s.scale_factor = g_value_get_double(value);
      break;
    case PROP_HIT_THRESHOLD:
      s.hit_threshold = g_value_get_double(value);
      break;
    case PROP_BACKEND:
      s.backend = static_cast<GstCudaCascadeBackend>(g_value_get_enum(value));
      break;
    case PROP_GPU_ID:
      s.gpu_id = g_value_get_int(value);
      break;
    case PROP_DEVICE_CANDIDATES:
      s.device_candidates = g_value_get_boolean(value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
}

static void gst_cuda_cascade_get_property(GObject *object, guint prop_id, GValue *value,
                                          GParamSpec *pspec) {
  GstCudaCascade *self = GST_CUDA_CASCADE(object);
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
    case PROP_HIT_THRESHOLD:
      g_value_set_double(value, s.hit_threshold);
      break;
    case PROP_BACKEND:
      g_value_set_enum(value, s.backend);
      break;
    case PROP_GPU_ID:
      g_value_set_int(value, s.gpu_id);
      break;
    case PROP_DEVICE:
      g_value_set_string(value, self->priv->device.c_str());
      break;
    case PROP_DEVICE_CANDIDATES:
      g_value_set_boolean(value, s.device_candidates);
      break;
    case PROP_FRAMES_IN_GPU_MEMORY:
      g_value_set_uint64(value, self->priv->frames_in_gpu_memory);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
}

/* ------------------------------------------------------------------------------------------ */
/* The model and the detector                                                                  */
/* ------------------------------------------------------------------------------------------ */

static void set_device(GstCudaCascade *self, const std::string &device) {
  std::lock_guard<std::mutex> guard(self->priv->lock);
  self->priv->device = device;
}

static gboolean gst_cuda_cascade_start(GstBaseTransform *trans) {
  GstCudaCascade *self = GST_CUDA_CASCADE(trans);
  GstCudaCascadePrivate *priv = self->priv;
  Settings s;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    s = priv->settings;
  }
  priv->detector.reset();
  priv->pool.reset();
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    priv->frames_in_gpu_memory = 0;
  }
  priv->announcer.reset();
  cudanms::Status status;
  priv->model = cudanms::cascade::Model::load(s.model, &status);
  if (!priv->model) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("Cannot use model \"%s\"", s.model.c_str()),
                      ("%s. model must be the path of an OpenCV Haar or LBP cascade XML file, "
                       "e.g. " DEFAULT_MODEL " (Debian package opencv-data)",
                       status.message().c_str()));
    return FALSE;
  }
  if (s.backend != GST_CUDA_CASCADE_BACKEND_CPU) {
    cudanms::cascade::DetectorOptions options;
    options.backend = cudanms::Backend::kCuda;
    options.device = s.gpu_id;
    /* In the pipeline's CUDA context (shared with cudanms, cudaupload, nvh264dec...) where
     * gstreamer-cuda finds or makes one; else in the device's primary context. */
    if (cudanms::cuda_available()) priv->cuda.ensure(GST_ELEMENT(self), s.gpu_id);
    ElementCudaContext::Scope scope(priv->cuda);
    priv->detector = cudanms::cascade::Detector::create(priv->model, options, &status);
    if (!priv->detector && s.backend == GST_CUDA_CASCADE_BACKEND_CUDA) {
      GST_ELEMENT_ERROR(self, RESOURCE, OPEN_READ_WRITE,
                        ("backend=cuda but CUDA device %d cannot be used", s.gpu_id),
                        ("%s", status.message().c_str()));
      return FALSE;
    }
    if (!priv->detector) {
      GST_ELEMENT_WARNING(self, RESOURCE, OPEN_READ_WRITE,
                          ("No usable CUDA device: the cascade runs on the CPU"),
                          ("%s", status.message().c_str()));
    }
  }
  if (!priv->detector)
    priv->detector = cudanms::cascade::Detector::create(priv->model, {}, &status);
  if (!priv->detector) {
    GST_ELEMENT_ERROR(self, RESOURCE, FAILED, ("Cannot create the cascade detector"),
                      ("%s", status.message().c_str()));
    return FALSE;
  }
  set_device(self, priv->detector->device_name());
  GST_INFO_OBJECT(self, "model %s (%zu stages) on %s", s.model.c_str(), priv->model->stages.size(),
                  priv->detector->device_name().c_str());
  return TRUE;
}

static gboolean gst_cuda_cascade_stop(GstBaseTransform *trans) {
  GstCudaCascade *self = GST_CUDA_CASCADE(trans);
  self->priv->pool.reset(); /* buffers still downstream keep it until they go */
  self->priv->detector.reset();
  self->priv->cuda.reset();
  self->priv->model.reset();
  set_device(self, "");
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* The frame                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* The frame as 8-bit grey (gst_cv_gray_of), or an element error for a format it does not know. */
static bool gray_of(GstCudaCascade *self, GstVideoFrame *frame, cv::Mat *gray) {
  if (gst_cv_gray_of(frame, &self->priv->gray, gray)) return true;
  GST_ELEMENT_ERROR(
      self, STREAM, FORMAT,
      ("Unsupported format %s", gst_video_format_to_string(GST_VIDEO_FRAME_FORMAT(frame))), (NULL));
  return false;
}

/* Tells downstream the name of the class, once and whenever it changes. */
static void announce_label(GstCudaCascade *self, const Settings &s) {
  GstCudaCascadePrivate *priv = self->priv;
  priv->announcer.announce(GST_BASE_TRANSFORM_SRC_PAD(self), s.detected.class_id,
                           s.detected.label.empty() ? priv->model->name : s.detected.label);
}

/* The frame's windows, from the GPU; a CUDA failure moves the element to the CPU twin for good
 * (frames in GPU memory are then read on the host: *fell_back). */
static cudanms::Status detect(GstCudaCascade *self, const cudanms::cascade::GrayView &view,
                              const cudanms::cascade::DetectParams &params, bool *fell_back) {
  GstCudaCascadePrivate *priv = self->priv;
  cudanms::Status status = priv->detector->detect(view, params, &priv->windows);
  if (status.ok() || priv->detector->backend() != cudanms::Backend::kCuda) return status;
  GST_ELEMENT_WARNING(self, RESOURCE, FAILED, ("The CUDA cascade failed: continuing on the CPU"),
                      ("%s", status.message().c_str()));
  priv->pool.reset();
  priv->detector = cudanms::cascade::Detector::create(priv->model, {}, &status);
  if (!priv->detector) return status;
  set_device(self, priv->detector->device_name());
  *fell_back = view.on_device;
  if (view.on_device) return cudanms::Status::Ok();
  return priv->detector->detect(view, params, &priv->windows);
}

/* A device candidates buffer for a frame of this size: the pool is made, or remade, for the
 * frame's most windows (up to DEVICE_CANDIDATES_MAX_WINDOWS). nullptr (the frame goes the host
 * way) when every buffer is still downstream or the GPU cannot give one. */
static std::shared_ptr<cudanms::DeviceCandidates> device_buffer(
    GstCudaCascade *self, const Settings &s, const cudanms::cascade::GrayView &view,
    const cudanms::cascade::DetectParams &params) {
  GstCudaCascadePrivate *priv = self->priv;
  const size_t most = std::min<size_t>(priv->detector->max_windows(view.width, view.height, params),
                                       DEVICE_CANDIDATES_MAX_WINDOWS);
  if (most == 0) return nullptr;
  ElementCudaContext::Scope scope(priv->cuda); /* the detector's context */
  return priv->pool.acquire(GST_ELEMENT(self), s.gpu_id, most);
}

/* The frame's windows into GPU memory, attached for cudanms to use in place. False when the
 * frame should go the host way (CPU detector, no buffer, candidates already on the buffer, or a
 * CUDA failure, which detect() then meets and handles). */
static bool detect_on_device(GstCudaCascade *self, const Settings &s, GstBuffer *buffer,
                             const cudanms::cascade::GrayView &view,
                             const cudanms::cascade::DetectParams &params) {
  GstCudaCascadePrivate *priv = self->priv;
  if (priv->detector->backend() != cudanms::Backend::kCuda) return false;
  GstCudaNmsCandidatesMeta *existing = gst_buffer_get_cuda_nms_candidates_meta(buffer);
  if (existing && (existing->n > 0 || existing->device)) return false;
  std::shared_ptr<cudanms::DeviceCandidates> out = device_buffer(self, s, view, params);
  if (!out) return false;
  cudanms::cascade::DeviceOutput output;
  output.class_id = s.detected.class_id;
  output.min_score = s.hit_threshold;
  const cudanms::Status status = priv->detector->detect(view, params, output, out.get());
  if (!status.ok()) {
    GST_WARNING_OBJECT(self, "detection into device candidates failed: %s",
                       status.message().c_str());
    return false;
  }
  return gst_cv_attach_device_candidates(buffer, std::move(out), s.gpu_id);
}

/* Detects on the frame's grey pixels (host or GPU memory) and attaches the windows.
 * GST_FLOW_CUSTOM_SUCCESS: the detector fell back to the CPU on a frame in GPU memory, which the
 * caller must then read on the host. */
static GstFlowReturn detect_frame(GstCudaCascade *self, GstBuffer *buffer,
                                  const cudanms::cascade::GrayView &view) {
  GstCudaCascadePrivate *priv = self->priv;
  Settings s;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    s = priv->settings;
  }
  announce_label(self, s);
  cudanms::cascade::DetectParams params;
  params.scale_factor = s.scale_factor;
  params.min_width = s.sizes.min_width, params.min_height = s.sizes.min_height;
  params.max_width = s.sizes.max_width, params.max_height = s.sizes.max_height;
  const gint64 start = g_get_monotonic_time();
  if (s.device_candidates && detect_on_device(self, s, buffer, view, params)) {
    GST_LOG_OBJECT(self, "windows left on the GPU in %.2f ms",
                   (g_get_monotonic_time() - start) / 1000.0);
    return GST_FLOW_OK;
  }
  bool fell_back = false;
  const cudanms::Status status = detect(self, view, params, &fell_back);
  if (!status.ok()) {
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Cascade detection failed"),
                      ("%s", status.message().c_str()));
    return GST_FLOW_ERROR;
  }
  if (fell_back) return GST_FLOW_CUSTOM_SUCCESS;
  priv->boxes.clear();
  priv->scores.clear();
  for (const cudanms::cascade::Window &w : priv->windows) {
    if (w.score < s.hit_threshold) continue;
    priv->boxes.insert(priv->boxes.end(),
                       {static_cast<float>(w.x), static_cast<float>(w.y),
                        static_cast<float>(w.x + w.width), static_cast<float>(w.y + w.height)});
    priv->scores.push_back(static_cast<float>(w.score));
  }
  const guint n = static_cast<guint>(priv->scores.size());
  GST_LOG_OBJECT(self, "%u windows in %.2f ms", n, (g_get_monotonic_time() - start) / 1000.0);

  if (!gst_cv_attach_candidates(buffer, priv->boxes, priv->scores, s.detected.class_id)) {
    GST_ELEMENT_ERROR(self, CORE, FAILED, ("Could not add the candidates meta"), (NULL));
    return GST_FLOW_ERROR;
  }
  return GST_FLOW_OK;
}

/* Frames in system memory (or GPU memory the detector cannot read in place), mapped for reading
 * by gst_cuda_cascade_transform_ip. */
static GstFlowReturn gst_cuda_cascade_transform_frame_ip(GstVideoFilter *filter,
                                                         GstVideoFrame *frame) {
  GstCudaCascade *self = GST_CUDA_CASCADE(filter);
  cv::Mat gray;
  if (!gray_of(self, frame, &gray)) return GST_FLOW_ERROR;
  const cudanms::cascade::GrayView view{gray.data, gray.cols, gray.rows, gray.step[0]};
  const GstFlowReturn ret = detect_frame(self, frame->buffer, view);
  return ret == GST_FLOW_CUSTOM_SUCCESS ? GST_FLOW_ERROR : ret;
}

/* Formats whose first plane is the luma, which the cascade reads as it is. */
static bool luma_first(GstVideoFormat format) {
  switch (format) {
    case GST_VIDEO_FORMAT_GRAY8:
    case GST_VIDEO_FORMAT_I420:
    case GST_VIDEO_FORMAT_YV12:
    case GST_VIDEO_FORMAT_NV12:
    case GST_VIDEO_FORMAT_NV21:
      return true;
    default:
      return false;
  }
}

/* Frames in GstCudaMemory of the detector's CUDA context: the luma plane read where it is. Other
 * frames are mapped for reading only (GstVideoFilter would map them writable, copying frames
 * that other buffers share, e.g. after a tee). */
static GstFlowReturn gst_cuda_cascade_transform_ip(GstBaseTransform *trans, GstBuffer *buffer) {
  GstCudaCascade *self = GST_CUDA_CASCADE(trans);
  GstVideoFilter *filter = GST_VIDEO_FILTER(trans);
  if (!filter->negotiated) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, (NULL), ("unknown format"));
    return GST_FLOW_NOT_NEGOTIATED;
  }
  {
    CudaFrame device_frame;
    if (self->priv->detector && device_frame.map(buffer, self->priv->detector->cuda_context()) &&
        luma_first(device_frame.format())) {
      const cudanms::cascade::GrayView view{device_frame.plane(0), device_frame.width(),
                                            device_frame.height(),
                                            static_cast<size_t>(device_frame.stride(0)), true};
      const GstFlowReturn ret = detect_frame(self, buffer, view);
      if (ret == GST_FLOW_OK) {
        std::lock_guard<std::mutex> guard(self->priv->lock);
        self->priv->frames_in_gpu_memory++;
      }
      if (ret != GST_FLOW_CUSTOM_SUCCESS) return ret;
    }
  }
  GstVideoFrame frame;
  /* NO_REF: the buffer stays writable for the meta. */
  if (!gst_video_frame_map(
          &frame, &filter->in_info, buffer,
          static_cast<GstMapFlags>(GST_MAP_READ | GST_VIDEO_FRAME_MAP_FLAG_NO_REF))) {
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Could not read the frame"), (NULL));
    return GST_FLOW_ERROR;
  }
  const GstFlowReturn ret = gst_cuda_cascade_transform_frame_ip(filter, &frame);
  gst_video_frame_unmap(&frame);
  return ret;
}

/* The pipeline's CUDA context, handed over by the application or a neighbour... */
static void gst_cuda_cascade_set_context(GstElement *element, GstContext *context) {
  GstCudaCascade *self = GST_CUDA_CASCADE(element);
  int gpu_id;
  {
    std::lock_guard<std::mutex> guard(self->priv->lock);
    gpu_id = self->priv->settings.gpu_id;
  }
  self->priv->cuda.set_context(element, context, gpu_id);
  GST_ELEMENT_CLASS(parent_class)->set_context(element, context);
}

/* ...and shared with neighbours asking for it. */
static gboolean gst_cuda_cascade_query(GstBaseTransform *trans, GstPadDirection direction,
                                       GstQuery *query) {
  GstCudaCascade *self = GST_CUDA_CASCADE(trans);
  if (self->priv->cuda.handle_query(GST_ELEMENT(self), query)) return TRUE;
  return GST_BASE_TRANSFORM_CLASS(parent_class)->query(trans, direction, query);
}
