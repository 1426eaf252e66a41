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
 * Candidates a GPU detector left in device memory (cudacascade) are used in place when they live
 * in the element's CUDA context, the pipeline's GstCudaContext it shares the GStreamer way: only
 * the kept boxes reach the host. Other device candidates are downloaded once.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 ... ! cvdetect ! cudanms iou-threshold=0.45 method=greedy ! boxoverlay ! ...
 * ]|
 */
#include "gstcudanms.h"

#include <gst/cudanms/cudanmsmeta.h>
#include <gst/video/video.h>

#include <chrono>
#include <mutex>
#include <numeric>

#include "cudanmscontexts.h"
#include "cudanmsintake.h"
#include "cudanmslabels.h"
#include "cudanmsoutput.h"
#include "cudanmsstats.h"
#include "elementcudacontext.h"

GST_DEBUG_CATEGORY(gst_cuda_nms_debug); /* also the helper files' */
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
  PROP_CLASS_GROUPS,
  PROP_SOFT_DECAY,
  PROP_SIGMA,
  PROP_BACKEND,
  PROP_GPU_ID,
  PROP_BATCH_STREAMS,
  PROP_KEEP_CANDIDATES,
  PROP_STATS_INTERVAL,
  PROP_TIME_GPU,
  PROP_LABELS,
  PROP_LABELS_FILE,
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
#define DEFAULT_SOFT_DECAY cudanms::SoftDecay::kGaussian
#define DEFAULT_SIGMA 0.5
#define DEFAULT_BACKEND GST_CUDA_NMS_BACKEND_AUTO
#define DEFAULT_GPU_ID 0
#define DEFAULT_BATCH_STREAMS false
#define DEFAULT_KEEP_CANDIDATES false
#define DEFAULT_STATS_INTERVAL 0
#define DEFAULT_TIME_GPU FALSE

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
  std::vector<std::vector<int32_t>> class_groups;
  cudanms::SoftDecay soft_decay = DEFAULT_SOFT_DECAY;
  double sigma = DEFAULT_SIGMA;
  GstCudaNmsBackend backend = DEFAULT_BACKEND;
  int gpu_id = DEFAULT_GPU_ID;
  bool batch_streams = DEFAULT_BATCH_STREAMS;
  bool keep_candidates = DEFAULT_KEEP_CANDIDATES;
  guint stats_interval = DEFAULT_STATS_INTERVAL;
  bool time_gpu = DEFAULT_TIME_GPU;
  ClassLabels::Table labels;      /* from labels or labels-file, whichever was set last */
  guint64 backend_generation = 0; /* bumped when the context must be made again */
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
  std::mutex lock; /* guards settings, the labels texts and totals */
  Settings settings;
  std::string labels_text;
  std::string labels_file;
  std::string labels_file_error; /* why labels-file could not be read; empty: it could */
  std::string class_groups_text;
  std::string class_groups_error; /* why class-groups is not valid; empty: it is */
  Totals totals;

  /* Streaming thread (and start/stop, which never run concurrently with it) only. */
  GstCudaNmsBackendHooks hooks;
  std::shared_ptr<cudanms::SharedContext> nms; /* its own, or shared (batch-streams) */
  bool nms_shared = false;
  /* With a shared context: the element's own CUDA context for device candidates, made at the
   * first (in_place_context). */
  std::shared_ptr<cudanms::SharedContext> in_place;
  guint64 context_generation = 0;
  int width = 0; /* frame size from the caps; 0: unknown, no clipping */
  int height = 0;
  ElementCudaContext cuda; /* the pipeline's CUDA context, where there is one */
  CandidateIntake intake;
  ClassLabels labels;
  cudanms::Result result; /* reused per frame */
  FrameStats stats;
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
static gboolean gst_cuda_nms_sink_event(GstBaseTransform *trans, GstEvent *event);
static GstFlowReturn gst_cuda_nms_transform_ip(GstBaseTransform *trans, GstBuffer *buf);
static void gst_cuda_nms_set_context(GstElement *element, GstContext *context);
static gboolean gst_cuda_nms_query(GstBaseTransform *trans, GstPadDirection direction,
                                   GstQuery *query);

