/**
 * SECTION:element-cudanms
 * @title: cudanms
 *
 * Non-maximum suppression of a frame's candidate windows, on a CUDA GPU or on the CPU.
 *
 * Candidates come from a #GstCudaNmsCandidatesMeta (all of a frame's windows in packed arrays)
 * and/or #GstVideoRegionOfInterestMeta (score and class from a "detection" param structure,
 * the Intel DL Streamer convention; without one, score 1.0 and a class from the roi_type). The
 * element holds no NMS arithmetic: it clips the boxes to the frame and hands them to the
 * cudanms library (kernels/). The kept boxes leave as a #GstCudaNmsResultMeta, with the frame's
 * counts and the NMS latency, and as one #GstVideoRegionOfInterestMeta per kept box.
 *
 * The element never maps the frame, so it takes video in system memory or in CUDA memory.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 ... ! cvdetect ! cudanms iou-threshold=0.45 method=greedy ! boxoverlay ! ...
 * ]|
 */
#include "gstcudanms.h"

#include <gst/cudanms/cudanmsmeta.h>
#include <gst/video/video.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <vector>

GST_DEBUG_CATEGORY_STATIC(gst_cuda_nms_debug);
#define GST_CAT_DEFAULT gst_cuda_nms_debug

enum {
  PROP_0,
  PROP_IOU_THRESHOLD,
  PROP_OVERLAP,
  PROP_METHOD,
  PROP_SCORE_THRESHOLD,
  PROP_MAX_CANDIDATES,
  PROP_MAX_DETECTIONS,
  PROP_CLASS_AGNOSTIC,
  PROP_BACKEND,
  PROP_GPU_ID,
  PROP_KEEP_CANDIDATES,
  PROP_STATS_INTERVAL,
  PROP_FRAMES,
  PROP_CANDIDATES_TOTAL,
  PROP_DETECTIONS_TOTAL,
  PROP_LAST_LATENCY_US,
};

/* The values of the "backend" property. */
typedef enum {
  GST_CUDA_NMS_BACKEND_AUTO,
  GST_CUDA_NMS_BACKEND_CUDA,
  GST_CUDA_NMS_BACKEND_CPU,
} GstCudaNmsBackend;

#define DEFAULT_IOU_THRESHOLD 0.5
#define DEFAULT_OVERLAP cudanms::Overlap::kIoU
#define DEFAULT_METHOD cudanms::Method::kGreedy
#define DEFAULT_SCORE_THRESHOLD 0.0
#define DEFAULT_MAX_CANDIDATES 4096
#define DEFAULT_MAX_DETECTIONS 0
#define DEFAULT_CLASS_AGNOSTIC false
#define DEFAULT_BACKEND GST_CUDA_NMS_BACKEND_AUTO
#define DEFAULT_GPU_ID 0
#define DEFAULT_KEEP_CANDIDATES false
#define DEFAULT_STATS_INTERVAL 0

/* At most one over-capacity warning in this many microseconds. */
#define CAPACITY_WARNING_PERIOD_US (10 * G_USEC_PER_SEC)
/* The latency percentiles of a stats message are taken over at most this many frames. */
#define LATENCY_WINDOW 4096

#define CAPS_STR "video/x-raw; video/x-raw(memory:CUDAMemory)"

static GstStaticPadTemplate sink_template =
    GST_STATIC_PAD_TEMPLATE("sink", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS(CAPS_STR));
