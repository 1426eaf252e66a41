#include "gstcudanmsdetector.h"

#include <cudanms/bounded_file.h>
#include <gst/cudanms/cudanmsmeta.h>

#include <fstream>
#include <vector>

#include "cudaframe.h"
#include "detections.h"
#include "devicecandidates.h"
#include "elementclass.h"
#include "elementcudacontext.h"
#include "gpufailure.h"
#include "propertytable.h"

GST_DEBUG_CATEGORY_STATIC(gst_cuda_nms_detector_debug);
#define GST_CAT_DEFAULT gst_cuda_nms_detector_debug

struct DetectorState {
  std::mutex lock; /* guards settings, snapshot, device and frames_in_gpu_memory */
  GstCudaNmsDetectorSettings settings;
  /* What the frames read: a copy of settings, made again after a property changed, so that a
   * frame takes a reference, not a copy of its strings. */
  std::shared_ptr<const GstCudaNmsDetectorSettings> snapshot;
  int gpu = 0;        /* the snapshots' gpu_id: the device it runs on (start() resolves -1) */
  std::string device; /* where the detector runs, once started */
  guint64 frames_in_gpu_memory = 0;

  /* Streaming thread (and start/stop) only. */
  void *device_context = nullptr; /* the CUcontext of frames read in place */
  ElementCudaContext cuda;        /* the pipeline's, where there is one */
  GstCvDeviceCandidatesPool pool;
  std::vector<std::string> labels;       /* the labels file's, by class id */
  std::vector<std::string> model_labels; /* the network's own (set_labels), by class id */
  std::vector<GstCvLabelAnnouncer> announcers;
};

typedef struct {
  DetectorState *state;
} GstCudaNmsDetectorPrivate;

G_DEFINE_ABSTRACT_TYPE_WITH_CODE(GstCudaNmsDetector, gst_cuda_nms_detector, GST_TYPE_VIDEO_FILTER,
                                 G_ADD_PRIVATE(GstCudaNmsDetector);
                                 GST_DEBUG_CATEGORY_INIT(gst_cuda_nms_detector_debug,
                                                         "cudanmsdetector", 0,
                                                         "Base class of the detectors"));

static DetectorState *priv_of(GstCudaNmsDetector *self) {
  return static_cast<GstCudaNmsDetectorPrivate *>(gst_cuda_nms_detector_get_instance_private(self))
      ->state;
}

static void gst_cuda_nms_detector_constructed(GObject *object);
static void gst_cuda_nms_detector_finalize(GObject *object);
static gboolean gst_cuda_nms_detector_start(GstBaseTransform *trans);
static gboolean gst_cuda_nms_detector_stop(GstBaseTransform *trans);
static GstFlowReturn gst_cuda_nms_detector_transform_ip(GstBaseTransform *trans, GstBuffer *buffer);
static void gst_cuda_nms_detector_set_context(GstElement *element, GstContext *context);
static gboolean gst_cuda_nms_detector_query(GstBaseTransform *trans, GstPadDirection direction,
                                            GstQuery *query);

static void gst_cuda_nms_detector_class_init(GstCudaNmsDetectorClass *klass) {
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS(klass);

  gobject_class->constructed = gst_cuda_nms_detector_constructed;
  gobject_class->finalize = gst_cuda_nms_detector_finalize;
  trans_class->start = GST_DEBUG_FUNCPTR(gst_cuda_nms_detector_start);
  trans_class->stop = GST_DEBUG_FUNCPTR(gst_cuda_nms_detector_stop);
  trans_class->transform_ip = GST_DEBUG_FUNCPTR(gst_cuda_nms_detector_transform_ip);
  trans_class->query = GST_DEBUG_FUNCPTR(gst_cuda_nms_detector_query);
  element_class->set_context = GST_DEBUG_FUNCPTR(gst_cuda_nms_detector_set_context);
  gst_type_mark_as_plugin_api(GST_TYPE_CUDA_NMS_DETECTOR, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_CUDA_NMS_BACKEND, static_cast<GstPluginAPIFlags>(0));
}

static void gst_cuda_nms_detector_init(GstCudaNmsDetector *self) {
  static_cast<GstCudaNmsDetectorPrivate *>(gst_cuda_nms_detector_get_instance_private(self))
      ->state = new DetectorState();
  /* Adds metadata: in place, never passthrough, so that the buffer is writable. */
  gst_base_transform_set_in_place(GST_BASE_TRANSFORM(self), TRUE);
  gst_base_transform_set_passthrough(GST_BASE_TRANSFORM(self), FALSE);
  gst_base_transform_set_qos_enabled(GST_BASE_TRANSFORM(self), FALSE);
}