#define GST_TYPE_CUDA_NMS_OVERLAP (gst_cuda_nms_overlap_get_type())
static GType gst_cuda_nms_overlap_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {static_cast<gint>(cudanms::Overlap::kIoU), "Intersection over union", "iou"},
      {static_cast<gint>(cudanms::Overlap::kIoMin), "Intersection over the smaller area", "iomin"},
      {static_cast<gint>(cudanms::Overlap::kIoS),
       "Intersection over the higher-scoring window's area, +1 pixel convention (Oro et al.)",
       "ios"},
      {static_cast<gint>(cudanms::Overlap::kDIoU),
       "Distance IoU: IoU less the centres' squared distance over the enclosing box's squared "
       "diagonal (YOLO's DIoU-NMS)",
       "diou"},
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
      {static_cast<gint>(cudanms::Method::kSoft),
       "Soft-NMS (OpenCV softNMSBoxes): overlapping boxes' scores decay (soft-decay, sigma) "
       "instead of being dropped; score-threshold is the floor they are dropped below",
       "soft"},
      {static_cast<gint>(cudanms::Method::kWeighted),
       "Weighted NMS (MediaPipe's face detector): greedy, each kept box the score-weighted mean "
       "of itself and the boxes it suppressed",
       "weighted"},
      {0, NULL, NULL}};
  if (g_once_init_enter(&type)) {
    GType t = g_enum_register_static("GstCudaNmsMethod", values);
    g_once_init_leave(&type, t);
  }
  return type;
}

