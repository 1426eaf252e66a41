/**
 * SECTION:element-dnndetect
 * @title: dnndetect
 *
 * A DNN detector: a TorchScript network run by LibTorch on each frame, every candidate its
 * output gives above score-threshold attached, undecided, as one #GstCudaNmsCandidatesMeta per
 * frame for cudanms to reduce. The decoder says what the network's outputs mean:
 *
 * - blazeface: MediaPipe's BlazeFace front model (128x128, faces within about two metres) as
 *   tools/blazeface-to-torchscript.py converts it; every candidate carries the model's six
 *   keypoints. MediaPipe merges its anchors with weighted NMS at IoU 0.3 (cudanms
 *   method=weighted iou-threshold=0.3). An empty model property means the converted model where
 *   the README's set-up puts it, $XDG_CACHE_HOME/cudanms/blazeface-1.2.0/.
 * - yolo: Ultralytics YOLO v8/v11 exported with `yolo export format=torchscript` (output
 *   [B, 4 + classes, anchors]); each anchor's best class. Class ids are the model's class indices;
 *   labels-file names them (one per line) for overlays and writers.
 *
 * The frame is scaled into the network's input (letterboxed by default: scaled to fit, centred,
 * padded), normalised per channel as (pixel - mean) * scale, and the boxes mapped back to frame
 * pixels. With the CUDA backend (the default where LibTorch and the GPU can run the network) the
 * pre-processing, the network and the decoding run on the GPU, on one stream in the device's
 * primary CUDA context (LibTorch's), which the element offers the pipeline as its CUDA context,
 * so that nvh264dec, cudaupload and cudanms work in it too. Frames in GPU memory of that context
 * (memory:CUDAMemory NV12/I420) are read in place, others are mapped on the host; candidates
 * without points stay in GPU memory (device-candidates), which cudanms reads in place when it
 * shares the context and downloads once otherwise.
 *
 * Instances of one process with the same batch-size (above 1), batch-group and network settings
 * run their frames, e.g. one per camera, through one forward: a batch runs when it is full, when
 * every instance has a frame in it, or batch-timeout after its first frame.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 filesrc location=Megamind.avi ! decodebin ! videoconvert ! dnndetect ! \
 *     cudanms method=weighted iou-threshold=0.3 ! boxoverlay ! videoconvert ! autovideosink
 * gst-launch-1.0 filesrc location=street.mp4 ! decodebin ! videoconvert ! \
 *     dnndetect decoder=yolo model=yolo11n.torchscript labels-file=coco.names ! \
 *     cudanms iou-threshold=0.7 ! boxoverlay ! videoconvert ! autovideosink
 * ]|
 */
#include "gstdnndetect.h"

#include <cudanms/bounded_file.h>
#include <cudanms/dnn.h>
#include <gst/cudanms/cudanmsmeta.h>
#include <gst/video/video.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "cudaframe.h"
#include "detections.h"
#include "detectorproperties.h"
#include "devicecandidates.h"
#include "dnnbatchgroup.h"
#include "dnnimage.h"
#include "elementcudacontext.h"
#include "pinnedpool.h"
#include "torchmodel.h"

GST_DEBUG_CATEGORY_STATIC(gst_dnn_detect_debug);
#define GST_CAT_DEFAULT gst_dnn_detect_debug

namespace dnn = cudanms::dnn;

enum {
  PROP_0,
  PROP_MODEL,
  PROP_DECODER,
  PROP_INPUT_WIDTH,
  PROP_INPUT_HEIGHT,
  PROP_LETTERBOX,
  PROP_MEAN,
  PROP_SCALE,
  PROP_SCORE_THRESHOLD,
  PROP_LABEL,
  PROP_CLASS_ID,
  PROP_LABELS_FILE,
  PROP_BACKEND,
  PROP_GPU_ID,
  PROP_DEVICE,
  PROP_DEVICE_CANDIDATES,
  PROP_CUDA_GRAPHS,
  PROP_BATCH_SIZE,
  PROP_BATCH_TIMEOUT,
  PROP_BATCH_GROUP,
  PROP_FRAMES_IN_GPU_MEMORY,
  PROP_FRAMES_IN_PINNED_MEMORY,
  PROP_MEAN_BATCH,
  PROP_GRAPHED_FRAMES,
};

typedef enum {
  GST_DNN_DETECT_DECODER_BLAZEFACE,
  GST_DNN_DETECT_DECODER_YOLO,
} GstDnnDetectDecoder;

typedef enum {
  GST_DNN_DETECT_BACKEND_AUTO,
  GST_DNN_DETECT_BACKEND_CUDA,
  GST_DNN_DETECT_BACKEND_CPU,
} GstDnnDetectBackend;

#define BLAZEFACE_MODEL_FILE "face_detection_front_128x128.torchscript.pt"
#define BLAZEFACE_CACHE_DIR "blazeface-1.2.0"

#define DEFAULT_MODEL ""
#define DEFAULT_DECODER GST_DNN_DETECT_DECODER_BLAZEFACE
#define DEFAULT_INPUT_SIZE 0
#define DEFAULT_LETTERBOX TRUE
#define DEFAULT_MEAN ""
#define DEFAULT_SCALE ""
#define DEFAULT_SCORE_THRESHOLD 0.5
#define DEFAULT_LABELS_FILE ""
#define DEFAULT_BACKEND GST_DNN_DETECT_BACKEND_AUTO
#define DEFAULT_GPU_ID 0
#define DEFAULT_DEVICE_CANDIDATES TRUE
#define DEFAULT_CUDA_GRAPHS TRUE
#define DEFAULT_BATCH_SIZE 1
#define DEFAULT_BATCH_TIMEOUT 20000
#define DEFAULT_BATCH_GROUP ""

