#include "cudanmsproperties.h"

#include <limits>

namespace {

#define GST_TYPE_CUDA_NMS_OVERLAP (gst_cuda_nms_overlap_get_type())
GType gst_cuda_nms_overlap_get_type(void) {
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
GType gst_cuda_nms_method_get_type(void) {
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
      {static_cast<gint>(cudanms::Method::kGroup),
       "Rectangle grouping (OpenCV groupRectangles, what detectMultiScale returns): similar "
       "windows (group-eps) form classes, each the mean of its members; classes of "
       "min-neighbors members or fewer, and classes inside larger ones, are dropped",
       "group"},
      {0, NULL, NULL}};
  if (g_once_init_enter(&type)) {
    GType t = g_enum_register_static("GstCudaNmsMethod", values);
    g_once_init_leave(&type, t);
  }
  return type;
}

#define GST_TYPE_CUDA_NMS_SOFT_DECAY (gst_cuda_nms_soft_decay_get_type())
GType gst_cuda_nms_soft_decay_get_type(void) {
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

}  // namespace

void CudaNmsProperties::install(GObjectClass *klass) {
  const GParamFlags rw = static_cast<GParamFlags>(G_PARAM_READWRITE | GST_PARAM_MUTABLE_PLAYING |
                                                  G_PARAM_STATIC_STRINGS);
  const GParamFlags ro = static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  const Settings d;

  g_object_class_install_property(
      klass, PROP_IOU_THRESHOLD,
      g_param_spec_double("iou-threshold", "Overlap threshold",
                          "Overlap threshold theta: greedy and weighted suppress a box overlapped "
                          "by more than theta, matrix by at least theta, linear soft decays above "
                          "it (the measure is 'overlap')",
                          0.0, 1.0, d.iou_threshold, rw));
  g_object_class_install_property(
      klass, PROP_OVERLAP,
      g_param_spec_enum("overlap", "Overlap measure", "How the overlap of two boxes is measured",
                        GST_TYPE_CUDA_NMS_OVERLAP, static_cast<gint>(d.overlap), rw));
  g_object_class_install_property(
      klass, PROP_METHOD,
      g_param_spec_enum("method", "NMS method", "The suppression algorithm",
                        GST_TYPE_CUDA_NMS_METHOD, static_cast<gint>(d.method), rw));
  g_object_class_install_property(
      klass, PROP_SCORE_THRESHOLD,
      g_param_spec_double("score-threshold", "Score threshold",
                          "Candidates scoring below this are dropped before NMS (and counted); "
                          "method=group, as OpenCV's groupRectangles, looks at no score unless "
                          "this is set",
                          -G_MAXDOUBLE, G_MAXDOUBLE, d.score_threshold, rw));
  g_object_class_install_property(
      klass, PROP_MAX_CANDIDATES,
      g_param_spec_uint("max-candidates", "Max candidates (Dmax)",
                        "At most this many candidates per frame are processed: the best-scoring "
                        "ones; the rest are counted and reported in a rate-limited warning",
                        1, G_MAXUINT32, d.max_candidates, rw));
  g_object_class_install_property(
      klass, PROP_MAX_DETECTIONS,
      g_param_spec_uint("max-detections", "Max detections",
                        "Keep at most this many boxes per frame, best first (0 = no cap)", 0,
                        G_MAXUINT32, d.max_detections, rw));
  g_object_class_install_property(
      klass, PROP_CLASS_AGNOSTIC,
      g_param_spec_boolean("class-agnostic", "Class agnostic",
                           "Boxes of different classes suppress each other too", d.class_agnostic,
                           rw));
  g_object_class_install_property(
      klass, PROP_CLASS_GROUPS,
      g_param_spec_string("class-groups", "Class groups",
                          "Groups of class ids whose boxes suppress one another, ';' between "
                          "groups, ',' between ids (\"2,7;1,3\": car and truck, bicycle and "
                          "motorcycle); other classes only themselves. Invalid text is an error "
                          "when the element starts; ignored with class-agnostic",
                          "", rw));
  g_object_class_install_property(
      klass, PROP_SOFT_DECAY,
      g_param_spec_enum("soft-decay", "Soft-NMS decay", "How method=soft decays scores",
                        GST_TYPE_CUDA_NMS_SOFT_DECAY, static_cast<gint>(d.soft_decay), rw));
  g_object_class_install_property(
      klass, PROP_SIGMA,
      g_param_spec_double("sigma", "Soft-NMS sigma",
                          "The gaussian decay's sigma (method=soft soft-decay=gaussian)", 1e-6,
                          G_MAXFLOAT, d.sigma, rw));
  g_object_class_install_property(
      klass, PROP_MIN_NEIGHBORS,
      g_param_spec_uint("min-neighbors", "Minimum neighbours",
                        "Drop a kept box standing for fewer other candidates (DeepStream's "
                        "minBoxes, OpenCV's minNeighbors): those it suppressed (soft: overlapped "
                        "above iou-threshold, weighted: merged); method=group drops classes of "
                        "this many windows or fewer, and 0 turns its grouping off",
                        0, G_MAXUINT, d.min_neighbors, rw));
  g_object_class_install_property(
      klass, PROP_GROUP_EPS,
      g_param_spec_double("group-eps", "Grouping tolerance",
                          "How far similar windows may lie apart, as a fraction of their mean "
                          "side (method=group, OpenCV's eps)",
                          0.0, G_MAXFLOAT, d.group_eps, rw));
  g_object_class_install_property(
      klass, PROP_BACKEND,
      g_param_spec_enum("backend", "Backend",
                        "Where NMS runs; a change while running takes effect on the next frame",
                        GST_TYPE_CUDA_NMS_BACKEND, d.backend, rw));
  g_object_class_install_property(
      klass, PROP_GPU_ID,
      g_param_spec_int("gpu-id", "GPU id",
                       "CUDA device index; a change while running takes effect on the next frame",
                       0, G_MAXINT, d.gpu_id, rw));
  g_object_class_install_property(
      klass, PROP_BATCH_STREAMS,
      g_param_spec_boolean(
          "batch-streams", "Batch streams",
          "Share one CUDA NMS context with the other cudanms elements that set this on the same "
          "GPU and CUDA context (one per camera stream): frames that arrive while another runs "
          "go to the GPU together, as one batch (one launch sequence, one synchronisation). A "
          "lone frame waits for nothing. Saves GPU memory, but on an H100 it was slower than "
          "each element's own context (README). Device candidates (cudacascade's) do not batch: "
          "they run in place on a CUDA context of the element's own, as without it. No effect "
          "on the CPU backend",
          d.batch_streams, rw));
  g_object_class_install_property(
      klass, PROP_KEEP_CANDIDATES,
      g_param_spec_boolean("keep-candidates", "Keep candidates",
                           "Leave the consumed candidate metas (packed and ROI) on the buffer; "
                           "by default they are removed",
                           d.keep_candidates, rw));
  g_object_class_install_property(
      klass, PROP_STATS_INTERVAL,
      g_param_spec_uint("stats-interval", "Stats interval",
                        "Every N frames post an element message 'cudanms-stats' (frames, "
                        "candidates in, detections out, latency p50/p99 in us); 0 = off",
                        0, G_MAXUINT, d.stats_interval, rw));
  g_object_class_install_property(
      klass, PROP_TIME_GPU,
      g_param_spec_boolean("time-gpu", "Time GPU",
                           "With the CUDA backend, time each frame's NMS on the GPU with CUDA "
                           "events (its own work, not the wait for the detector's) into the result "
                           "meta's gpu_time_ns; a few microseconds a frame. A frame of a batch "
                           "(batch-streams) gets an even share of the batch's time",
                           d.time_gpu, rw));
  g_object_class_install_property(
      klass, PROP_LABELS,
      g_param_spec_string("labels", "Labels",
                          "Class names by class id, comma-separated (\"person,bicycle,car\": "
                          "class 0 is person): the roi_type and label of kept boxes. Classes it "
                          "does not name take the label their detector announced, else their id",
                          "", rw));
  g_object_class_install_property(
      klass, PROP_LABELS_FILE,
      g_param_spec_string("labels-file", "Labels file",
                          "A file of class names, one a line, line 1 naming class 0 (as "
                          "coco.names); the same table as labels: the last one set wins. An "
                          "unreadable file is an error when the element starts",
                          "", rw));
  g_object_class_install_property(
      klass, PROP_FRAMES,
      g_param_spec_uint64("frames", "Frames", "Frames processed since the element started", 0,
                          G_MAXUINT64, 0, ro));
  g_object_class_install_property(
      klass, PROP_CANDIDATES_TOTAL,
      g_param_spec_uint64("candidates-total", "Candidates total",
                          "Candidates received since the element started", 0, G_MAXUINT64, 0, ro));
  g_object_class_install_property(
      klass, PROP_DETECTIONS_TOTAL,
      g_param_spec_uint64("detections-total", "Detections total",
                          "Boxes kept since the element started", 0, G_MAXUINT64, 0, ro));
  g_object_class_install_property(
      klass, PROP_LAST_LATENCY_US,
      g_param_spec_double("last-latency-us", "Last latency",
                          "Wall time of the last frame's NMS call, in microseconds", 0.0,
                          G_MAXDOUBLE, 0.0, ro));

  gst_type_mark_as_plugin_api(GST_TYPE_CUDA_NMS_OVERLAP, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_CUDA_NMS_METHOD, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_CUDA_NMS_SOFT_DECAY, static_cast<GstPluginAPIFlags>(0));
}

bool CudaNmsProperties::set(guint prop_id, const GValue *value) {
  Settings &s = settings;
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
      s.score_threshold_set = true;
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
      class_groups_text = text ? text : "";
      class_groups_error.clear();
      cudanms::Params check; /* a class in two groups is refused here, not on every frame */
      if (!cudanms::parse_class_groups(class_groups_text, &check.class_groups)) {
        class_groups_error = "expected class ids like \"2,7;1,3\"";
      } else if (const cudanms::Status valid = cudanms::validate(check); !valid.ok()) {
        class_groups_error = valid.message();
      } else {
        s.class_groups = std::move(check.class_groups);
      }
      break;
    }
    case PROP_SOFT_DECAY:
      s.soft_decay = static_cast<cudanms::SoftDecay>(g_value_get_enum(value));
      break;
    case PROP_SIGMA:
      s.sigma = g_value_get_double(value);
      break;
    case PROP_MIN_NEIGHBORS:
      s.min_neighbors = g_value_get_uint(value);
      break;
    case PROP_GROUP_EPS:
      s.group_eps = g_value_get_double(value);
      break;
    case PROP_LABELS: {
      const gchar *text = g_value_get_string(value);
      labels_text = text ? text : "";
      s.labels = ClassLabels::parse_list(labels_text);
      break;
    }
    case PROP_LABELS_FILE: {
      const gchar *path = g_value_get_string(value);
      labels_file = path ? path : "";
      labels_file_error.clear();
      ClassLabels::Table table;
      if (labels_file.empty()) {
        s.labels.reset();
      } else if (ClassLabels::read_file(labels_file, &table, &labels_file_error)) {
        s.labels = table;
      }
      break;
    }
    default:
      return false;
  }
  return true;
}