#define GST_TYPE_CUDA_NMS_SOFT_DECAY (gst_cuda_nms_soft_decay_get_type())
static GType gst_cuda_nms_soft_decay_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {static_cast<gint>(cudanms::SoftDecay::kLinear),
       "Linear: a score times (1 - overlap) where the overlap is above iou-threshold", "linear"},
      {static_cast<gint>(cudanms::SoftDecay::kGaussian),
       "Gaussian: a score times exp(-overlap^2 / sigma)", "gaussian"},
      {0, NULL, NULL}};
  if (g_once_init_enter(&type)) {
    GType t = g_enum_register_static("GstCudaNmsSoftDecay", values);
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
                          "Overlap threshold theta: greedy and weighted suppress a box overlapped "
                          "by more than theta, matrix by at least theta, linear soft decays above "
                          "it (the measure is 'overlap')",
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
      gobject_class, PROP_CLASS_GROUPS,
      g_param_spec_string("class-groups", "Class groups",
                          "Groups of class ids whose boxes suppress one another, ';' between "
                          "groups, ',' between ids (\"2,7;1,3\": car and truck, bicycle and "
                          "motorcycle); other classes only themselves. Invalid text is an error "
                          "when the element starts; ignored with class-agnostic",
                          "", rw));
  g_object_class_install_property(
      gobject_class, PROP_SOFT_DECAY,
      g_param_spec_enum("soft-decay", "Soft-NMS decay", "How method=soft decays scores",
                        GST_TYPE_CUDA_NMS_SOFT_DECAY, static_cast<gint>(DEFAULT_SOFT_DECAY), rw));
  g_object_class_install_property(
      gobject_class, PROP_SIGMA,
      g_param_spec_double("sigma", "Soft-NMS sigma",
                          "The gaussian decay's sigma (method=soft soft-decay=gaussian)", 1e-6,
                          G_MAXFLOAT, DEFAULT_SIGMA, rw));
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
      gobject_class, PROP_BATCH_STREAMS,
      g_param_spec_boolean(
          "batch-streams", "Batch streams",
          "Share one CUDA NMS context with the other cudanms elements that set this on the same "
          "GPU and CUDA context (one per camera stream): frames that arrive while another runs "
          "go to the GPU together, as one batch (one launch sequence, one synchronisation). A "
          "lone frame waits for nothing. Saves GPU memory, but on an H100 it was slower than "
          "each element's own context (README). Device candidates (cudacascade's) do not batch: "
          "they run in place on a CUDA context of the element's own, as without it. No effect "
          "on the CPU backend",
          DEFAULT_BATCH_STREAMS, rw));
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
      gobject_class, PROP_TIME_GPU,
      g_param_spec_boolean("time-gpu", "Time GPU",
                           "With the CUDA backend, time each frame's NMS on the GPU with CUDA "
                           "events (its own work, not the wait for the detector's) into the result "
                           "meta's gpu_time_ns; a few microseconds a frame. A frame of a batch "
                           "(batch-streams) gets an even share of the batch's time",
                           DEFAULT_TIME_GPU, rw));
  g_object_class_install_property(
      gobject_class, PROP_LABELS,
      g_param_spec_string("labels", "Labels",
                          "Class names by class id, comma-separated (\"person,bicycle,car\": "
                          "class 0 is person): the roi_type and label of kept boxes. Classes it "
                          "does not name take the label their detector announced, else their id",
                          "", rw));
  g_object_class_install_property(
      gobject_class, PROP_LABELS_FILE,
      g_param_spec_string("labels-file", "Labels file",
                          "A file of class names, one a line, line 1 naming class 0 (as "
                          "coco.names); the same table as labels: the last one set wins. An "
                          "unreadable file is an error when the element starts",
                          "", rw));
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
  trans_class->sink_event = GST_DEBUG_FUNCPTR(gst_cuda_nms_sink_event);
  trans_class->transform_ip = GST_DEBUG_FUNCPTR(gst_cuda_nms_transform_ip);
  trans_class->query = GST_DEBUG_FUNCPTR(gst_cuda_nms_query);
  element_class->set_context = GST_DEBUG_FUNCPTR(gst_cuda_nms_set_context);

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
  std::unique_lock<std::mutex> guard(self->priv->lock);
  Settings &s = self->priv->settings;
  std::string unreadable_labels; /* posted once the lock is released */
  std::string invalid_groups;

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
    case PROP_BATCH_STREAMS: {
      const bool batch_streams = g_value_get_boolean(value);
      if (batch_streams != s.batch_streams) s.backend_generation++;
      s.batch_streams = batch_streams;
      break;
    }
    case PROP_KEEP_CANDIDATES:
      s.keep_candidates = g_value_get_boolean(value);
      break;
    case PROP_STATS_INTERVAL:
      s.stats_interval = g_value_get_uint(value);
      break;
    case PROP_TIME_GPU: {
      const bool time_gpu = g_value_get_boolean(value);
      if (time_gpu != s.time_gpu) s.backend_generation++; /* a context with events */
      s.time_gpu = time_gpu;
      break;
    }
    case PROP_CLASS_GROUPS: {
      const gchar *text = g_value_get_string(value);
      GstCudaNmsPrivate *priv = self->priv;
      priv->class_groups_text = text ? text : "";
      priv->class_groups_error.clear();
      cudanms::Params check; /* a class in two groups is refused here, not on every frame */
      if (!cudanms::parse_class_groups(priv->class_groups_text, &check.class_groups)) {
        priv->class_groups_error = "expected class ids like \"2,7;1,3\"";
      } else if (const cudanms::Status valid = cudanms::validate(check); !valid.ok()) {
        priv->class_groups_error = valid.message();
      } else {
        s.class_groups = std::move(check.class_groups);
      }
      invalid_groups = priv->class_groups_error;
      break;
    }
    case PROP_SOFT_DECAY:
      s.soft_decay = static_cast<cudanms::SoftDecay>(g_value_get_enum(value));
      break;
    case PROP_SIGMA:
      s.sigma = g_value_get_double(value);
      break;
    case PROP_LABELS: {
      const gchar *text = g_value_get_string(value);
      self->priv->labels_text = text ? text : "";
      s.labels = ClassLabels::parse_list(self->priv->labels_text);
      break;
    }
    case PROP_LABELS_FILE: {
      const gchar *path = g_value_get_string(value);
      GstCudaNmsPrivate *priv = self->priv;
      priv->labels_file = path ? path : "";
      priv->labels_file_error.clear();
      ClassLabels::Table table;
      if (priv->labels_file.empty()) {
        s.labels.reset();
      } else if (ClassLabels::read_file(priv->labels_file, &table, &priv->labels_file_error)) {
        s.labels = table;
      } else {
        unreadable_labels = priv->labels_file_error;
      }
      break;
    }
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
  guard.unlock();
  /* Before start, start() makes it an error; while running, the old labels stay, and say so. */
  if (!unreadable_labels.empty() && GST_STATE(self) > GST_STATE_READY) {
    GST_ELEMENT_WARNING(self, RESOURCE, OPEN_READ,
                        ("Could not read labels-file: the labels stay as they were"),
                        ("%s", unreadable_labels.c_str()));
  }
  if (!invalid_groups.empty() && GST_STATE(self) > GST_STATE_READY) {
    GST_ELEMENT_WARNING(self, LIBRARY, SETTINGS,
                        ("Invalid class-groups: the groups stay as they were"),
                        ("%s", invalid_groups.c_str()));
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
    case PROP_BATCH_STREAMS:
      g_value_set_boolean(value, s.batch_streams);
      break;
    case PROP_KEEP_CANDIDATES:
      g_value_set_boolean(value, s.keep_candidates);
      break;
    case PROP_STATS_INTERVAL:
      g_value_set_uint(value, s.stats_interval);
      break;
    case PROP_TIME_GPU:
      g_value_set_boolean(value, s.time_gpu);
      break;
    case PROP_LABELS:
      g_value_set_string(value, self->priv->labels_text.c_str());
      break;
    case PROP_CLASS_GROUPS:
      g_value_set_string(value, self->priv->class_groups_text.c_str());
      break;
    case PROP_SOFT_DECAY:
      g_value_set_enum(value, static_cast<gint>(s.soft_decay));
      break;
    case PROP_SIGMA:
      g_value_set_double(value, s.sigma);
      break;
    case PROP_LABELS_FILE:
      g_value_set_string(value, self->priv->labels_file.c_str());
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

static std::shared_ptr<cudanms::SharedContext> create_cpu_context(GstCudaNms *self) {
  cudanms::ContextOptions options;
  options.backend = cudanms::Backend::kCpu;
  cudanms::Status status;
  auto context = cudanms::Context::create(options, &status);
  if (!context) {
    GST_ERROR_OBJECT(self, "no CPU context: %s", status.message().c_str());
    return nullptr;
  }
  return std::make_shared<cudanms::SharedContext>(std::move(context));
}

/* A CUDA context: the one the elements with batch-streams share, or the element's own. */
static std::shared_ptr<cudanms::SharedContext> create_cuda_context(GstCudaNms *self,
                                                                   const Settings &s,
                                                                   cudanms::Status *status) {
  GstCudaNmsPrivate *priv = self->priv;
  cudanms::ContextOptions options;
  options.backend = cudanms::Backend::kCuda;
  options.device = s.gpu_id;
  options.time_device = s.time_gpu;
  /* In the pipeline's CUDA context (shared with cudacascade, cudaupload, nvh264dec...) where
   * gstreamer-cuda finds or makes one; else in the device's primary context. */
  priv->cuda.ensure(GST_ELEMENT(self), s.gpu_id);
  ElementCudaContext::Scope scope(priv->cuda);
  if (s.batch_streams) {
    return gst_cuda_nms_shared_context(options, priv->cuda.handle(), priv->hooks.create, status);
  }
  auto context = priv->hooks.create(options, status);
  if (!context) return nullptr;
  return std::make_shared<cudanms::SharedContext>(std::move(context));
}

/* Makes the context the settings ask for, unless the current one already is. On FALSE an element
 * error has been posted. */
static gboolean ensure_context(GstCudaNms *self, const Settings &s) {
  GstCudaNmsPrivate *priv = self->priv;
  if (priv->nms && priv->context_generation == s.backend_generation) return TRUE;

  priv->nms.reset();
  priv->in_place.reset();
  priv->nms_shared = false;
  priv->context_generation = s.backend_generation;

  if (s.backend != GST_CUDA_NMS_BACKEND_CPU) {
    std::string why;
    if (priv->hooks.cuda_available(&why)) {
      cudanms::Status status;
      priv->nms = create_cuda_context(self, s, &status);
      if (!priv->nms) why = status.message();
      priv->nms_shared = priv->nms && s.batch_streams;
    }
    if (!priv->nms && s.backend == GST_CUDA_NMS_BACKEND_CUDA) {
      GST_ELEMENT_ERROR(self, RESOURCE, NOT_FOUND,
                        ("backend=cuda but CUDA device %d cannot be used", s.gpu_id),
                        ("%s", why.c_str()));
      return FALSE;
    }
    if (!priv->nms) {
      GST_ELEMENT_WARNING(self, RESOURCE, NOT_FOUND,
                          ("No usable CUDA device: non-maximum suppression runs on the CPU"),
                          ("%s", why.c_str()));
    }
  }
  if (!priv->nms) priv->nms = create_cpu_context(self);
  if (!priv->nms) {
    GST_ELEMENT_ERROR(self, CORE, FAILED, ("Could not create a CPU NMS context"), (NULL));
    return FALSE;
  }
  GST_INFO_OBJECT(self, "NMS runs on %s%s", priv->nms->context()->device_name().c_str(),
                  priv->nms.use_count() > 1 ? ", shared with other cudanms elements" : "");
  return TRUE;
}

static gboolean gst_cuda_nms_start(GstBaseTransform *trans) {
  GstCudaNms *self = GST_CUDA_NMS(trans);
  GstCudaNmsPrivate *priv = self->priv;
  Settings s;
  std::string labels_file, labels_file_error, groups_text, groups_error;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    priv->totals = Totals();
    s = priv->settings;
    labels_file = priv->labels_file;
    labels_file_error = priv->labels_file_error;
    groups_text = priv->class_groups_text;
    groups_error = priv->class_groups_error;
  }
  if (!groups_error.empty()) {
    GST_ELEMENT_ERROR(self, LIBRARY, SETTINGS, ("Invalid class-groups \"%s\"", groups_text.c_str()),
                      ("%s", groups_error.c_str()));
    return FALSE;
  }
  if (!labels_file_error.empty()) {
    GST_ELEMENT_ERROR(self, RESOURCE, OPEN_READ,
                      ("Could not read labels-file \"%s\"", labels_file.c_str()),
                      ("%s", labels_file_error.c_str()));
    return FALSE;
  }
  priv->nms.reset();
  priv->in_place.reset();
  priv->stats.reset();
  priv->width = priv->height = 0;
  priv->intake.set_frame_size(0, 0);
  return ensure_context(self, s);
}