/* The largest input the element accepts, per side. */
#define MAX_INPUT_SIZE 4096

#define VIDEO_FORMATS "{ RGB, BGR, RGBx, BGRx, RGBA, BGRA, I420, NV12 }"
#ifdef CUDANMS_HAVE_GST_CUDA
#define CUDA_MEMORY_CAPS \
  "; " GST_VIDEO_CAPS_MAKE_WITH_FEATURES("memory:CUDAMemory", "{ I420, NV12 }")
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
  GstDnnDetectDecoder decoder = DEFAULT_DECODER;
  int input_width = DEFAULT_INPUT_SIZE, input_height = DEFAULT_INPUT_SIZE;
  bool letterbox = DEFAULT_LETTERBOX;
  std::string mean = DEFAULT_MEAN, scale = DEFAULT_SCALE;
  double score_threshold = DEFAULT_SCORE_THRESHOLD;
  DetectorClass detected{"face"};
  std::string labels_file = DEFAULT_LABELS_FILE;
  GstDnnDetectBackend backend = DEFAULT_BACKEND;
  gint gpu_id = DEFAULT_GPU_ID;
  bool device_candidates = DEFAULT_DEVICE_CANDIDATES;
  bool cuda_graphs = DEFAULT_CUDA_GRAPHS;
  int batch_size = DEFAULT_BATCH_SIZE;
  guint batch_timeout = DEFAULT_BATCH_TIMEOUT;
  std::string batch_group = DEFAULT_BATCH_GROUP;
};

/* "v" or "r,g,b" into three values; false for anything else. */
bool parse_triple(const std::string &text, float out[3]) {
  std::vector<float> values;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char *end = nullptr;
    const double v = g_ascii_strtod(item.c_str(), &end);
    while (end && g_ascii_isspace(*end)) end++;
    if (end == item.c_str() || (end && *end) || !std::isfinite(v)) return false;
    values.push_back(static_cast<float>(v));
  }
  if (values.size() == 1) values.assign(3, values[0]);
  if (values.size() != 3) return false;
  for (int c = 0; c < 3; c++) out[c] = values[c];
  return true;
}

/* The network's input for the settings: the decoder's own unless set. */
bool input_spec(const Settings &s, dnn::InputSpec *spec, std::string *why) {
  const bool blazeface = s.decoder == GST_DNN_DETECT_DECODER_BLAZEFACE;
  *spec = dnn::InputSpec();
  spec->width = s.input_width ? s.input_width : blazeface ? 128 : 640;
  spec->height = s.input_height ? s.input_height : blazeface ? 128 : 640;
  spec->letterbox = s.letterbox;
  /* BlazeFace: [-1, 1], black padding (MediaPipe); YOLO: [0, 1], grey 114 padding (Ultralytics). */
  const float mean = blazeface ? 127.5f : 0.0f, scale = blazeface ? 1.0f / 127.5f : 1.0f / 255.0f;
  for (int c = 0; c < 3; c++) spec->mean[c] = mean, spec->scale[c] = scale;
  spec->pad_value = blazeface ? 0.0f : 114.0f;
  if (!s.mean.empty() && !parse_triple(s.mean, spec->mean)) {
    *why = "mean \"" + s.mean + "\" is not one number or three (R,G,B)";
    return false;
  }
  if (!s.scale.empty() && !parse_triple(s.scale, spec->scale)) {
    *why = "scale \"" + s.scale + "\" is not one number or three (R,G,B)";
    return false;
  }
  return true;
}

/* The model property, or where the README's set-up keeps the converted BlazeFace model. */
std::string model_path(const Settings &s) {
  if (!s.model.empty() || s.decoder != GST_DNN_DETECT_DECODER_BLAZEFACE) return s.model;
  gchar *path = g_build_filename(g_get_user_cache_dir(), "cudanms", BLAZEFACE_CACHE_DIR,
                                 BLAZEFACE_MODEL_FILE, nullptr);
  std::string result = path;
  g_free(path);
  return result;
}

}  // namespace

struct GstDnnDetectPrivate {
  std::mutex lock; /* guards settings, device and the counters */
  Settings settings;
  std::string device; /* where the network runs, once started */
  guint64 frames = 0, frames_in_gpu_memory = 0;
  guint64 batched_frames = 0; /* the sum, over frames, of the frames in their forward */
  guint64 graphed_frames = 0;
  guint64 frames_in_pinned_memory = 0;

  /* Streaming thread (and start/stop) only. */
  dnn::InputSpec spec;
  dnn::Head head = dnn::Head::kBlazeFace;
  std::vector<std::string> labels; /* yolo: the labels file's, by class id */
  std::unique_ptr<DnnBatchGroup::Member> network;
  ElementCudaContext cuda; /* the pipeline's, the network's (primary) one where it can be */
  GstCvDeviceCandidatesPool pool;
  bool graph_problem_told = false;
  dnn::Candidates candidates;
  std::vector<GstCvLabelAnnouncer> announcers;
};