bool CudaNmsProperties::get(guint prop_id, GValue *value) const {
  const Settings &s = settings;
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
      g_value_set_string(value, labels_text.c_str());
      break;
    case PROP_CLASS_GROUPS:
      g_value_set_string(value, class_groups_text.c_str());
      break;
    case PROP_SOFT_DECAY:
      g_value_set_enum(value, static_cast<gint>(s.soft_decay));
      break;
    case PROP_SIGMA:
      g_value_set_double(value, s.sigma);
      break;
    case PROP_MIN_NEIGHBORS:
      g_value_set_uint(value, s.min_neighbors);
      break;
    case PROP_GROUP_EPS:
      g_value_set_double(value, s.group_eps);
      break;
    case PROP_LABELS_FILE:
      g_value_set_string(value, labels_file.c_str());
      break;
    default:
      return false;
  }
  return true;
}

cudanms::Params Settings::params() const {
  cudanms::Params params;
  params.method = method;
  params.overlap = overlap;
  params.threshold = static_cast<float>(iou_threshold);
  // A cascade's windows score below 0 as often as above, and detectMultiScale groups them all.
  params.score_threshold = method == cudanms::Method::kGroup && !score_threshold_set
                               ? -std::numeric_limits<float>::infinity()
                               : static_cast<float>(score_threshold);
  params.max_candidates = max_candidates;
  params.max_detections = max_detections;
  params.class_agnostic = class_agnostic;
  params.class_groups = class_groups;
  params.soft_decay = soft_decay;
  params.sigma = static_cast<float>(sigma);
  params.min_neighbors = min_neighbors;
  params.group_eps = group_eps;
  return params;
}