static gboolean gst_cuda_nms_stop(GstBaseTransform *trans) {
  GstCudaNms *self = GST_CUDA_NMS(trans);
  self->priv->nms.reset();
  self->priv->in_place.reset();
  self->priv->cuda.reset();
  self->priv->labels.forget_announced();
  return TRUE;
}

/* The pipeline's CUDA context, handed over by the application or a neighbour... */
static void gst_cuda_nms_set_context(GstElement *element, GstContext *context) {
  GstCudaNms *self = GST_CUDA_NMS(element);
  int gpu_id;
  {
    std::lock_guard<std::mutex> guard(self->priv->lock);
    gpu_id = self->priv->settings.gpu_id;
  }
  self->priv->cuda.set_context(element, context, gpu_id);
  GST_ELEMENT_CLASS(parent_class)->set_context(element, context);
}

/* ...and shared with neighbours asking for it. */
static gboolean gst_cuda_nms_query(GstBaseTransform *trans, GstPadDirection direction,
                                   GstQuery *query) {
  GstCudaNms *self = GST_CUDA_NMS(trans);
  if (self->priv->cuda.handle_query(GST_ELEMENT(self), query)) return TRUE;
  return GST_BASE_TRANSFORM_CLASS(parent_class)->query(trans, direction, query);
}

