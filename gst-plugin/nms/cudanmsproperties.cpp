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

using Table = PropertyTable<CudaNmsProperties>;

/* A setting whose change makes the NMS context again (backend_generation): where it runs, and
 * with what. */
template <typename Field>
Table::Setter remaking(Field field) {
  return [field](CudaNmsProperties &p, const GValue *value) {
    const auto before = field(p);
    property_value::read(value, &field(p));
    if (field(p) != before) p.settings.backend_generation++;
  };
}

void set_class_groups(CudaNmsProperties &p, const GValue *value) {
  p.class_groups_text = string_value(value);
  p.class_groups_error.clear();
  cudanms::Params check; /* a class in two groups is refused here, not on every frame */
  if (!cudanms::parse_class_groups(p.class_groups_text, &check.class_groups)) {
    p.class_groups_error = "expected class ids like \"2,7;1,3\"";
  } else if (const cudanms::Status valid = cudanms::validate(check); !valid.ok()) {
    p.class_groups_error = valid.message();
  } else {
    p.settings.class_groups = std::move(check.class_groups);
  }
}

void set_labels_file(CudaNmsProperties &p, const GValue *value) {
  p.labels_file = string_value(value);
  p.labels_file_error.clear();
  ClassLabels::Table table;
  if (p.labels_file.empty()) {
    p.settings.labels.reset();
  } else if (ClassLabels::read_file(p.labels_file, &table, &p.labels_file_error)) {
    p.settings.labels = table;
  }
}

}  // namespace