struct _GstDnnDetect {
  GstVideoFilter parent;
  GstDnnDetectPrivate *priv;
};

#define gst_dnn_detect_parent_class parent_class
G_DEFINE_TYPE_WITH_CODE(GstDnnDetect, gst_dnn_detect, GST_TYPE_VIDEO_FILTER,
                        GST_DEBUG_CATEGORY_INIT(gst_dnn_detect_debug, "dnndetect", 0,
                                                "DNN detector (TorchScript)"));
GST_ELEMENT_REGISTER_DEFINE(dnndetect, "dnndetect", GST_RANK_NONE, GST_TYPE_DNN_DETECT);

#define GST_TYPE_DNN_DETECT_DECODER (gst_dnn_detect_decoder_get_type())
static GType gst_dnn_detect_decoder_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_DNN_DETECT_DECODER_BLAZEFACE,
       "MediaPipe BlazeFace front (tools/blazeface-to-torchscript.py): faces with 6 keypoints",
       "blazeface"},
      {GST_DNN_DETECT_DECODER_YOLO, "Ultralytics YOLO v8/v11: [B, 4 + classes, anchors]", "yolo"},
      {0, NULL, NULL}};
  if (g_once_init_enter(&type)) {
    GType t = g_enum_register_static("GstDnnDetectDecoder", values);
    g_once_init_leave(&type, t);
  }
  return type;
}

#define GST_TYPE_DNN_DETECT_BACKEND (gst_dnn_detect_backend_get_type())
static GType gst_dnn_detect_backend_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_DNN_DETECT_BACKEND_AUTO, "CUDA when LibTorch and a device can, else the CPU (warned)",
       "auto"},
      {GST_DNN_DETECT_BACKEND_CUDA, "CUDA only: an error when it cannot be used", "cuda"},
      {GST_DNN_DETECT_BACKEND_CPU, "The CPU only", "cpu"},
      {0, NULL, NULL}};
  if (g_once_init_enter(&type)) {
    GType t = g_enum_register_static("GstDnnDetectBackend", values);
    g_once_init_leave(&type, t);
  }
  return type;
}

static void gst_dnn_detect_finalize(GObject *object);
static void gst_dnn_detect_set_property(GObject *object, guint prop_id, const GValue *value,
                                        GParamSpec *pspec);
static void gst_dnn_detect_get_property(GObject *object, guint prop_id, GValue *value,
                                        GParamSpec *pspec);
static gboolean gst_dnn_detect_start(GstBaseTransform *trans);
static gboolean gst_dnn_detect_stop(GstBaseTransform *trans);
static GstFlowReturn gst_dnn_detect_transform_ip(GstBaseTransform *trans, GstBuffer *buffer);
static gboolean gst_dnn_detect_propose_allocation(GstBaseTransform *trans, GstQuery *decide_query,
                                                  GstQuery *query);
static void gst_dnn_detect_set_context(GstElement *element, GstContext *context);
static gboolean gst_dnn_detect_query(GstBaseTransform *trans, GstPadDirection direction,
                                     GstQuery *query);