/* Label announcements of the detector upstream: remembered, and passed on. */
static gboolean gst_cuda_nms_sink_event(GstBaseTransform *trans, GstEvent *event) {
  GstCudaNms *self = GST_CUDA_NMS(trans);
  if (self->priv->labels.learn(event))
    GST_DEBUG_OBJECT(self, "label event %" GST_PTR_FORMAT, event);
  return GST_BASE_TRANSFORM_CLASS(parent_class)->sink_event(trans, event);
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
  self->priv->intake.set_frame_size(self->priv->width, self->priv->height);
  return TRUE;
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
  params.class_groups = s.class_groups;
  params.soft_decay = s.soft_decay;
  params.sigma = static_cast<float>(s.sigma);
  return params;
}

/* Runs NMS; a failing CUDA context is replaced by a CPU one (one warning) and the frame rerun. */
static gboolean run_nms(GstCudaNms *self, const Settings &s, const cudanms::CandidatesView &view,
                        gint64 *latency_ns) {
  GstCudaNmsPrivate *priv = self->priv;
  const cudanms::Params params = params_of(s);
  for (;;) {
    const auto start = std::chrono::steady_clock::now();
    const cudanms::Status status = priv->nms->run(view, params, &priv->result);
    *latency_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
    if (status.ok()) return TRUE;
    const cudanms::Context &context = *priv->nms->context();
    if (context.backend() != cudanms::Backend::kCuda) {
      GST_ELEMENT_ERROR(self, CORE, FAILED, ("Non-maximum suppression failed"),
                        ("%s", status.message().c_str()));
      return FALSE;
    }
    GST_ELEMENT_WARNING(self, RESOURCE, FAILED,
                        ("CUDA non-maximum suppression failed: switching to the CPU"),
                        ("%s failed: %s", context.device_name().c_str(), status.message().c_str()));
    priv->nms = create_cpu_context(self);
    priv->nms_shared = false;
    priv->in_place.reset();
    if (!priv->nms) {
      GST_ELEMENT_ERROR(self, CORE, FAILED, ("Could not create a CPU NMS context"), (NULL));
      return FALSE;
    }
  }
}