/* The shared properties, marked so that constructed() finds them among the subclass's. */
static GQuark shared_quark() {
  static const GQuark quark = g_quark_from_static_string("cudanms-detector-shared");
  return quark;
}

/* The defaults of the shared properties as the subclass installed them (its label, its
 * threshold's), applied once its class is the object's. */
static void gst_cuda_nms_detector_constructed(GObject *object) {
  guint n = 0;
  GParamSpec **specs = g_object_class_list_properties(G_OBJECT_GET_CLASS(object), &n);
  for (guint i = 0; i < n; i++) {
    if (!g_param_spec_get_qdata(specs[i], shared_quark()) || !(specs[i]->flags & G_PARAM_WRITABLE))
      continue;
    GValue value = G_VALUE_INIT;
    g_value_init(&value, specs[i]->value_type);
    g_param_value_set_default(specs[i], &value);
    g_object_set_property(object, specs[i]->name, &value);
    g_value_unset(&value);
  }
  g_free(specs);
  G_OBJECT_CLASS(gst_cuda_nms_detector_parent_class)->constructed(object);
}

static void gst_cuda_nms_detector_finalize(GObject *object) {
  delete priv_of(GST_CUDA_NMS_DETECTOR(object));
  G_OBJECT_CLASS(gst_cuda_nms_detector_parent_class)->finalize(object);
}

/* ------------------------------------------------------------------------------------------ */
/* The shared properties                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* A window size's property: "WxH"; anything else leaves the size as it was, with a warning. */
static void set_window_size(const GValue *value, gint *width, gint *height) {
  const gchar *text = g_value_get_string(value);
  if (!text) {
    *width = *height = 0;
  } else if (!parse_window_size(text, width, height)) {
    GST_WARNING("ignoring size \"%s\": expected WxH, e.g. 40x40", text);
  }
}

/* A property every detector has (the detector base's table): its spec marked as such. */
static GParamSpec *shared(GParamSpec *pspec) {
  g_param_spec_set_qdata(pspec, shared_quark(), GINT_TO_POINTER(1));
  return pspec;
}

static const GParamFlags kReadWrite = static_cast<GParamFlags>(
    G_PARAM_READWRITE | GST_PARAM_MUTABLE_PLAYING | G_PARAM_STATIC_STRINGS);
static const GParamFlags kReadWriteReady =
    static_cast<GParamFlags>(G_PARAM_READWRITE | GST_PARAM_MUTABLE_READY | G_PARAM_STATIC_STRINGS);

/* A sliding-window detector's smallest and largest window, "WxH". */
static void add_window_sizes(PropertyTable<DetectorState> &table,
                             const GstCudaNmsDetectorProperties &p) {
  const GParamFlags rw = kReadWrite;
  table
      .row(
          shared(g_param_spec_string("min-size", "Minimum size", p.min_size_blurb, "0x0", rw)),
          [](DetectorState &s, const GValue *value) {
            set_window_size(value, &s.settings.sizes.min_width, &s.settings.sizes.min_height);
          },
          [](const DetectorState &s, GValue *value) {
            const WindowSizes &z = s.settings.sizes;
            g_value_take_string(value, g_strdup_printf("%dx%d", z.min_width, z.min_height));
          })
      .row(
          shared(g_param_spec_string(
              "max-size", "Maximum size",
              "Largest window, WxH in frame pixels. 0x0: as large as the frame", "0x0", rw)),
          [](DetectorState &s, const GValue *value) {
            set_window_size(value, &s.settings.sizes.max_width, &s.settings.sizes.max_height);
          },
          [](const DetectorState &s, GValue *value) {
            const WindowSizes &z = s.settings.sizes;
            g_value_take_string(value, g_strdup_printf("%dx%d", z.max_width, z.max_height));
          });
}