static void gst_dnn_detect_class_init(GstDnnDetectClass *klass) {
  GObjectClass *gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS(klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS(klass);
  const GParamFlags rw = static_cast<GParamFlags>(G_PARAM_READWRITE | GST_PARAM_MUTABLE_PLAYING |
                                                  G_PARAM_STATIC_STRINGS);
  const GParamFlags rw_ready = static_cast<GParamFlags>(
      G_PARAM_READWRITE | GST_PARAM_MUTABLE_READY | G_PARAM_STATIC_STRINGS);
  const GParamFlags ro = static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);

  gobject_class->finalize = gst_dnn_detect_finalize;
  gobject_class->set_property = gst_dnn_detect_set_property;
  gobject_class->get_property = gst_dnn_detect_get_property;

  g_object_class_install_property(
      gobject_class, PROP_MODEL,
      g_param_spec_string("model", "Model",
                          "Path of the TorchScript network; empty with decoder=blazeface: "
                          "$XDG_CACHE_HOME/cudanms/" BLAZEFACE_CACHE_DIR "/" BLAZEFACE_MODEL_FILE
                          ", which the README's set-up writes. Loaded when the element starts",
                          DEFAULT_MODEL, rw_ready));
  g_object_class_install_property(
      gobject_class, PROP_DECODER,
      g_param_spec_enum("decoder", "Decoder", "What the network's outputs mean",
                        GST_TYPE_DNN_DETECT_DECODER, DEFAULT_DECODER, rw_ready));
  g_object_class_install_property(
      gobject_class, PROP_INPUT_WIDTH,
      g_param_spec_int("input-width", "Input width",
                       "Width of the network's input; 0: the decoder's (blazeface 128, yolo 640)",
                       0, MAX_INPUT_SIZE, DEFAULT_INPUT_SIZE, rw_ready));
  g_object_class_install_property(
      gobject_class, PROP_INPUT_HEIGHT,
      g_param_spec_int("input-height", "Input height",
                       "Height of the network's input; 0: the decoder's (blazeface 128, yolo 640)",
                       0, MAX_INPUT_SIZE, DEFAULT_INPUT_SIZE, rw_ready));
  g_object_class_install_property(
      gobject_class, PROP_LETTERBOX,
      g_param_spec_boolean("letterbox", "Letterbox",
                           "Scale the frame to fit the input keeping its aspect, centred and "
                           "padded (blazeface black, yolo grey 114); false: stretch it",
                           DEFAULT_LETTERBOX, rw_ready));
  g_object_class_install_property(
      gobject_class, PROP_MEAN,
      g_param_spec_string("mean", "Mean",
                          "Subtracted from each pixel (0..255) before scaling: one value or "
                          "\"R,G,B\"; empty: the decoder's (blazeface 127.5, yolo 0)",
                          DEFAULT_MEAN, rw_ready));
  g_object_class_install_property(
      gobject_class, PROP_SCALE,
      g_param_spec_string("scale", "Scale",
                          "Multiplies each pixel after the mean: one value or \"R,G,B\"; empty: "
                          "the decoder's (blazeface 1/127.5, yolo 1/255)",
                          DEFAULT_SCALE, rw_ready));
  g_object_class_install_property(
      gobject_class, PROP_SCORE_THRESHOLD,
      g_param_spec_double("score-threshold", "Score threshold",
                          "Candidates scoring below this (0..1) are not attached", 0.0, 1.0,
                          DEFAULT_SCORE_THRESHOLD, rw));
  DetectorClass::install(gobject_class, PROP_LABEL, PROP_CLASS_ID, "face",
                         "decoder=blazeface: name of the detected class, announced downstream "
                         "for overlays and writers");
  g_object_class_install_property(
      gobject_class, PROP_LABELS_FILE,
      g_param_spec_string("labels-file", "Labels file",
                          "decoder=yolo: a text file with one class name per line, line N "
                          "naming class id N, announced downstream; empty: none",
                          DEFAULT_LABELS_FILE, rw_ready));
  g_object_class_install_property(
      gobject_class, PROP_BACKEND,
      g_param_spec_enum("backend", "Backend", "Where the network and its processing run",
                        GST_TYPE_DNN_DETECT_BACKEND, DEFAULT_BACKEND, rw_ready));
  g_object_class_install_property(gobject_class, PROP_GPU_ID,
                                  g_param_spec_int("gpu-id", "GPU id", "CUDA device index", 0,
                                                   G_MAXINT, DEFAULT_GPU_ID, rw_ready));
  g_object_class_install_property(
      gobject_class, PROP_DEVICE_CANDIDATES,
      g_param_spec_boolean(
          "device-candidates", "Device candidates",
          "With the CUDA backend, leave candidates without points in GPU memory for cudanms to "
          "use in place; false, and for decoders with points: host memory each frame",
          DEFAULT_DEVICE_CANDIDATES, rw_ready));
  g_object_class_install_property(
      gobject_class, PROP_CUDA_GRAPHS,
      g_param_spec_boolean(
          "cuda-graphs", "CUDA graphs",
          "With the CUDA backend, replay the network as a CUDA graph (one per power-of-two "
          "batch, a batch padded up to it, captured on its fourth forward) instead of launching "
          "its operators one by one; a network that cannot be captured runs uncaptured, warned",
          DEFAULT_CUDA_GRAPHS, rw_ready));
  g_object_class_install_property(
      gobject_class, PROP_BATCH_SIZE,
      g_param_spec_int(
          "batch-size", "Batch size",
          "Frames per forward at most: dnndetect instances of one process with the "
          "same batch-group, model, decoder, input, backend, gpu-id, cuda-graphs, batch-size and "
          "batch-timeout run their frames (e.g. one per camera) through one forward. "
          "A batch runs when it is full, when every instance has a frame in it, or "
          "batch-timeout after its first frame; 1: no batching, no waiting",
          1, dnn::kMaxBatch, DEFAULT_BATCH_SIZE, rw_ready));
  g_object_class_install_property(
      gobject_class, PROP_BATCH_TIMEOUT,
      g_param_spec_uint("batch-timeout", "Batch timeout",
                        "The longest a frame waits for other instances' frames, in microseconds", 0,
                        G_MAXINT, DEFAULT_BATCH_TIMEOUT, rw_ready));
  g_object_class_install_property(
      gobject_class, PROP_BATCH_GROUP,
      g_param_spec_string("batch-group", "Batch group",
                          "Instances batch together only with instances of the same group name",
                          DEFAULT_BATCH_GROUP, rw_ready));
  g_object_class_install_property(
      gobject_class, PROP_DEVICE,
      g_param_spec_string("device", "Device",
                          "Where the network runs once started, e.g. \"cuda:0 (NVIDIA H100 80GB "
                          "HBM3)\" or \"cpu\"; empty before",
                          "", ro));
  g_object_class_install_property(
      gobject_class, PROP_FRAMES_IN_GPU_MEMORY,
      g_param_spec_uint64("frames-in-gpu-memory", "Frames in GPU memory",
                          "Frames since start read in place in GPU memory, with no download", 0,
                          G_MAXUINT64, 0, ro));
  g_object_class_install_property(
      gobject_class, PROP_FRAMES_IN_PINNED_MEMORY,
      g_param_spec_uint64("frames-in-pinned-memory", "Frames in pinned memory",
                          "Frames since start that upstream wrote into the pinned host memory "
                          "this element proposes (CUDA backend), copied to the GPU at the "
                          "bus's rate",
                          0, G_MAXUINT64, 0, ro));
  g_object_class_install_property(
      gobject_class, PROP_MEAN_BATCH,
      g_param_spec_double("mean-batch", "Mean batch",
                          "Frames per forward since start, averaged over this instance's frames "
                          "(1 without batching)",
                          0.0, dnn::kMaxBatch, 0.0, ro));
  g_object_class_install_property(
      gobject_class, PROP_GRAPHED_FRAMES,
      g_param_spec_uint64("graphed-frames", "Graphed frames",
                          "Frames since start whose forward replayed a CUDA graph", 0, G_MAXUINT64,
                          0, ro));

  gst_element_class_add_static_pad_template(element_class, &sink_template);
  gst_element_class_add_static_pad_template(element_class, &src_template);
  gst_element_class_set_static_metadata(
      element_class, "DNN detector (TorchScript)", "Filter/Analyzer/Video",
      "Runs a TorchScript detector (BlazeFace, YOLO) with LibTorch, on the GPU where it can, "
      "and attaches every candidate above the score threshold as cudanms candidates metadata",
      "cudanms developers");

  trans_class->start = GST_DEBUG_FUNCPTR(gst_dnn_detect_start);
  trans_class->stop = GST_DEBUG_FUNCPTR(gst_dnn_detect_stop);
  trans_class->transform_ip = GST_DEBUG_FUNCPTR(gst_dnn_detect_transform_ip);
  trans_class->propose_allocation = GST_DEBUG_FUNCPTR(gst_dnn_detect_propose_allocation);
  trans_class->query = GST_DEBUG_FUNCPTR(gst_dnn_detect_query);
  element_class->set_context = GST_DEBUG_FUNCPTR(gst_dnn_detect_set_context);

  gst_type_mark_as_plugin_api(GST_TYPE_DNN_DETECT_DECODER, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_DNN_DETECT_BACKEND, static_cast<GstPluginAPIFlags>(0));
}