/* Where device candidates run in place: the element's context. A shared one (batch-streams)
 * would only put them in turn with the other streams' frames, as a batch takes host frames: the
 * element makes a CUDA context of its own for them at the first, else uses the shared one. */
static cudanms::SharedContext *in_place_context(GstCudaNms *self, const Settings &s) {
  GstCudaNmsPrivate *priv = self->priv;
  if (!priv->nms_shared) return priv->nms.get();
  if (!priv->in_place) {
    Settings own = s;
    own.batch_streams = false;
    cudanms::Status status;
    priv->in_place = create_cuda_context(self, own, &status);
    if (!priv->in_place) {
      GST_WARNING_OBJECT(self,
                         "no CUDA context of its own for device candidates (%s): they run "
                         "on the shared one",
                         status.message().c_str());
      priv->in_place = priv->nms;
    }
  }
  return priv->in_place.get();
}

/* NMS on device candidates where they are (the context's device): the kept values come back
 * with the result, and *view points at them, the result's indices renumbered to match. False on
 * failure: the caller downloads them and runs NMS on the host path. */
static bool run_nms_in_place(GstCudaNms *self, const Settings &s,
                             const cudanms::DeviceCandidatesView &device,
                             cudanms::CandidatesView *view, gint64 *latency_ns) {
  GstCudaNmsPrivate *priv = self->priv;
  const auto start = std::chrono::steady_clock::now();
  const cudanms::Status status =
      in_place_context(self, s)->run(device, params_of(s), &priv->result);
  *latency_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  if (!status.ok()) {
    /* The host path decides: a download that fails too (a producer's count past its buffer) is
     * the stream's error; a CUDA failure moves NMS to the CPU there. */
    GST_WARNING_OBJECT(self, "NMS on the device candidates failed: %s", status.message().c_str());
    return false;
  }
  cudanms::Result &r = priv->result;
  std::iota(r.kept.begin(), r.kept.end(), 0u);
  *view = {r.kept_boxes.data(), r.kept_scores.data(), r.kept_class_ids.data(), r.kept.size()};
  return true;
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

  gint64 latency_ns = 0;
  cudanms::CandidatesView view;
  cudanms::DeviceCandidatesView device;
  if (!priv->intake.device_view(buf, priv->nms->context()->cuda_context(), &device) ||
      !run_nms_in_place(self, s, device, &view, &latency_ns)) {
    std::string error;
    if (!priv->intake.map_all(buf, &error)) {
      GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Could not read the device candidates"),
                        ("%s", error.c_str()));
      return GST_FLOW_ERROR;
    }
    view = priv->intake.gather(buf);
    if (view.count > 0) {
      if (!run_nms(self, s, view, &latency_ns)) return GST_FLOW_ERROR;
    } else {
      /* cleared, not reassigned: their memory serves the next frame */
      priv->result.kept.clear();
      priv->result.kept_boxes.clear();
      priv->result.kept_scores.clear();
      priv->result.kept_class_ids.clear();
      priv->result.kept_points.clear();
      priv->result.counts = cudanms::Counts();
    }
  }
  const cudanms::Counts &counts = priv->result.counts;
  GST_LOG_OBJECT(self,
                 "%" G_GSIZE_FORMAT " in, %" G_GSIZE_FORMAT " invalid, %" G_GSIZE_FORMAT
                 " below score, %" G_GSIZE_FORMAT " over capacity, %" G_GSIZE_FORMAT
                 " kept in %" G_GINT64_FORMAT " ns",
                 counts.in, counts.invalid, counts.below_score, counts.over_capacity, counts.kept,
                 latency_ns);
  priv->stats.note_over_capacity(GST_ELEMENT(self), s.max_candidates, counts.over_capacity);

  /* The view may point into a candidates meta: the result meta copies the kept boxes out
   * before the candidates go. */
  priv->labels.set_table(s.labels);
  const gchar *backend = cudanms::to_string(priv->nms->context()->backend());
  gst_cuda_nms_remove_result_metas(buf);
  GstCudaNmsResultMeta *result = gst_cuda_nms_add_result_meta(buf, view, priv->result, priv->intake,
                                                              priv->labels, latency_ns, backend);
  if (!s.keep_candidates) gst_cuda_nms_remove_candidate_metas(buf);
  if (result) {
    result->gpu_time_ns = static_cast<guint64>(priv->result.device_time_us * 1000.0);
    gst_cuda_nms_add_roi_metas(buf, result, priv->width, priv->height);
  }

  const double latency_us = latency_ns / 1000.0;
  guint64 frames;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    frames = ++priv->totals.frames;
    priv->totals.candidates += counts.in;
    priv->totals.detections += counts.kept;
    priv->totals.last_latency_us = latency_us;
  }
  priv->stats.note_frame(GST_ELEMENT(self), s.stats_interval, counts, latency_us, frames, backend);
  return GST_FLOW_OK;
}

GstCudaNmsBackendHooks gst_cuda_nms_set_backend_hooks_for_testing(
    const GstCudaNmsBackendHooks *new_hooks) {
  std::lock_guard<std::mutex> guard(hooks_lock);
  const GstCudaNmsBackendHooks previous = hooks;
  hooks = new_hooks ? *new_hooks : default_hooks();
  return previous;
}