static GstStaticPadTemplate src_template =
    GST_STATIC_PAD_TEMPLATE("src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS(CAPS_STR));

namespace {

bool default_cuda_available(std::string *why) { return cudanms::cuda_available(why); }

GstCudaNmsBackendHooks default_hooks() {
  return {default_cuda_available, cudanms::Context::create};
}

std::mutex hooks_lock;
GstCudaNmsBackendHooks hooks = default_hooks();

/* What the properties say; copied under the lock at the top of each frame. */
struct Settings {
  double iou_threshold = DEFAULT_IOU_THRESHOLD;
  cudanms::Overlap overlap = DEFAULT_OVERLAP;
  cudanms::Method method = DEFAULT_METHOD;
  double score_threshold = DEFAULT_SCORE_THRESHOLD;
  guint max_candidates = DEFAULT_MAX_CANDIDATES;
  guint max_detections = DEFAULT_MAX_DETECTIONS;
  bool class_agnostic = DEFAULT_CLASS_AGNOSTIC;
  GstCudaNmsBackend backend = DEFAULT_BACKEND;
  int gpu_id = DEFAULT_GPU_ID;
  bool keep_candidates = DEFAULT_KEEP_CANDIDATES;
  guint stats_interval = DEFAULT_STATS_INTERVAL;
  guint64 backend_generation = 0; /* bumped when backend or gpu-id change */
};

/* The read-only properties. */
struct Totals {
  guint64 frames = 0;
  guint64 candidates = 0;
  guint64 detections = 0;
  double last_latency_us = 0.0;
};

}  // namespace

struct GstCudaNmsPrivate {
  std::mutex lock; /* guards settings and totals */
  Settings settings;
  Totals totals;

  /* Streaming thread (and start/stop, which never run concurrently with it) only. */
  GstCudaNmsBackendHooks hooks;
  std::unique_ptr<cudanms::Context> context;
  guint64 context_generation = 0;
  int width = 0; /* frame size from the caps; 0: unknown, no clipping */
  int height = 0;

  /* Reused per frame: gathered and clipped candidates, the roi_type of each (0: packed). */
  std::vector<float> boxes;
  std::vector<float> scores;
  std::vector<int32_t> class_ids;
  std::vector<GQuark> roi_types;
  std::vector<GstMeta *> packed_metas;
  std::vector<GstMeta *> roi_metas;
  cudanms::Result result;

  /* Over-capacity warnings. */
  bool capacity_warned = false;
  gint64 capacity_warned_at = 0;
  guint64 capacity_frames = 0;
  guint64 capacity_dropped = 0;

  /* Stats messages. */
  std::vector<double> latencies; /* ring of the interval's latencies, in microseconds */
  std::vector<double> scratch;
  size_t latency_next = 0;
  guint interval_frames = 0;
  guint64 interval_in = 0;
  guint64 interval_out = 0;
};

struct _GstCudaNms {
  GstBaseTransform parent;
  GstCudaNmsPrivate *priv;
};

#define gst_cuda_nms_parent_class parent_class
G_DEFINE_TYPE_WITH_CODE(GstCudaNms, gst_cuda_nms, GST_TYPE_BASE_TRANSFORM,
                        GST_DEBUG_CATEGORY_INIT(gst_cuda_nms_debug, "cudanms", 0,
                                                "cudanms non-maximum suppression element"));
GST_ELEMENT_REGISTER_DEFINE(cudanms, "cudanms", GST_RANK_NONE, GST_TYPE_CUDA_NMS);

static void gst_cuda_nms_finalize(GObject *object);
static void gst_cuda_nms_set_property(GObject *object, guint prop_id, const GValue *value,
                                      GParamSpec *pspec);
static void gst_cuda_nms_get_property(GObject *object, guint prop_id, GValue *value,
                                      GParamSpec *pspec);
static gboolean gst_cuda_nms_start(GstBaseTransform *trans);
static gboolean gst_cuda_nms_stop(GstBaseTransform *trans);
static gboolean gst_cuda_nms_set_caps(GstBaseTransform *trans, GstCaps *incaps, GstCaps *outcaps);
static GstFlowReturn gst_cuda_nms_transform_ip(GstBaseTransform *trans, GstBuffer *buf);

#define GST_TYPE_CUDA_NMS_OVERLAP (gst_cuda_nms_overlap_get_type())
static GType gst_cuda_nms_overlap_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {static_cast<gint>(cudanms::Overlap::kIoU), "Intersection over union", "iou"},
      {static_cast<gint>(cudanms::Overlap::kIoMin), "Intersection over the smaller area", "iomin"},
      {static_cast<gint>(cudanms::Overlap::kIoS),
       "Intersection over the higher-scoring window's area, +1 pixel convention (Oro et al.)",
       "ios"},
      {0, NULL, NULL}};
  if (g_once_init_enter(&type)) {
    GType t = g_enum_register_static("GstCudaNmsOverlap", values);
    g_once_init_leave(&type, t);
  }
  return type;
}

#define GST_TYPE_CUDA_NMS_METHOD (gst_cuda_nms_method_get_type())
static GType gst_cuda_nms_method_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {static_cast<gint>(cudanms::Method::kGreedy), "Greedy NMS (OpenCV NMSBoxes, torchvision nms)",
       "greedy"},
      {static_cast<gint>(cudanms::Method::kMatrix),
       "Map/reduce matrix NMS (Oro et al., ICASSP 2016): suppressed windows still suppress",
       "matrix"},
      {0, NULL, NULL}};
  if (g_once_init_enter(&type)) {
    GType t = g_enum_register_static("GstCudaNmsMethod", values);
    g_once_init_leave(&type, t);
  }
  return type;
}

#define GST_TYPE_CUDA_NMS_BACKEND (gst_cuda_nms_backend_get_type())
static GType gst_cuda_nms_backend_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_CUDA_NMS_BACKEND_AUTO, "CUDA when a device is usable, else the CPU (with a warning)",
       "auto"},
      {GST_CUDA_NMS_BACKEND_CUDA, "CUDA only: an error when no device is usable", "cuda"},
      {GST_CUDA_NMS_BACKEND_CPU, "CPU only", "cpu"},
      {0, NULL, NULL}};
  if (g_once_init_enter(&type)) {
    GType t = g_enum_register_static("GstCudaNmsBackend", values);
    g_once_init_leave(&type, t);
  }
  return type;
}