static void gst_dnn_detect_init(GstDnnDetect *self) {
  self->priv = new GstDnnDetectPrivate();
  self->priv->settings = Settings();
  /* Adds metadata: in place, never passthrough, so that the buffer is writable. */
  gst_base_transform_set_in_place(GST_BASE_TRANSFORM(self), TRUE);
  gst_base_transform_set_passthrough(GST_BASE_TRANSFORM(self), FALSE);
  gst_base_transform_set_qos_enabled(GST_BASE_TRANSFORM(self), FALSE);
}

static void gst_dnn_detect_finalize(GObject *object) {
  GstDnnDetect *self = GST_DNN_DETECT(object);
  delete self->priv;
  self->priv = nullptr;
  G_OBJECT_CLASS(parent_class)->finalize(object);
}

static void set_string(std::string *field, const GValue *value) {
  const gchar *text = g_value_get_string(value);
  *field = text ? text : "";
}

static void gst_dnn_detect_set_property(GObject *object, guint prop_id, const GValue *value,
                                        GParamSpec *pspec) {
  GstDnnDetect *self = GST_DNN_DETECT(object);
  std::lock_guard<std::mutex> guard(self->priv->lock);
  Settings &s = self->priv->settings;
  if (s.detected.set(pspec, value)) return;
  switch (prop_id) {
    case PROP_MODEL:
      set_string(&s.model, value);
      break;
    case PROP_DECODER:
      s.decoder = static_cast<GstDnnDetectDecoder>(g_value_get_enum(value));
      break;
    case PROP_INPUT_WIDTH:
      s.input_width = g_value_get_int(value);
      break;
    case PROP_INPUT_HEIGHT:
      s.input_height = g_value_get_int(value);
      break;
    case PROP_LETTERBOX:
      s.letterbox = g_value_get_boolean(value);
      break;
    case PROP_MEAN:
      set_string(&s.mean, value);
      break;
    case PROP_SCALE:
      set_string(&s.scale, value);
      break;
    case PROP_SCORE_THRESHOLD:
      s.score_threshold = g_value_get_double(value);
      break;
    case PROP_LABELS_FILE:
      set_string(&s.labels_file, value);
      break;
    case PROP_BACKEND:
      s.backend = static_cast<GstDnnDetectBackend>(g_value_get_enum(value));
      break;
    case PROP_GPU_ID:
      s.gpu_id = g_value_get_int(value);
      break;
    case PROP_DEVICE_CANDIDATES:
      s.device_candidates = g_value_get_boolean(value);
      break;
    case PROP_CUDA_GRAPHS:
      s.cuda_graphs = g_value_get_boolean(value);
      break;
    case PROP_BATCH_SIZE:
      s.batch_size = g_value_get_int(value);
      break;
    case PROP_BATCH_TIMEOUT:
      s.batch_timeout = g_value_get_uint(value);
      break;
    case PROP_BATCH_GROUP:
      set_string(&s.batch_group, value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
}

static void gst_dnn_detect_get_property(GObject *object, guint prop_id, GValue *value,
                                        GParamSpec *pspec) {
  GstDnnDetect *self = GST_DNN_DETECT(object);
  std::lock_guard<std::mutex> guard(self->priv->lock);
  const Settings &s = self->priv->settings;
  if (s.detected.get(pspec, value)) return;
  switch (prop_id) {
    case PROP_MODEL:
      g_value_set_string(value, s.model.c_str());
      break;
    case PROP_DECODER:
      g_value_set_enum(value, s.decoder);
      break;
    case PROP_INPUT_WIDTH:
      g_value_set_int(value, s.input_width);
      break;
    case PROP_INPUT_HEIGHT:
      g_value_set_int(value, s.input_height);
      break;
    case PROP_LETTERBOX:
      g_value_set_boolean(value, s.letterbox);
      break;
    case PROP_MEAN:
      g_value_set_string(value, s.mean.c_str());
      break;
    case PROP_SCALE:
      g_value_set_string(value, s.scale.c_str());
      break;
    case PROP_SCORE_THRESHOLD:
      g_value_set_double(value, s.score_threshold);
      break;
    case PROP_LABELS_FILE:
      g_value_set_string(value, s.labels_file.c_str());
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
    case PROP_CUDA_GRAPHS:
      g_value_set_boolean(value, s.cuda_graphs);
      break;
    case PROP_GRAPHED_FRAMES:
      g_value_set_uint64(value, self->priv->graphed_frames);
      break;
    case PROP_BATCH_SIZE:
      g_value_set_int(value, s.batch_size);
      break;
    case PROP_BATCH_TIMEOUT:
      g_value_set_uint(value, s.batch_timeout);
      break;
    case PROP_BATCH_GROUP:
      g_value_set_string(value, s.batch_group.c_str());
      break;
    case PROP_FRAMES_IN_PINNED_MEMORY:
      g_value_set_uint64(value, self->priv->frames_in_pinned_memory);
      break;
    case PROP_FRAMES_IN_GPU_MEMORY:
      g_value_set_uint64(value, self->priv->frames_in_gpu_memory);
      break;
    case PROP_MEAN_BATCH:
      g_value_set_double(value,
                         self->priv->frames
                             ? static_cast<double>(self->priv->batched_frames) / self->priv->frames
                             : 0.0);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
}

/* ------------------------------------------------------------------------------------------ */
/* The network                                                                                 */
/* ------------------------------------------------------------------------------------------ */

static void set_device(GstDnnDetect *self, const std::string &device) {
  std::lock_guard<std::mutex> guard(self->priv->lock);
  self->priv->device = device;
}

/* Reads the labels file: one name per line, blank lines naming nothing. */
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

/* The element's network in its batch group: on CUDA device s.gpu_id, where the backend allows
 * and it can, else on the CPU (warned for backend=auto). */
static bool join_batch_group(GstDnnDetect *self, const Settings &s, const std::string &path) {
  GstDnnDetectPrivate *priv = self->priv;
  DnnBatchGroup::Options options;
  options.name = s.batch_group;
  options.batch_size = s.batch_size;
  options.timeout_us = s.batch_timeout;
  options.config.model_path = path;
  options.config.head = priv->head;
  options.config.spec = priv->spec;
  options.config.cuda_graphs = s.cuda_graphs;
  std::string why, detail;
  if (s.backend != GST_DNN_DETECT_BACKEND_CPU) {
    if (!cudanms::cuda_available()) {
      why = "no usable CUDA device (or cudanms built without CUDA)";
    } else if (!TorchModel::cuda_usable(s.gpu_id)) {
      why = "this LibTorch has no CUDA for device " + std::to_string(s.gpu_id);
    } else {
      options.config.device = s.gpu_id;
      priv->network = DnnBatchGroup::join(options, &why, &detail);
      if (!priv->network) why = "model \"" + path + "\" " + why + ": " + detail;
    }
    if (!priv->network && s.backend == GST_DNN_DETECT_BACKEND_CUDA) {
      GST_ELEMENT_ERROR(self, RESOURCE, OPEN_READ_WRITE,
                        ("backend=cuda but CUDA device %d cannot run the network", s.gpu_id),
                        ("%s", why.c_str()));
      return false;
    }
    if (!priv->network) {
      GST_ELEMENT_WARNING(self, RESOURCE, OPEN_READ_WRITE,
                          ("The network runs on the CPU: CUDA cannot be used"),
                          ("%s", why.c_str()));
    }
  }
  if (!priv->network) {
    options.config.device = -1;
    priv->network = DnnBatchGroup::join(options, &why, &detail);
  }
  if (!priv->network) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("Model \"%s\" %s", path.c_str(), why.c_str()),
                      ("%s", detail.c_str()));
    return false;
  }
  return true;
}

/* On the GPU, the pipeline shares the network's CUDA context (the device's primary one, where
 * LibTorch runs) with nvh264dec, cudaupload and cudanms, unless one was there first: then frames
 * in its memory are mapped on the host and cudanms downloads the candidates, correct but slower. */
static void share_cuda_context(GstDnnDetect *self, const Settings &s, const DnnDetector &detector) {
  GstDnnDetectPrivate *priv = self->priv;
  if (!detector.on_cuda() || !priv->cuda.ensure(GST_ELEMENT(self), s.gpu_id)) return;
  if (priv->cuda.handle() != detector.context()) {
    GST_INFO_OBJECT(self,
                    "the pipeline's CUDA context is not the device's primary one, the network's: "
                    "frames in its memory are copied");
  }
}

static gboolean gst_dnn_detect_start(GstBaseTransform *trans) {
  GstDnnDetect *self = GST_DNN_DETECT(trans);
  GstDnnDetectPrivate *priv = self->priv;
  Settings s;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    s = priv->settings;
    priv->frames = priv->frames_in_gpu_memory = priv->batched_frames = 0;
    priv->graphed_frames = priv->frames_in_pinned_memory = 0;
  }
  priv->graph_problem_told = false;
  priv->network.reset();
  priv->pool.reset();
  priv->announcers.clear();
  priv->head =
      s.decoder == GST_DNN_DETECT_DECODER_BLAZEFACE ? dnn::Head::kBlazeFace : dnn::Head::kYolo;
  std::string why;
  if (!input_spec(s, &priv->spec, &why)) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("Invalid input settings"), ("%s", why.c_str()));
    return FALSE;
  }
  if (!read_labels(s.labels_file, &priv->labels, &why)) {
    GST_ELEMENT_ERROR(self, RESOURCE, NOT_FOUND,
                      ("Labels file \"%s\" cannot be read", s.labels_file.c_str()),
                      ("%s", why.c_str()));
    return FALSE;
  }
  const std::string path = model_path(s);
  if (path.empty()) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("No model"),
                      ("decoder=yolo needs model, the path of a TorchScript file (yolo export "
                       "format=torchscript)"));
    return FALSE;
  }
  if (!cudanms::check_bounded_file(path, cudanms::kModelFileLimit, &why)) {
    GST_ELEMENT_ERROR(self, RESOURCE, NOT_FOUND,
                      ("Model file \"%s\" cannot be read: %s", path.c_str(), why.c_str()),
                      ("model must be a TorchScript file; for BlazeFace, "
                       "tools/blazeface-to-torchscript.py makes it from the ONNX model that "
                       "tools/fetch-blazeface.sh fetches (the README's set-up runs both)"));
    return FALSE;
  }

  if (!join_batch_group(self, s, path)) return FALSE;
  const DnnDetector &detector = priv->network->detector();
  set_device(self, detector.device_name());
  share_cuda_context(self, s, detector);
  GST_INFO_OBJECT(self, "model %s: %d anchors, %d classes, input %dx%d, on %s, batches of %d",
                  path.c_str(), detector.anchors(), detector.classes(), priv->spec.width,
                  priv->spec.height, detector.device_name().c_str(), s.batch_size);
  return TRUE;
}