/* Where the detector runs (backend, gpu-id, where its candidates stay) and what it found. */
static void add_device(PropertyTable<DetectorState> &table, const GstCudaNmsDetectorProperties &p) {
  const GParamFlags rw_ready = kReadWriteReady;
  const GParamFlags ro = static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  table
      .field(
          shared(g_param_spec_enum("backend", "Backend", p.backend_blurb, GST_TYPE_CUDA_NMS_BACKEND,
                                   GST_CUDA_NMS_BACKEND_AUTO, rw_ready)),
          [](auto &s) -> auto & { return s.settings.backend; })
      .field(
          shared(
              g_param_spec_int("gpu-id", "GPU id",
                               "CUDA device index; -1: the device of the pipeline's CUDA context "
                               "(an application's or a neighbour's), device 0 where it has none",
                               -1, G_MAXINT, -1, rw_ready)),
          [](auto &s) -> auto & { return s.settings.gpu_id; })
      .field(
          shared(g_param_spec_boolean("device-candidates", "Device candidates",
                                      p.device_candidates_blurb, TRUE, rw_ready)),
          [](auto &s) -> auto & { return s.settings.device_candidates; });
  table
      .read_only(g_param_spec_string("device", "Device",
                                     "Where the detector runs once started, e.g. \"cuda:0 "
                                     "(NVIDIA H100 80GB HBM3)\" or \"cpu\"; empty before",
                                     "", ro),
                 [](const DetectorState &priv, GValue *value) {
                   g_value_set_string(value, priv.device.c_str());
                 })
      .read_only(g_param_spec_uint64("frames-in-gpu-memory", "Frames in GPU memory",
                                     "Frames since start read in place in GPU memory "
                                     "(GstCudaMemory of the detector's CUDA context), with no "
                                     "download",
                                     0, G_MAXUINT64, 0, ro),
                 [](const DetectorState &priv, GValue *value) {
                   g_value_set_uint64(value, priv.frames_in_gpu_memory);
                 });
}

void gst_cuda_nms_detector_class_install_properties(GstCudaNmsDetectorClass *klass,
                                                    const GstCudaNmsDetectorProperties &p) {
  const GParamFlags rw = kReadWrite, rw_ready = kReadWriteReady;
  /* Every change makes the frames' copy of the settings again. */
  PropertyTable<DetectorState> table(
      G_OBJECT_CLASS(klass),
      [](GObject *object) {
        DetectorState *priv = priv_of(GST_CUDA_NMS_DETECTOR(object));
        return Locked<DetectorState>{priv, &priv->lock};
      },
      [](DetectorState &priv) { priv.snapshot.reset(); });
  if (p.model_blurb)
    table.field(
        shared(g_param_spec_string("model", "Model", p.model_blurb, p.model_default, rw_ready)),
        [](auto &s) -> auto & { return s.settings.model; });
  table
      .field(
          shared(g_param_spec_string("label", "Label", p.label_blurb, p.label_default, rw)),
          [](auto &s) -> auto & { return s.settings.detected.label; })
      .field(
          shared(g_param_spec_int("class-id", "Class id", "Class id of the candidates it attaches",
                                  0, G_MAXINT, 0, rw)),
          [](auto &s) -> auto & { return s.settings.detected.class_id; })
      .field(
          shared(g_param_spec_double(p.threshold_name, p.threshold_name, p.threshold_blurb,
                                     p.threshold_min, p.threshold_max, p.threshold_default, rw)),
          [](auto &s) -> auto & { return s.settings.threshold; });
  if (p.min_size_blurb) add_window_sizes(table, p);
  if (p.labels_file_blurb)
    table.field(
        shared(
            g_param_spec_string("labels-file", "Labels file", p.labels_file_blurb, "", rw_ready)),
        [](auto &s) -> auto & { return s.settings.labels_file; });
  if (p.backend_blurb) add_device(table, p);
}

void gst_cuda_nms_detector_class_add_pad_templates(GstCudaNmsDetectorClass *klass,
                                                   const gchar *formats,
                                                   const gchar *cuda_formats) {
  const gchar *video = "video/x-raw%s, format = (string) %s, width = " GST_VIDEO_SIZE_RANGE
                       ", height = " GST_VIDEO_SIZE_RANGE ", framerate = " GST_VIDEO_FPS_RANGE;
  gchar *system = g_strdup_printf(video, "", formats);
  gchar *text = system;
#ifdef CUDANMS_HAVE_GST_CUDA
  if (cuda_formats) {
    gchar *gpu = g_strdup_printf(video, "(memory:CUDAMemory)", cuda_formats);
    text = g_strconcat(system, "; ", gpu, nullptr);
    g_free(gpu);
    g_free(system);
  }
#else
  (void)cuda_formats;
#endif
  add_filter_pads(klass, text);
  g_free(text);
}