static void gst_cuda_nms_class_init(GstCudaNmsClass *klass) {
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS(klass);
  const GParamFlags rw = static_cast<GParamFlags>(G_PARAM_READWRITE | GST_PARAM_MUTABLE_PLAYING |
                                                  G_PARAM_STATIC_STRINGS);
  const GParamFlags ro = static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);

  gobject_class->finalize = gst_cuda_nms_finalize;
  gobject_class->set_property = gst_cuda_nms_set_property;
  gobject_class->get_property = gst_cuda_nms_get_property;

  g_object_class_install_property(
      gobject_class, PROP_IOU_THRESHOLD,
      g_param_spec_double("iou-threshold", "Overlap threshold",
                          "Overlap threshold theta: greedy suppresses a box overlapped by more "
                          "than theta, matrix by at least theta (the measure is 'overlap')",
                          0.0, 1.0, DEFAULT_IOU_THRESHOLD, rw));
  g_object_class_install_property(
      gobject_class, PROP_OVERLAP,
      g_param_spec_enum("overlap", "Overlap measure", "How the overlap of two boxes is measured",
                        GST_TYPE_CUDA_NMS_OVERLAP, static_cast<gint>(DEFAULT_OVERLAP), rw));
  g_object_class_install_property(
      gobject_class, PROP_METHOD,
      g_param_spec_enum("method", "NMS method", "The suppression algorithm",
                        GST_TYPE_CUDA_NMS_METHOD, static_cast<gint>(DEFAULT_METHOD), rw));
  g_object_class_install_property(
      gobject_class, PROP_SCORE_THRESHOLD,
      g_param_spec_double("score-threshold", "Score threshold",
                          "Candidates scoring below this are dropped before NMS (and counted)",
                          -G_MAXDOUBLE, G_MAXDOUBLE, DEFAULT_SCORE_THRESHOLD, rw));
  g_object_class_install_property(
      gobject_class, PROP_MAX_CANDIDATES,
      g_param_spec_uint("max-candidates", "Max candidates (Dmax)",
                        "At most this many candidates per frame are processed: the best-scoring "
                        "ones; the rest are counted and reported in a rate-limited warning",
                        1, G_MAXUINT32, DEFAULT_MAX_CANDIDATES, rw));
  g_object_class_install_property(
      gobject_class, PROP_MAX_DETECTIONS,
      g_param_spec_uint("max-detections", "Max detections",
                        "Keep at most this many boxes per frame, best first (0 = no cap)", 0,
                        G_MAXUINT32, DEFAULT_MAX_DETECTIONS, rw));
  g_object_class_install_property(
      gobject_class, PROP_CLASS_AGNOSTIC,
      g_param_spec_boolean("class-agnostic", "Class agnostic",
                           "Boxes of different classes suppress each other too",
                           DEFAULT_CLASS_AGNOSTIC, rw));
  g_object_class_install_property(
      gobject_class, PROP_BACKEND,
      g_param_spec_enum("backend", "Backend",
                        "Where NMS runs; a change while running takes effect on the next frame",
                        GST_TYPE_CUDA_NMS_BACKEND, DEFAULT_BACKEND, rw));
  g_object_class_install_property(
      gobject_class, PROP_GPU_ID,
      g_param_spec_int("gpu-id", "GPU id",
                       "CUDA device index; a change while running takes effect on the next frame",
                       0, G_MAXINT, DEFAULT_GPU_ID, rw));
  g_object_class_install_property(
      gobject_class, PROP_KEEP_CANDIDATES,
      g_param_spec_boolean("keep-candidates", "Keep candidates",
                           "Leave the consumed candidate metas (packed and ROI) on the buffer; "
                           "by default they are removed",
                           DEFAULT_KEEP_CANDIDATES, rw));
  g_object_class_install_property(
      gobject_class, PROP_STATS_INTERVAL,
      g_param_spec_uint("stats-interval", "Stats interval",
                        "Every N frames post an element message 'cudanms-stats' (frames, "
                        "candidates in, detections out, latency p50/p99 in us); 0 = off",
                        0, G_MAXUINT, DEFAULT_STATS_INTERVAL, rw));
  g_object_class_install_property(
      gobject_class, PROP_FRAMES,
      g_param_spec_uint64("frames", "Frames", "Frames processed since the element started", 0,
                          G_MAXUINT64, 0, ro));
  g_object_class_install_property(
      gobject_class, PROP_CANDIDATES_TOTAL,
      g_param_spec_uint64("candidates-total", "Candidates total",
                          "Candidates received since the element started", 0, G_MAXUINT64, 0, ro));
  g_object_class_install_property(
      gobject_class, PROP_DETECTIONS_TOTAL,
      g_param_spec_uint64("detections-total", "Detections total",
                          "Boxes kept since the element started", 0, G_MAXUINT64, 0, ro));
  g_object_class_install_property(
      gobject_class, PROP_LAST_LATENCY_US,
      g_param_spec_double("last-latency-us", "Last latency",
                          "Wall time of the last frame's NMS call, in microseconds", 0.0,
                          G_MAXDOUBLE, 0.0, ro));

  gst_element_class_add_static_pad_template(element_class, &sink_template);
  gst_element_class_add_static_pad_template(element_class, &src_template);
  gst_element_class_set_static_metadata(
      element_class, "Non-maximum suppression", "Filter/Analyzer/Video",
      "Non-maximum suppression of a frame's candidate windows (cudanms candidates meta or "
      "region-of-interest metas) on a CUDA GPU or the CPU; kept boxes leave as metadata",
      "cudanms developers");

  trans_class->start = GST_DEBUG_FUNCPTR(gst_cuda_nms_start);
  trans_class->stop = GST_DEBUG_FUNCPTR(gst_cuda_nms_stop);
  trans_class->set_caps = GST_DEBUG_FUNCPTR(gst_cuda_nms_set_caps);
  trans_class->transform_ip = GST_DEBUG_FUNCPTR(gst_cuda_nms_transform_ip);

  gst_type_mark_as_plugin_api(GST_TYPE_CUDA_NMS_OVERLAP, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_CUDA_NMS_METHOD, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_CUDA_NMS_BACKEND, static_cast<GstPluginAPIFlags>(0));
}