static gboolean gst_dnn_detect_stop(GstBaseTransform *trans) {
  GstDnnDetectPrivate *priv = GST_DNN_DETECT(trans)->priv;
  priv->pool.reset(); /* buffers still downstream keep it until they go */
  priv->network.reset();
  priv->cuda.reset();
  set_device(GST_DNN_DETECT(trans), "");
  return TRUE;
}

/* ------------------------------------------------------------------------------------------ */
/* The frame                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* Tells downstream the names of the classes, once and whenever they change. */
static void announce_labels(GstDnnDetect *self, const Settings &s) {
  GstDnnDetectPrivate *priv = self->priv;
  GstPad *pad = GST_BASE_TRANSFORM_SRC_PAD(self);
  if (priv->head == dnn::Head::kBlazeFace) {
    priv->announcers.resize(1);
    priv->announcers[0].announce(pad, s.detected.class_id, s.detected.label);
    return;
  }
  priv->announcers.resize(priv->labels.size());
  for (size_t c = 0; c < priv->labels.size(); c++) {
    if (!priv->labels[c].empty())
      priv->announcers[c].announce(pad, static_cast<gint>(c), priv->labels[c]);
  }
}

/* The frame through the network (in a batch with other elements' frames where the group has
 * them), its candidates attached: left in GPU memory where they can be (CUDA, device-candidates,
 * a head without points, no candidates meta already on the buffer), else in host memory. */