std::unique_lock<std::mutex> gst_cuda_nms_detector_lock(GstCudaNmsDetector *self) {
  return std::unique_lock<std::mutex>(priv_of(self)->lock);
}

std::mutex *gst_cuda_nms_detector_mutex(GObject *detector) {
  return &priv_of(GST_CUDA_NMS_DETECTOR(detector))->lock;
}

std::shared_ptr<const GstCudaNmsDetectorSettings> gst_cuda_nms_detector_settings(
    GstCudaNmsDetector *self) {
  DetectorState *priv = priv_of(self);
  std::lock_guard<std::mutex> guard(priv->lock);
  if (!priv->snapshot) {
    auto snapshot = std::make_shared<GstCudaNmsDetectorSettings>(priv->settings);
    snapshot->gpu_id = priv->gpu;
    priv->snapshot = std::move(snapshot);
  }
  return priv->snapshot;
}

/* ------------------------------------------------------------------------------------------ */
/* Start and stop                                                                              */
/* ------------------------------------------------------------------------------------------ */

void gst_cuda_nms_detector_set_device(GstCudaNmsDetector *self, const std::string &name,
                                      void *cuda_context) {
  DetectorState *priv = priv_of(self);
  priv->device_context = cuda_context;
  std::lock_guard<std::mutex> guard(priv->lock);
  priv->device = name;
}

bool gst_cuda_nms_detector_on_cuda(GstCudaNmsDetector *self) {
  return priv_of(self)->device_context != nullptr;
}

ElementCudaContext &gst_cuda_nms_detector_cuda_context(GstCudaNmsDetector *self) {
  return priv_of(self)->cuda;
}

/* Reads a labels file: one name per line, line N naming class id N, blank lines naming none. */
static bool read_labels(const std::string &path, std::vector<std::string> *labels,
                        std::string *why) {
  labels->clear();
  if (path.empty()) return true;
  if (!cudanms::check_bounded_file(path, cudanms::kModelFileLimit, why)) return false;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    labels->push_back(line);
  }
  return true;
}

static void close_detector(GstCudaNmsDetector *self) {
  DetectorState *priv = priv_of(self);
  GST_CUDA_NMS_DETECTOR_GET_CLASS(self)->close(self);
  priv->pool.reset(); /* buffers still downstream keep it until they go */
  priv->cuda.reset();
  gst_cuda_nms_detector_set_device(self, "", nullptr);
}

/* In the pipeline's CUDA context (shared with cudanms, cudaupload, nvh264dec...) where
 * gstreamer-cuda finds or makes one, on its device; else the library works in the device's
 * primary one. The settings' copies from then on say that device. */
static void find_cuda_context(GstCudaNmsDetector *self) {
  DetectorState *priv = priv_of(self);
  gint gpu_id = 0;
  bool on_cpu = false;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    gpu_id = priv->settings.gpu_id;
    on_cpu = priv->settings.backend == GST_CUDA_NMS_BACKEND_CPU;
  }
  if (!on_cpu && cudanms::cuda_available()) priv->cuda.ensure(GST_ELEMENT(self), gpu_id);
  /* Not under the lock: the context's own is taken before it (set_context). */
  const int gpu = priv->cuda.device_for(gpu_id);
  std::lock_guard<std::mutex> guard(priv->lock);
  priv->gpu = gpu;
  priv->snapshot.reset();
}

static gboolean gst_cuda_nms_detector_start(GstBaseTransform *trans) {
  GstCudaNmsDetector *self = GST_CUDA_NMS_DETECTOR(trans);
  DetectorState *priv = priv_of(self);
  close_detector(self);
  find_cuda_context(self);
  const auto settings = gst_cuda_nms_detector_settings(self);
  const GstCudaNmsDetectorSettings &s = *settings;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    priv->frames_in_gpu_memory = 0;
  }
  priv->announcers.clear();
  priv->model_labels.clear();
  std::string why;
  if (!read_labels(s.labels_file, &priv->labels, &why)) {
    GST_ELEMENT_ERROR(self, RESOURCE, NOT_FOUND,
                      ("Labels file \"%s\" cannot be read", s.labels_file.c_str()),
                      ("%s", why.c_str()));
    return FALSE;
  }
  return GST_CUDA_NMS_DETECTOR_GET_CLASS(self)->open(self, s);
}