static void gst_cuda_nms_init(GstCudaNms *self) {
  self->priv = new GstCudaNmsPrivate();
  GstCudaNmsPrivate *priv = self->priv;
  /* The defaults, applied here (the member initialisers take them from DEFAULT_*). */
  priv->settings = Settings();
  {
    std::lock_guard<std::mutex> guard(hooks_lock);
    priv->hooks = hooks;
  }
  priv->latencies.reserve(LATENCY_WINDOW);
  priv->scratch.reserve(LATENCY_WINDOW);

  /* Metadata only: in place, never passthrough, so that the buffer is writable for the metas. */
  gst_base_transform_set_in_place(GST_BASE_TRANSFORM(self), TRUE);
  gst_base_transform_set_passthrough(GST_BASE_TRANSFORM(self), FALSE);
  gst_base_transform_set_qos_enabled(GST_BASE_TRANSFORM(self), FALSE);
}

static void gst_cuda_nms_finalize(GObject *object) {
  GstCudaNms *self = GST_CUDA_NMS(object);
  delete self->priv;
  self->priv = nullptr;
  G_OBJECT_CLASS(parent_class)->finalize(object);
}

static void gst_cuda_nms_set_property(GObject *object, guint prop_id, const GValue *value,
                                      GParamSpec *pspec) {
  GstCudaNms *self = GST_CUDA_NMS(object);
  std::lock_guard<std::mutex> guard(self->priv->lock);
  Settings &s = self->priv->settings;

  switch (prop_id) {
    case PROP_IOU_THRESHOLD:
      s.iou_threshold = g_value_get_double(value);
      break;
    case PROP_OVERLAP:
      s.overlap = static_cast<cudanms::Overlap>(g_value_get_enum(value));
      break;
    case PROP_METHOD:
      s.method = static_cast<cudanms::Method>(g_value_get_enum(value));
      break;
    case PROP_SCORE_THRESHOLD:
      s.score_threshold = g_value_get_double(value);
      break;
    case PROP_MAX_CANDIDATES:
      s.max_candidates = g_value_get_uint(value);
      break;
    case PROP_MAX_DETECTIONS:
      s.max_detections = g_value_get_uint(value);
      break;
    case PROP_CLASS_AGNOSTIC:
      s.class_agnostic = g_value_get_boolean(value);
      break;
    case PROP_BACKEND: {
      const auto backend = static_cast<GstCudaNmsBackend>(g_value_get_enum(value));
      if (backend != s.backend) s.backend_generation++;
      s.backend = backend;
      break;
    }
    case PROP_GPU_ID: {
      const int gpu_id = g_value_get_int(value);
      if (gpu_id != s.gpu_id) s.backend_generation++;
      s.gpu_id = gpu_id;
      break;
    }
    case PROP_KEEP_CANDIDATES:
      s.keep_candidates = g_value_get_boolean(value);
      break;
    case PROP_STATS_INTERVAL:
      s.stats_interval = g_value_get_uint(value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
}

static void gst_cuda_nms_get_property(GObject *object, guint prop_id, GValue *value,
                                      GParamSpec *pspec) {
  GstCudaNms *self = GST_CUDA_NMS(object);
  std::lock_guard<std::mutex> guard(self->priv->lock);
  const Settings &s = self->priv->settings;
  const Totals &t = self->priv->totals;

  switch (prop_id) {
    case PROP_IOU_THRESHOLD:
      g_value_set_double(value, s.iou_threshold);
      break;
    case PROP_OVERLAP:
      g_value_set_enum(value, static_cast<gint>(s.overlap));
      break;
    case PROP_METHOD:
      g_value_set_enum(value, static_cast<gint>(s.method));
      break;
    case PROP_SCORE_THRESHOLD:
      g_value_set_double(value, s.score_threshold);
      break;
    case PROP_MAX_CANDIDATES:
      g_value_set_uint(value, s.max_candidates);
      break;
    case PROP_MAX_DETECTIONS:
      g_value_set_uint(value, s.max_detections);
      break;
    case PROP_CLASS_AGNOSTIC:
      g_value_set_boolean(value, s.class_agnostic);
      break;
    case PROP_BACKEND:
      g_value_set_enum(value, s.backend);
      break;
    case PROP_GPU_ID:
      g_value_set_int(value, s.gpu_id);
      break;
    case PROP_KEEP_CANDIDATES:
      g_value_set_boolean(value, s.keep_candidates);
      break;
    case PROP_STATS_INTERVAL:
      g_value_set_uint(value, s.stats_interval);
      break;
    case PROP_FRAMES:
      g_value_set_uint64(value, t.frames);
      break;
    case PROP_CANDIDATES_TOTAL:
      g_value_set_uint64(value, t.candidates);
      break;
    case PROP_DETECTIONS_TOTAL:
      g_value_set_uint64(value, t.detections);
      break;
    case PROP_LAST_LATENCY_US:
      g_value_set_double(value, t.last_latency_us);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
}

/* ------------------------------------------------------------------------------------------ */
/* The NMS context                                                                             */
/* ------------------------------------------------------------------------------------------ */

static std::unique_ptr<cudanms::Context> create_cpu_context(GstCudaNms *self, const Settings &s) {
  cudanms::ContextOptions options;
  options.backend = cudanms::Backend::kCpu;
  cudanms::Status status;
  auto context = cudanms::Context::create(options, &status);
  if (!context) GST_ERROR_OBJECT(self, "no CPU context: %s", status.message().c_str());
  return context;
}

/* Makes the context the settings ask for, unless the current one already is. On FALSE an element
 * error has been posted. */
static gboolean ensure_context(GstCudaNms *self, const Settings &s) {
  GstCudaNmsPrivate *priv = self->priv;
  if (priv->context && priv->context_generation == s.backend_generation) return TRUE;

  priv->context.reset();
  priv->context_generation = s.backend_generation;

  if (s.backend != GST_CUDA_NMS_BACKEND_CPU) {
    std::string why;
    if (priv->hooks.cuda_available(&why)) {
      cudanms::ContextOptions options;
      options.backend = cudanms::Backend::kCuda;
      options.device = s.gpu_id;
      cudanms::Status status;
      priv->context = priv->hooks.create(options, &status);
      if (!priv->context) why = status.message();
    }
    if (!priv->context && s.backend == GST_CUDA_NMS_BACKEND_CUDA) {
      GST_ELEMENT_ERROR(self, RESOURCE, NOT_FOUND,
                        ("backend=cuda but CUDA device %d cannot be used", s.gpu_id),
                        ("%s", why.c_str()));
      return FALSE;
    }
    if (!priv->context) {
      GST_ELEMENT_WARNING(self, RESOURCE, NOT_FOUND,
                          ("No usable CUDA device: non-maximum suppression runs on the CPU"),
                          ("%s", why.c_str()));
    }
  }
  if (!priv->context) priv->context = create_cpu_context(self, s);
  if (!priv->context) {
    GST_ELEMENT_ERROR(self, CORE, FAILED, ("Could not create a CPU NMS context"), (NULL));
    return FALSE;
  }
  GST_INFO_OBJECT(self, "NMS runs on %s", priv->context->device_name().c_str());
  return TRUE;
}

static gboolean gst_cuda_nms_start(GstBaseTransform *trans) {
  GstCudaNms *self = GST_CUDA_NMS(trans);
  GstCudaNmsPrivate *priv = self->priv;
  Settings s;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    priv->totals = Totals();
    s = priv->settings;
  }
  priv->context.reset();
  priv->capacity_warned = false;
  priv->capacity_frames = priv->capacity_dropped = 0;
  priv->latencies.clear();
  priv->latency_next = 0;
  priv->interval_frames = 0;
  priv->interval_in = priv->interval_out = 0;
  priv->width = priv->height = 0;
  return ensure_context(self, s);
}

static gboolean gst_cuda_nms_stop(GstBaseTransform *trans) {
  GstCudaNms *self = GST_CUDA_NMS(trans);
  self->priv->context.reset();
  return TRUE;
}

static gboolean gst_cuda_nms_set_caps(GstBaseTransform *trans, GstCaps *incaps, GstCaps *outcaps) {
  GstCudaNms *self = GST_CUDA_NMS(trans);
  GstVideoInfo info;
  (void)outcaps;
  if (gst_video_info_from_caps(&info, incaps) && GST_VIDEO_INFO_WIDTH(&info) > 0 &&
      GST_VIDEO_INFO_HEIGHT(&info) > 0) {
    self->priv->width = GST_VIDEO_INFO_WIDTH(&info);
    self->priv->height = GST_VIDEO_INFO_HEIGHT(&info);
  } else {
    GST_INFO_OBJECT(self, "no frame size in %" GST_PTR_FORMAT ": boxes are not clipped", incaps);
    self->priv->width = self->priv->height = 0;
  }
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* Candidates in                                                                               */
/* ------------------------------------------------------------------------------------------ */

static bool finite_box(const float *b, float score) {
  return std::isfinite(b[0]) && std::isfinite(b[1]) && std::isfinite(b[2]) && std::isfinite(b[3]) &&
         std::isfinite(score);
}

/* A box the library will judge (finite, non-negative size) that sticks out of the frame. */
static bool needs_clipping(const float *b, float score, int width, int height) {
  if (!finite_box(b, score) || b[2] < b[0] || b[3] < b[1]) return false;
  return b[0] < 0.0f || b[1] < 0.0f || b[2] > width || b[3] > height;
}

/* Clips a box to the frame. A box with no area in common with the frame becomes NaN, so that
 * the library counts it invalid; boxes it judges invalid anyway are left alone. */
static void clip_box(float *b, float score, int width, int height) {
  if (!needs_clipping(b, score, width, height)) return;
  const float w = static_cast<float>(width), h = static_cast<float>(height);
  if (b[2] <= 0.0f || b[3] <= 0.0f || b[0] >= w || b[1] >= h) {
    b[0] = b[1] = b[2] = b[3] = NAN;
    return;
  }
  b[0] = std::max(b[0], 0.0f);
  b[1] = std::max(b[1], 0.0f);
  b[2] = std::min(b[2], w);
  b[3] = std::min(b[3], h);
}

/* The class of a region of interest without a "label_id": from its roi_type, mapped to the
 * negative numbers, which detector label ids (>= 0) never use. */
static int32_t class_of_roi_type(GQuark roi_type) {
  return roi_type == 0 ? 0 : -static_cast<int32_t>(roi_type & 0x7fffffff);
}

static bool by_seqnum(GstMeta *a, GstMeta *b) {
  return gst_meta_get_seqnum(a) < gst_meta_get_seqnum(b);
}

/* Gathers the frame's candidates and clips them. Candidates are numbered (which matters only
 * between equal scores) in the order their metas were added: those of the candidates metas,
 * then the ROI metas. Returns a view straight on the meta's arrays when one candidates meta is
 * the only source and nothing needs clipping; otherwise a view on the element's reused arrays. */
static cudanms::CandidatesView gather_candidates(GstCudaNms *self, GstBuffer *buf,
                                                 bool *from_rois) {
  GstCudaNmsPrivate *priv = self->priv;
  const bool clip = priv->width > 0 && priv->height > 0;
  size_t n_packed = 0;
  gpointer state = nullptr;
  GstMeta *meta;

  priv->packed_metas.clear();
  priv->roi_metas.clear();
  while ((meta = gst_buffer_iterate_meta(buf, &state))) {
    if (meta->info->api == GST_CUDA_NMS_CANDIDATES_META_API_TYPE) {
      priv->packed_metas.push_back(meta);
      n_packed += reinterpret_cast<GstCudaNmsCandidatesMeta *>(meta)->n;
    } else if (meta->info->api == GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE) {
      priv->roi_metas.push_back(meta);
    }
  }
  *from_rois = !priv->roi_metas.empty();

  if (priv->packed_metas.size() == 1 && priv->roi_metas.empty()) {
    auto *only = reinterpret_cast<GstCudaNmsCandidatesMeta *>(priv->packed_metas[0]);
    bool direct = true;
    if (clip) {
      for (guint i = 0; i < only->n && direct; i++)
        direct = !needs_clipping(only->boxes + 4 * static_cast<size_t>(i), only->scores[i],
                                 priv->width, priv->height);
    }
    if (direct) return {only->boxes, only->scores, only->class_ids, only->n};
  }
  std::sort(priv->packed_metas.begin(), priv->packed_metas.end(), by_seqnum);
  std::sort(priv->roi_metas.begin(), priv->roi_metas.end(), by_seqnum);

  const size_t total = n_packed + priv->roi_metas.size();
  priv->boxes.resize(4 * total);
  priv->scores.resize(total);
  priv->class_ids.resize(total);
  priv->roi_types.resize(total);

  size_t k = 0;
  for (GstMeta *m : priv->packed_metas) {
    auto *c = reinterpret_cast<GstCudaNmsCandidatesMeta *>(m);
    std::copy_n(c->boxes, 4 * static_cast<size_t>(c->n), priv->boxes.begin() + 4 * k);
    std::copy_n(c->scores, c->n, priv->scores.begin() + k);
    std::copy_n(c->class_ids, c->n, priv->class_ids.begin() + k);
    std::fill_n(priv->roi_types.begin() + k, c->n, 0);
    k += c->n;
  }
  for (GstMeta *m : priv->roi_metas) {
    auto *roi = reinterpret_cast<GstVideoRegionOfInterestMeta *>(m);
    float *b = priv->boxes.data() + 4 * k;
    b[0] = static_cast<float>(roi->x);
    b[1] = static_cast<float>(roi->y);
    b[2] = static_cast<float>(roi->x + static_cast<guint64>(roi->w));
    b[3] = static_cast<float>(roi->y + static_cast<guint64>(roi->h));
    double confidence = 1.0;
    int32_t class_id = class_of_roi_type(roi->roi_type);
    GstStructure *detection = gst_video_region_of_interest_meta_get_param(roi, "detection");
    if (detection) {
      gint label_id;
      if (!gst_structure_get_double(detection, "confidence", &confidence)) confidence = 1.0;
      if (gst_structure_get_int(detection, "label_id", &label_id)) class_id = label_id;
    }
    priv->scores[k] = static_cast<float>(confidence);
    priv->class_ids[k] = class_id;
    priv->roi_types[k] = roi->roi_type;
    k++;
  }

  if (clip) {
    for (size_t i = 0; i < total; i++)
      clip_box(priv->boxes.data() + 4 * i, priv->scores[i], priv->width, priv->height);
  }
  return {priv->boxes.data(), priv->scores.data(), priv->class_ids.data(), total};
}

/* ------------------------------------------------------------------------------------------ */
/* Metadata out                                                                                */
/* ------------------------------------------------------------------------------------------ */

static gboolean remove_result_metas(GstBuffer *buffer, GstMeta **meta, gpointer user_data) {
  (void)buffer;
  (void)user_data;
  if ((*meta)->info->api == GST_CUDA_NMS_RESULT_META_API_TYPE) *meta = nullptr;
  return TRUE;
}

static gboolean remove_candidate_metas(GstBuffer *buffer, GstMeta **meta, gpointer user_data) {
  (void)buffer;
  (void)user_data;
  const GType api = (*meta)->info->api;
  if (api == GST_CUDA_NMS_CANDIDATES_META_API_TYPE ||
      api == GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE)
    *meta = nullptr;
  return TRUE;
}

static GstCudaNmsResultMeta *add_result_meta(GstCudaNms *self, GstBuffer *buf,
                                             const cudanms::CandidatesView &view,
                                             gint64 latency_ns) {
  const cudanms::Result &result = self->priv->result;
  GstCudaNmsResultMeta *meta =
      gst_buffer_add_cuda_nms_result_meta(buf, static_cast<guint>(result.kept.size()));
  if (!meta) return nullptr;
  for (size_t i = 0; i < result.kept.size(); i++) {
    const size_t index = result.kept[i];
    std::copy_n(view.boxes + 4 * index, 4, meta->boxes + 4 * i);
    meta->scores[i] = view.scores[index];
    meta->class_ids[i] = view.class_ids ? view.class_ids[index] : 0;
  }
  meta->candidates_in = result.counts.in;
  meta->dropped_score = result.counts.below_score;
  meta->invalid = result.counts.invalid;
  meta->dropped_capacity = result.counts.over_capacity;
  meta->kept = result.counts.kept;
  meta->latency_ns = static_cast<guint64>(latency_ns);
  meta->backend = self->priv->context && self->priv->context->backend() == cudanms::Backend::kCuda
                      ? "cuda"
                      : "cpu";
  return meta;
}

/* One GstVideoRegionOfInterestMeta per kept box, for every ROI-aware element downstream. */
static void add_roi_metas(GstCudaNms *self, GstBuffer *buf, const GstCudaNmsResultMeta *result,
                          bool from_rois) {
  GstCudaNmsPrivate *priv = self->priv;
  const double width = priv->width, height = priv->height;
  const bool normalize = priv->width > 0 && priv->height > 0;
  for (guint i = 0; i < result->n_kept; i++) {
    const float *b = result->boxes + 4 * static_cast<size_t>(i);
    const int32_t class_id = result->class_ids[i];
    GQuark roi_type = 0;
    if (from_rois) roi_type = priv->roi_types[priv->result.kept[i]];
    if (roi_type == 0) {
      gchar label[16];
      g_snprintf(label, sizeof(label), "%d", class_id);
      roi_type = g_quark_from_string(label);
    }
    const double x1 = std::max(0.0, std::floor(static_cast<double>(b[0])));
    const double y1 = std::max(0.0, std::floor(static_cast<double>(b[1])));
    const double x2 = std::max(x1, std::ceil(static_cast<double>(b[2])));
    const double y2 = std::max(y1, std::ceil(static_cast<double>(b[3])));
    GstVideoRegionOfInterestMeta *roi = gst_buffer_add_video_region_of_interest_meta_id(
        buf, roi_type, static_cast<guint>(x1), static_cast<guint>(y1), static_cast<guint>(x2 - x1),
        static_cast<guint>(y2 - y1));
    if (!roi) continue;
    GstStructure *detection = gst_structure_new("detection", "confidence", G_TYPE_DOUBLE,
                                                static_cast<double>(result->scores[i]), "label_id",
                                                G_TYPE_INT, static_cast<gint>(class_id), NULL);
    if (normalize) {
      gst_structure_set(detection, "x_min", G_TYPE_DOUBLE, b[0] / width, "y_min", G_TYPE_DOUBLE,
                        b[1] / height, "x_max", G_TYPE_DOUBLE, b[2] / width, "y_max", G_TYPE_DOUBLE,
                        b[3] / height, NULL);
    }
    gst_video_region_of_interest_meta_add_param(roi, detection);
  }
}

/* ------------------------------------------------------------------------------------------ */
/* Warnings and statistics                                                                     */
/* ------------------------------------------------------------------------------------------ */

static void note_over_capacity(GstCudaNms *self, const Settings &s, size_t dropped) {
  GstCudaNmsPrivate *priv = self->priv;
  if (dropped == 0) return;
  priv->capacity_frames++;
  priv->capacity_dropped += dropped;
  const gint64 now = g_get_monotonic_time();
  if (priv->capacity_warned && now - priv->capacity_warned_at < CAPACITY_WARNING_PERIOD_US) {
    GST_DEBUG_OBJECT(self, "%" G_GSIZE_FORMAT " candidates over max-candidates", dropped);
    return;
  }
  GST_ELEMENT_WARNING(
      self, STREAM, FAILED, ("More candidates than max-candidates=%u", s.max_candidates),
      ("%" G_GUINT64_FORMAT " frame(s) had more candidates than max-candidates=%u; the "
       "lowest-scoring %" G_GUINT64_FORMAT " were not processed (counted in the result meta). "
       "Raise max-candidates or score-threshold. At most one such warning every %d s.",
       priv->capacity_frames, s.max_candidates, priv->capacity_dropped,
       static_cast<int>(CAPACITY_WARNING_PERIOD_US / G_USEC_PER_SEC)));
  priv->capacity_warned = true;
  priv->capacity_warned_at = now;
  priv->capacity_frames = priv->capacity_dropped = 0;
}

/* Percentile p (0..1) of the latencies, nearest rank. */
static double percentile(std::vector<double> &values, double p) {
  if (values.empty()) return 0.0;
  size_t rank = static_cast<size_t>(std::ceil(p * values.size()));
  rank = std::min(std::max<size_t>(rank, 1), values.size()) - 1;
  std::nth_element(values.begin(), values.begin() + rank, values.end());
  return values[rank];
}

static void note_stats(GstCudaNms *self, const Settings &s, const cudanms::Counts &counts,
                       double latency_us, guint64 frames) {
  GstCudaNmsPrivate *priv = self->priv;
  if (s.stats_interval == 0) return;
  if (priv->latencies.size() < LATENCY_WINDOW) {
    priv->latencies.push_back(latency_us);
  } else {
    priv->latencies[priv->latency_next] = latency_us;
  }
  priv->latency_next = (priv->latency_next + 1) % LATENCY_WINDOW;
  priv->interval_frames++;
  priv->interval_in += counts.in;
  priv->interval_out += counts.kept;
  if (priv->interval_frames < s.stats_interval) return;

  priv->scratch.assign(priv->latencies.begin(), priv->latencies.end());
  const double p50 = percentile(priv->scratch, 0.50);
  const double p99 = percentile(priv->scratch, 0.99);
  GstStructure *st = gst_structure_new(
      "cudanms-stats", "frames", G_TYPE_UINT64, frames, "interval-frames", G_TYPE_UINT,
      priv->interval_frames, "candidates-in", G_TYPE_UINT64, priv->interval_in, "detections-out",
      G_TYPE_UINT64, priv->interval_out, "latency-p50-us", G_TYPE_DOUBLE, p50, "latency-p99-us",
      G_TYPE_DOUBLE, p99, "backend", G_TYPE_STRING,
      priv->context ? cudanms::to_string(priv->context->backend()) : "none", NULL);
  GST_DEBUG_OBJECT(self, "stats: %" GST_PTR_FORMAT, st);
  gst_element_post_message(GST_ELEMENT(self), gst_message_new_element(GST_OBJECT(self), st));
  priv->latencies.clear();
  priv->latency_next = 0;
  priv->interval_frames = 0;
  priv->interval_in = priv->interval_out = 0;
}

/* ------------------------------------------------------------------------------------------ */
/* The frame                                                                                   */
/* ------------------------------------------------------------------------------------------ */

static cudanms::Params params_of(const Settings &s) {
  cudanms::Params params;
  params.method = s.method;
  params.overlap = s.overlap;
  params.threshold = static_cast<float>(s.iou_threshold);
  params.score_threshold = static_cast<float>(s.score_threshold);
  params.max_candidates = s.max_candidates;
  params.max_detections = s.max_detections;
  params.class_agnostic = s.class_agnostic;
  return params;
}

/* Runs NMS; a failing CUDA context is replaced by a CPU one (one warning) and the frame rerun. */
static gboolean run_nms(GstCudaNms *self, const Settings &s, const cudanms::CandidatesView &view,
                        gint64 *latency_ns) {
  GstCudaNmsPrivate *priv = self->priv;
  const cudanms::Params params = params_of(s);
  for (;;) {
    const auto start = std::chrono::steady_clock::now();
    const cudanms::Status status = priv->context->run(view, params, &priv->result);
    *latency_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
    if (status.ok()) return TRUE;
    if (priv->context->backend() != cudanms::Backend::kCuda) {
      GST_ELEMENT_ERROR(self, CORE, FAILED, ("Non-maximum suppression failed"),
                        ("%s", status.message().c_str()));
      return FALSE;
    }
    GST_ELEMENT_WARNING(
        self, RESOURCE, FAILED, ("CUDA non-maximum suppression failed: switching to the CPU"),
        ("%s failed: %s", priv->context->device_name().c_str(), status.message().c_str()));
    priv->context = create_cpu_context(self, s);
    if (!priv->context) {
      GST_ELEMENT_ERROR(self, CORE, FAILED, ("Could not create a CPU NMS context"), (NULL));
      return FALSE;
    }
  }
}

static GstFlowReturn gst_cuda_nms_transform_ip(GstBaseTransform *trans, GstBuffer *buf) {
  GstCudaNms *self = GST_CUDA_NMS(trans);
  GstCudaNmsPrivate *priv = self->priv;
  Settings s;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    s = priv->settings;
  }

  /* GstBaseTransform hands an in-place, non-passthrough element a writable buffer; were it not,
   * every meta added below would be lost, so refuse loudly rather than silently. */
  if (!gst_buffer_is_writable(buf)) {
    GST_ELEMENT_ERROR(self, CORE, FAILED, ("Buffer is not writable"), (NULL));
    return GST_FLOW_ERROR;
  }
  if (!ensure_context(self, s)) return GST_FLOW_ERROR;

  bool from_rois = false;
  const cudanms::CandidatesView view = gather_candidates(self, buf, &from_rois);
  gint64 latency_ns = 0;
  if (view.count > 0) {
    if (!run_nms(self, s, view, &latency_ns)) return GST_FLOW_ERROR;
  } else {
    priv->result.kept.clear();
    priv->result.counts = cudanms::Counts();
  }
  const cudanms::Counts &counts = priv->result.counts;
  GST_LOG_OBJECT(self,
                 "%" G_GSIZE_FORMAT " in, %" G_GSIZE_FORMAT " invalid, %" G_GSIZE_FORMAT
                 " below score, %" G_GSIZE_FORMAT " over capacity, %" G_GSIZE_FORMAT
                 " kept in %" G_GINT64_FORMAT " ns",
                 counts.in, counts.invalid, counts.below_score, counts.over_capacity, counts.kept,
                 latency_ns);
  note_over_capacity(self, s, counts.over_capacity);

  /* The view may point into a candidates meta: copy the kept boxes out before removing it. */
  gst_buffer_foreach_meta(buf, remove_result_metas, nullptr);
  GstCudaNmsResultMeta *result = add_result_meta(self, buf, view, latency_ns);
  if (!s.keep_candidates) gst_buffer_foreach_meta(buf, remove_candidate_metas, nullptr);
  if (result) add_roi_metas(self, buf, result, from_rois);

  const double latency_us = latency_ns / 1000.0;
  guint64 frames;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    frames = ++priv->totals.frames;
    priv->totals.candidates += counts.in;
    priv->totals.detections += counts.kept;
    priv->totals.last_latency_us = latency_us;
  }
  note_stats(self, s, counts, latency_us, frames);
  return GST_FLOW_OK;
}

GstCudaNmsBackendHooks gst_cuda_nms_set_backend_hooks_for_testing(
    const GstCudaNmsBackendHooks *new_hooks) {
  std::lock_guard<std::mutex> guard(hooks_lock);
  const GstCudaNmsBackendHooks previous = hooks;
  hooks = new_hooks ? *new_hooks : default_hooks();
  return previous;
}