static cudanms::Status detect(GstDnnDetect *self, const Settings &s, GstBuffer *buffer,
                              const dnn::Image &image, bool on_device) {
  GstDnnDetectPrivate *priv = self->priv;
  const DnnDetector &detector = priv->network->detector();
  DnnJob job;
  job.image = image;
  job.on_device = on_device;
  job.params = dnn::DecodeParams{static_cast<float>(s.score_threshold), s.detected.class_id};
  job.host = &priv->candidates;
  std::shared_ptr<cudanms::DeviceCandidates> out;
  if (detector.on_cuda() && s.device_candidates && detector.points_per_candidate() == 0 &&
      !gst_buffer_get_cuda_nms_candidates_meta(buffer)) {
    out = priv->pool.acquire(GST_ELEMENT(self), s.gpu_id, detector.anchors());
    job.device_out = out.get();
  }
  cudanms::Status status = priv->network->detect(&job);
  if (!status.ok()) return status;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    priv->frames++;
    priv->batched_frames += job.batch;
    if (on_device) priv->frames_in_gpu_memory++;
    if (!on_device && detector.on_cuda() && gst_cv_buffer_is_pinned(buffer))
      priv->frames_in_pinned_memory++;
    if (job.graphed) priv->graphed_frames++;
  }
  if (detector.on_cuda() && s.cuda_graphs && !job.graphed && !priv->graph_problem_told) {
    const std::string problem = detector.graph_problem();
    if (!problem.empty()) {
      priv->graph_problem_told = true;
      GST_ELEMENT_WARNING(self, LIBRARY, FAILED,
                          ("The network cannot run as a CUDA graph: its operators are launched "
                           "one by one (slower)"),
                          ("%s", problem.c_str()));
    }
  }
  if (out) {
    if (!gst_cv_attach_device_candidates(buffer, std::move(out), s.gpu_id))
      return cudanms::Status::Error("could not attach the device candidates");
    return cudanms::Status::Ok();
  }
  if (!gst_cv_attach_candidates_of_classes(buffer, priv->candidates.boxes, priv->candidates.scores,
                                           priv->candidates.class_ids, priv->candidates.points,
                                           priv->candidates.points_per_candidate))
    return cudanms::Status::Error("could not add the candidates meta");
  return cudanms::Status::Ok();
}