static gboolean gst_cuda_nms_detector_stop(GstBaseTransform *trans) {
  close_detector(GST_CUDA_NMS_DETECTOR(trans));
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* The frame                                                                                   */
/* ------------------------------------------------------------------------------------------ */

const std::vector<std::string> &gst_cuda_nms_detector_labels(GstCudaNmsDetector *self) {
  DetectorState *priv = priv_of(self);
  return priv->labels.empty() ? priv->model_labels : priv->labels;
}

void gst_cuda_nms_detector_set_labels(GstCudaNmsDetector *self, std::vector<std::string> labels) {
  priv_of(self)->model_labels = std::move(labels);
}

/* Tells downstream the names of the classes, once and whenever they change: the labels file's,
 * else the network's own (set_labels), else the label of class-id. */
static void announce_labels(GstCudaNmsDetector *self, const GstCudaNmsDetectorSettings &s) {
  DetectorState *priv = priv_of(self);
  GstPad *pad = GST_BASE_TRANSFORM_SRC_PAD(self);
  const std::vector<std::string> &labels = gst_cuda_nms_detector_labels(self);
  if (!labels.empty()) {
    priv->announcers.resize(labels.size());
    for (size_t c = 0; c < labels.size(); c++) {
      if (!labels[c].empty()) priv->announcers[c].announce(pad, static_cast<gint>(c), labels[c]);
    }
    return;
  }
  GstCudaNmsDetectorClass *klass = GST_CUDA_NMS_DETECTOR_GET_CLASS(self);
  std::string label = s.detected.label;
  if (label.empty() && klass->default_label) label = klass->default_label(self, s);
  if (label.empty()) return;
  priv->announcers.resize(1);
  priv->announcers[0].announce(pad, s.detected.class_id, label);
}

std::shared_ptr<cudanms::DeviceCandidates> gst_cuda_nms_detector_device_candidates(
    GstCudaNmsDetector *self, GstBuffer *buffer, const GstCudaNmsDetectorSettings &s,
    size_t capacity) {
  DetectorState *priv = priv_of(self);
  if (!s.device_candidates || !priv->device_context || capacity == 0) return nullptr;
  GstCudaNmsCandidatesMeta *existing = gst_buffer_get_cuda_nms_candidates_meta(buffer);
  if (existing && (existing->n > 0 || existing->device)) return nullptr;
  ElementCudaContext::Scope scope(priv->cuda); /* the detector's context */
  return priv->pool.acquire(GST_ELEMENT(self), s.gpu_id, capacity);
}

/* The GPU failed under the detector: told (a warning for people, the cudanms-gpu-failed message
 * for programs), then the detector made again on the CPU where the subclass can. FALSE: the
 * stream stops (the error posted). */
static bool fall_back_to_cpu(GstCudaNmsDetector *self, const GstCudaNmsDetectorSettings &s,
                             const std::string &why) {
  DetectorState *priv = priv_of(self);
  GstCudaNmsDetectorClass *klass = GST_CUDA_NMS_DETECTOR_GET_CLASS(self);
  gst_cv_post_gpu_failed(GST_ELEMENT(self), s.gpu_id, why);
  priv->pool.reset();
  if (!klass->fall_back_to_cpu || !klass->fall_back_to_cpu(self, s)) {
    GST_ELEMENT_ERROR(self, RESOURCE, FAILED, ("CUDA detection failed on GPU %d", s.gpu_id),
                      ("%s", why.c_str()));
    return false;
  }
  GST_ELEMENT_WARNING(self, RESOURCE, FAILED,
                      ("CUDA detection failed on GPU %d: continuing on the CPU", s.gpu_id),
                      ("%s", why.c_str()));
  return true;
}

/* FALSE (the error posted) unless the detection is done. */
static bool finished(GstCudaNmsDetector *self, const GstCudaNmsDetection &detection) {
  if (detection.outcome() == GstCudaNmsDetection::Outcome::kDone) return true;
  const std::string summary =
      detection.summary().empty() ? "Detection failed" : detection.summary();
  GST_ELEMENT_ERROR(self, STREAM, FAILED, ("%s", summary.c_str()),
                    ("%s", detection.detail().c_str()));
  return false;
}

/* The frame mapped for reading only (GstVideoFilter would map it writable, copying frames that
 * other buffers share, e.g. after a tee), detected on the host; once more on the CPU when the
 * GPU fails. */
static GstFlowReturn detect_on_host(GstCudaNmsDetector *self, GstBuffer *buffer,
                                    const GstCudaNmsDetectorSettings &s) {
  GstCudaNmsDetectorClass *klass = GST_CUDA_NMS_DETECTOR_GET_CLASS(self);
  GstVideoFrame frame;
  /* NO_REF: the buffer stays writable for the meta. */
  if (!gst_video_frame_map(
          &frame, &GST_VIDEO_FILTER(self)->in_info, buffer,
          static_cast<GstMapFlags>(GST_MAP_READ | GST_VIDEO_FRAME_MAP_FLAG_NO_REF))) {
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Could not read the frame"), (NULL));
    return GST_FLOW_ERROR;
  }
  GstCudaNmsDetection detection = klass->detect_on_host(self, buffer, &frame, s);
  bool ok;
  if (detection.outcome() == GstCudaNmsDetection::Outcome::kGpuFailed) {
    ok = fall_back_to_cpu(self, s, detection.detail()) &&
         finished(self, klass->detect_on_host(self, buffer, &frame, s));
  } else {
    ok = finished(self, detection);
  }
  gst_video_frame_unmap(&frame);
  return ok ? GST_FLOW_OK : GST_FLOW_ERROR;
}

static GstFlowReturn gst_cuda_nms_detector_transform_ip(GstBaseTransform *trans,
                                                        GstBuffer *buffer) {
  GstCudaNmsDetector *self = GST_CUDA_NMS_DETECTOR(trans);
  DetectorState *priv = priv_of(self);
  GstCudaNmsDetectorClass *klass = GST_CUDA_NMS_DETECTOR_GET_CLASS(self);
  if (!GST_VIDEO_FILTER(trans)->negotiated) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, (NULL), ("unknown format"));
    return GST_FLOW_NOT_NEGOTIATED;
  }
  const auto settings = gst_cuda_nms_detector_settings(self);
  const GstCudaNmsDetectorSettings &s = *settings;
  announce_labels(self, s);
  const gint64 start = g_get_monotonic_time();
  if (priv->device_context && klass->detect_on_device) {
    CudaFrame frame;
    if (frame.map(buffer, priv->device_context) &&
        (!klass->reads_in_place || klass->reads_in_place(frame.format()))) {
      const GstCudaNmsDetection detection = klass->detect_on_device(self, buffer, frame, s);
      if (detection.outcome() == GstCudaNmsDetection::Outcome::kDone) {
        std::lock_guard<std::mutex> guard(priv->lock);
        priv->frames_in_gpu_memory++;
      }
      if (detection.outcome() != GstCudaNmsDetection::Outcome::kGpuFailed) {
        GST_LOG_OBJECT(self, "frame in GPU memory detected in %.2f ms",
                       (g_get_monotonic_time() - start) / 1000.0);
        return finished(self, detection) ? GST_FLOW_OK : GST_FLOW_ERROR;
      }
      /* On the CPU from now on: this frame too, mapped on the host. */
      if (!fall_back_to_cpu(self, s, detection.detail())) return GST_FLOW_ERROR;
    }
  }
  const GstFlowReturn ret = detect_on_host(self, buffer, s);
  GST_LOG_OBJECT(self, "frame detected in %.2f ms", (g_get_monotonic_time() - start) / 1000.0);
  return ret;
}

/* The pipeline's CUDA context, handed over by the application or a neighbour... */
static void gst_cuda_nms_detector_set_context(GstElement *element, GstContext *context) {
  GstCudaNmsDetector *self = GST_CUDA_NMS_DETECTOR(element);
  gint gpu_id = 0; /* as set: -1 takes any device's */
  {
    std::lock_guard<std::mutex> guard(priv_of(self)->lock);
    gpu_id = priv_of(self)->settings.gpu_id;
  }
  priv_of(self)->cuda.set_context(element, context, gpu_id);
  GST_ELEMENT_CLASS(gst_cuda_nms_detector_parent_class)->set_context(element, context);
}

/* ...and shared with neighbours asking for it. */
static gboolean gst_cuda_nms_detector_query(GstBaseTransform *trans, GstPadDirection direction,
                                            GstQuery *query) {
  if (priv_of(GST_CUDA_NMS_DETECTOR(trans))->cuda.handle_query(GST_ELEMENT(trans), query))
    return TRUE;
  return GST_BASE_TRANSFORM_CLASS(gst_cuda_nms_detector_parent_class)
      ->query(trans, direction, query);
}