namespace {

const GParamFlags kReadWritePlaying = static_cast<GParamFlags>(
    G_PARAM_READWRITE | GST_PARAM_MUTABLE_PLAYING | G_PARAM_STATIC_STRINGS);

/* Which boxes compete, and how one suppresses another. */
void install_competition(GObjectClass *klass, Table::StateOf properties_of,
                         Table::Changed changed) {
  const GParamFlags rw = kReadWritePlaying;
  const Settings d;
  Table(klass, properties_of, nullptr, changed)
      .field(
          g_param_spec_double("iou-threshold", "Overlap threshold",
                              "Overlap threshold theta: greedy and weighted suppress a box "
                              "overlapped by more than theta, matrix by at least theta, linear "
                              "soft decays above it (the measure is 'overlap')",
                              0.0, 1.0, d.iou_threshold, rw),
          [](auto &p) -> auto & { return p.settings.iou_threshold; })
      .field(
          g_param_spec_enum("overlap", "Overlap measure",
                            "How the overlap of two boxes is measured", GST_TYPE_CUDA_NMS_OVERLAP,
                            static_cast<gint>(d.overlap), rw),
          [](auto &p) -> auto & { return p.settings.overlap; })
      .field(
          g_param_spec_enum("method", "NMS method", "The suppression algorithm",
                            GST_TYPE_CUDA_NMS_METHOD, static_cast<gint>(d.method), rw),
          [](auto &p) -> auto & { return p.settings.method; })
      .row(
          g_param_spec_double("score-threshold", "Score threshold",
                              "Candidates scoring below this are dropped before NMS (and "
                              "counted); method=group, as OpenCV's groupRectangles, looks at no "
                              "score unless this is set",
                              -G_MAXDOUBLE, G_MAXDOUBLE, d.score_threshold, rw),
          [](CudaNmsProperties &p, const GValue *value) {
            p.settings.score_threshold = g_value_get_double(value);
            p.settings.score_threshold_set = true;
          },
          Table::getter([](auto &p) -> auto & { return p.settings.score_threshold; }))
      .field(
          g_param_spec_uint("max-candidates", "Max candidates (Dmax)",
                            "At most this many candidates per frame are processed: the "
                            "best-scoring ones; the rest are counted and reported in a "
                            "rate-limited warning",
                            1, G_MAXUINT32, d.max_candidates, rw),
          [](auto &p) -> auto & { return p.settings.max_candidates; })
      .field(
          g_param_spec_uint("max-detections", "Max detections",
                            "Keep at most this many boxes per frame, best first (0 = no cap)", 0,
                            G_MAXUINT32, d.max_detections, rw),
          [](auto &p) -> auto & { return p.settings.max_detections; })
      .field(
          g_param_spec_boolean("class-agnostic", "Class agnostic",
                               "Boxes of different classes suppress each other too",
                               d.class_agnostic, rw),
          [](auto &p) -> auto & { return p.settings.class_agnostic; })
      .row(g_param_spec_string("class-groups", "Class groups",
                               "Groups of class ids whose boxes suppress one another, ';' "
                               "between groups, ',' between ids (\"2,7;1,3\": car and truck, "
                               "bicycle and motorcycle); other classes only themselves. Invalid "
                               "text is an error when the element starts; ignored with "
                               "class-agnostic",
                               "", rw),
           set_class_groups, Table::getter(&CudaNmsProperties::class_groups_text));
}

/* The methods' own settings: Soft-NMS's decay, the neighbours a kept box needs, grouping. */
void install_method_options(GObjectClass *klass, Table::StateOf properties_of,
                            Table::Changed changed) {
  const GParamFlags rw = kReadWritePlaying;
  const Settings d;
  Table(klass, properties_of, nullptr, changed)
      .field(
          g_param_spec_enum("soft-decay", "Soft-NMS decay", "How method=soft decays scores",
                            GST_TYPE_CUDA_NMS_SOFT_DECAY, static_cast<gint>(d.soft_decay), rw),
          [](auto &p) -> auto & { return p.settings.soft_decay; })
      .field(
          g_param_spec_double("sigma", "Soft-NMS sigma",
                              "The gaussian decay's sigma (method=soft soft-decay=gaussian)", 1e-6,
                              G_MAXFLOAT, d.sigma, rw),
          [](auto &p) -> auto & { return p.settings.sigma; })
      .field(
          g_param_spec_uint("min-neighbors", "Minimum neighbours",
                            "Drop a kept box standing for fewer other candidates (DeepStream's "
                            "minBoxes, OpenCV's minNeighbors): those it suppressed (soft: "
                            "overlapped above iou-threshold, weighted: merged); method=group "
                            "drops classes of this many windows or fewer, and 0 turns its "
                            "grouping off",
                            0, G_MAXUINT, d.min_neighbors, rw),
          [](auto &p) -> auto & { return p.settings.min_neighbors; })
      .field(
          g_param_spec_double("group-eps", "Grouping tolerance",
                              "How far similar windows may lie apart, as a fraction of their "
                              "mean side (method=group, OpenCV's eps)",
                              0.0, G_MAXFLOAT, d.group_eps, rw),
          [](auto &p) -> auto & { return p.settings.group_eps; });
}

/* Where NMS runs: the backend, the GPU, a context shared by streams, timing on the GPU. */
void install_placement(GObjectClass *klass, Table::StateOf properties_of, Table::Changed changed) {
  const GParamFlags rw = kReadWritePlaying;
  const Settings d;
  Table(klass, properties_of, nullptr, changed)
      .row(g_param_spec_enum("backend", "Backend",
                             "Where NMS runs; a change while running takes effect on the next "
                             "frame",
                             GST_TYPE_CUDA_NMS_BACKEND, d.backend, rw),
           remaking([](auto &p) -> auto & { return p.settings.backend; }),
           Table::getter([](auto &p) -> auto & { return p.settings.backend; }))
      .row(g_param_spec_int("gpu-id", "GPU id",
                            "CUDA device index; -1: the device of the pipeline's CUDA context "
                            "(an application's or a neighbour's), device 0 where it has none; a "
                            "change while running takes effect on the next frame",
                            -1, G_MAXINT, d.gpu_id, rw),
           remaking([](auto &p) -> auto & { return p.settings.gpu_id; }),
           Table::getter([](auto &p) -> auto & { return p.settings.gpu_id; }))
      .row(g_param_spec_boolean(
               "batch-streams", "Batch streams",
               "Share one CUDA NMS context with the other cudanms elements that set this on the "
               "same GPU and CUDA context (one per camera stream): frames that arrive while "
               "another runs go to the GPU together, as one batch (one launch sequence, one "
               "synchronisation). A lone frame waits for nothing. Saves GPU memory, but on an "
               "H100 it was slower than each element's own context (README). Device candidates "
               "(cudacascade's) do not batch: they run in place on a CUDA context of the "
               "element's own, as without it. No effect on the CPU backend",
               d.batch_streams, rw),
           remaking([](auto &p) -> auto & { return p.settings.batch_streams; }),
           Table::getter([](auto &p) -> auto & { return p.settings.batch_streams; }))
      /* A context with CUDA events, or without. */
      .row(g_param_spec_boolean("time-gpu", "Time GPU",
                                "With the CUDA backend, time each frame's NMS on the GPU with "
                                "CUDA events (its own work, not the wait for the detector's) into "
                                "the result meta's gpu_time_ns; a few microseconds a frame. A "
                                "frame of a batch (batch-streams) gets an even share of the "
                                "batch's time",
                                d.time_gpu, rw),
           remaking([](auto &p) -> auto & { return p.settings.time_gpu; }),
           Table::getter([](auto &p) -> auto & { return p.settings.time_gpu; }));
}

/* What goes out: the candidates kept or not, statistics, the class labels. */
void install_output(GObjectClass *klass, Table::StateOf properties_of, Table::Changed changed) {
  const GParamFlags rw = kReadWritePlaying;
  const Settings d;
  Table(klass, properties_of, nullptr, changed)
      .field(
          g_param_spec_boolean("keep-candidates", "Keep candidates",
                               "Leave the consumed candidate metas (packed and ROI) on the "
                               "buffer; by default they are removed",
                               d.keep_candidates, rw),
          [](auto &p) -> auto & { return p.settings.keep_candidates; })
      .field(
          g_param_spec_uint("stats-interval", "Stats interval",
                            "Every N frames post an element message 'cudanms-stats' (frames, "
                            "candidates in, detections out, latency p50/p99 in us); 0 = off",
                            0, G_MAXUINT, d.stats_interval, rw),
          [](auto &p) -> auto & { return p.settings.stats_interval; })
      .row(
          g_param_spec_string("labels", "Labels",
                              "Class names by class id, comma-separated (\"person,bicycle,car\": "
                              "class 0 is person): the roi_type and label of kept boxes. Classes "
                              "it does not name take the label their detector announced, else "
                              "their id",
                              "", rw),
          [](CudaNmsProperties &p, const GValue *value) {
            p.labels_text = string_value(value);
            p.settings.labels = ClassLabels::parse_list(p.labels_text);
          },
          Table::getter(&CudaNmsProperties::labels_text))
      .row(g_param_spec_string("labels-file", "Labels file",
                               "A file of class names, one a line, line 1 naming class 0 (as "
                               "coco.names); the same table as labels: the last one set wins. An "
                               "unreadable file is an error when the element starts",
                               "", rw),
           set_labels_file, Table::getter(&CudaNmsProperties::labels_file));
}

}  // namespace

void gst_cuda_nms_install_properties(GObjectClass *klass, Table::StateOf properties_of,
                                     Table::Changed changed) {
  install_competition(klass, properties_of, changed);
  install_method_options(klass, properties_of, changed);
  install_placement(klass, properties_of, changed);
  install_output(klass, properties_of, changed);

  gst_type_mark_as_plugin_api(GST_TYPE_CUDA_NMS_OVERLAP, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_CUDA_NMS_METHOD, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_CUDA_NMS_SOFT_DECAY, static_cast<GstPluginAPIFlags>(0));
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