/* Frames in GstCudaMemory of the network's CUDA context are read where they are; others are
 * mapped for reading only (GstVideoFilter would map them writable, copying frames that other
 * buffers share, e.g. after a tee). */
static GstFlowReturn gst_dnn_detect_transform_ip(GstBaseTransform *trans, GstBuffer *buffer) {
  GstDnnDetect *self = GST_DNN_DETECT(trans);
  GstDnnDetectPrivate *priv = self->priv;
  GstVideoFilter *filter = GST_VIDEO_FILTER(trans);
  if (!filter->negotiated) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, (NULL), ("unknown format"));
    return GST_FLOW_NOT_NEGOTIATED;
  }
  Settings s;
  {
    std::lock_guard<std::mutex> guard(priv->lock);
    s = priv->settings;
  }
  announce_labels(self, s);
  const gint64 start = g_get_monotonic_time();
  dnn::Image image;
  cudanms::Status status;
  CudaFrame device_frame;
  void *context = priv->network->detector().context();
  if (context && device_frame.map(buffer, context)) {
    const guint8 *planes[3] = {device_frame.plane(0), device_frame.plane(1), device_frame.plane(2)};
    const int strides[3] = {device_frame.stride(0), device_frame.stride(1), device_frame.stride(2)};
    if (!gst_cv_dnn_image_of(device_frame.format(), device_frame.width(), device_frame.height(),
                             device_frame.info().colorimetry, planes, strides, &image)) {
      GST_ELEMENT_ERROR(self, STREAM, FORMAT, ("Unsupported format in GPU memory"), (NULL));
      return GST_FLOW_ERROR;
    }
    status = detect(self, s, buffer, image, true);
  } else {
    GstVideoFrame frame;
    /* NO_REF: the buffer stays writable for the meta. */
    if (!gst_video_frame_map(
            &frame, &filter->in_info, buffer,
            static_cast<GstMapFlags>(GST_MAP_READ | GST_VIDEO_FRAME_MAP_FLAG_NO_REF))) {
      GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Could not read the frame"), (NULL));
      return GST_FLOW_ERROR;
    }
    status = gst_cv_dnn_image_of_frame(&frame, &image)
                 ? detect(self, s, buffer, image, false)
                 : cudanms::Status::Error("unsupported format");
    gst_video_frame_unmap(&frame);
  }
  if (!status.ok()) {
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Detection failed"), ("%s", status.message().c_str()));
    return GST_FLOW_ERROR;
  }
  GST_LOG_OBJECT(self, "frame detected in %.2f ms", (g_get_monotonic_time() - start) / 1000.0);
  return GST_FLOW_OK;
}

/* Upstream writing system-memory frames for the CUDA backend gets a pool of pinned host memory,
 * where downstream proposes none: the frames are then copied to the GPU at the bus's full rate
 * and asynchronously, where pageable memory is staged plane by plane on the batch's thread. */
static gboolean gst_dnn_detect_propose_allocation(GstBaseTransform *trans, GstQuery *decide_query,
                                                  GstQuery *query) {
  GstDnnDetect *self = GST_DNN_DETECT(trans);
  /* In place: downstream's proposal first. Sinks answer none (the query fails there). */
  const gboolean downstream =
      GST_BASE_TRANSFORM_CLASS(parent_class)->propose_allocation(trans, decide_query, query);
  if (downstream && gst_query_get_n_allocation_pools(query) > 0) return TRUE;
  if (!self->priv->network || !self->priv->network->detector().on_cuda()) return downstream;
  if (!gst_cv_propose_pinned_memory(query)) return downstream;
  GST_DEBUG_OBJECT(self, "proposed a pool of pinned memory");
  return TRUE;
}

/* The pipeline's CUDA context, handed over by the application or a neighbour... */
static void gst_dnn_detect_set_context(GstElement *element, GstContext *context) {
  GstDnnDetect *self = GST_DNN_DETECT(element);
  int gpu_id;
  {
    std::lock_guard<std::mutex> guard(self->priv->lock);
    gpu_id = self->priv->settings.gpu_id;
  }
  self->priv->cuda.set_context(element, context, gpu_id);
  GST_ELEMENT_CLASS(parent_class)->set_context(element, context);
}

/* ...and shared with neighbours asking for it. */
static gboolean gst_dnn_detect_query(GstBaseTransform *trans, GstPadDirection direction,
                                     GstQuery *query) {
  GstDnnDetect *self = GST_DNN_DETECT(trans);
  if (self->priv->cuda.handle_query(GST_ELEMENT(self), query)) return TRUE;
  return GST_BASE_TRANSFORM_CLASS(parent_class)->query(trans, direction, query);
}
