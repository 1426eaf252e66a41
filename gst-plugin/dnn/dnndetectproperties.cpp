#include "dnndetectproperties.h"

#include <cmath>
#include <sstream>
#include <vector>

namespace dnn = cudanms::dnn;

#define BLAZEFACE_MODEL_FILE "face_detection_front_128x128.torchscript.pt"
#define BLAZEFACE_CACHE_DIR "blazeface-1.2.0"
#define NANODET_MODEL_FILE "nanodet.torchscript.pt"
#define NANODET_CACHE_DIR "human-models-3.0.4"

/* The largest input the element accepts, per side. */
#define MAX_INPUT_SIZE 4096

namespace {

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

std::string lower(std::string text) {
  for (char &c : text) c = g_ascii_tolower(c);
  return text;
}

std::string trimmed(const std::string &text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

}  // namespace

#define GST_TYPE_DNN_DETECT_DECODER (gst_dnn_detect_decoder_get_type())
static GType gst_dnn_detect_decoder_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_DNN_DETECT_DECODER_BLAZEFACE,
       "MediaPipe BlazeFace front (tools/blazeface-to-torchscript.py): faces with 6 keypoints",
       "blazeface"},
      {GST_DNN_DETECT_DECODER_YOLO, "Ultralytics YOLO v8/v11: [B, 4 + classes, anchors]", "yolo"},
      {GST_DNN_DETECT_DECODER_NANODET,
       "NanoDet (tools/nanodet-to-torchscript.py): COCO's 80 classes, people and vehicles",
       "nanodet"},
      {GST_DNN_DETECT_DECODER_AUTO, "The named model's: nanodet for model=nanodet, else blazeface",
       "auto"},
      {0, NULL, NULL}};
  if (g_once_init_enter(&type)) {
    GType t = g_enum_register_static("GstDnnDetectDecoder", values);
    g_once_init_leave(&type, t);
  }
  return type;
}

#define GST_TYPE_DNN_DETECT_PRECISION (gst_dnn_detect_precision_get_type())
static GType gst_dnn_detect_precision_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_DNN_DETECT_PRECISION_TF32,
       "float32 weights and activations, the convolutions' inputs rounded to TF32 on GPUs with "
       "TF32 tensor cores (Ampere and later), as PyTorch and TensorRT do by default",
       "tf32"},
      {GST_DNN_DETECT_PRECISION_FP32,
       "IEEE float32 weights and activations: the GPU computes what the CPU does", "fp32"},
      {GST_DNN_DETECT_PRECISION_FP16,
       "float16 weights and activations on the GPU (the CPU computes in float32)", "fp16"},
      {0, NULL, NULL}};
  if (g_once_init_enter(&type)) {
    GType t = g_enum_register_static("GstDnnDetectPrecision", values);
    g_once_init_leave(&type, t);
  }
  return type;
}

dnn::Head DnnDetectSettings::head(const std::string &model) const {
  switch (decoder) {
    case GST_DNN_DETECT_DECODER_YOLO:
      return dnn::Head::kYolo;
    case GST_DNN_DETECT_DECODER_NANODET:
      return dnn::Head::kNanoDet;
    case GST_DNN_DETECT_DECODER_AUTO:
      return model == "nanodet" ? dnn::Head::kNanoDet : dnn::Head::kBlazeFace;
    default:
      return dnn::Head::kBlazeFace;
  }
}

bool DnnDetectSettings::input_spec(dnn::Head head, dnn::InputSpec *spec, std::string *why) const {
  *spec = dnn::model_input(head);
  if (input_width) spec->width = input_width;
  if (input_height) spec->height = input_height;
  spec->letterbox = letterbox;
  if (!mean.empty() && !parse_triple(mean, spec->mean)) {
    *why = "mean \"" + mean + "\" is not one number or three (R,G,B)";
    return false;
  }
  if (!scale.empty() && !parse_triple(scale, spec->scale)) {
    *why = "scale \"" + scale + "\" is not one number or three (R,G,B)";
    return false;
  }
  return true;
}

std::string DnnDetectSettings::model_path(dnn::Head head, const std::string &model) const {
  const bool named = model.empty() || model == dnn::head_name(head);
  if (!named || head == dnn::Head::kYolo) return model;
  const bool blazeface = head == dnn::Head::kBlazeFace;
  gchar *path = g_build_filename(g_get_user_cache_dir(), "cudanms",
                                 blazeface ? BLAZEFACE_CACHE_DIR : NANODET_CACHE_DIR,
                                 blazeface ? BLAZEFACE_MODEL_FILE : NANODET_MODEL_FILE, nullptr);
  std::string result = path;
  g_free(path);
  return result;
}

bool gst_dnn_detect_parse_classes(const std::string &text, const std::vector<std::string> &labels,
                                  dnn::ClassFilter *filter, std::string *why, std::string *known) {
  *filter = dnn::ClassFilter();
  known->clear();
  for (size_t c = 0; c < labels.size(); c++)
    if (!labels[c].empty()) *known += (known->empty() ? "" : ", ") + labels[c];
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const std::string name = lower(trimmed(item));
    if (name.empty()) continue;
    size_t id = 0;
    while (id < labels.size() && lower(labels[id]) != name) id++;
    if (id == labels.size()) {
      *why =
          "unknown class \"" + trimmed(item) + "\"" +
          (labels.empty() ? ": the network's classes have no names (labels-file names them)" : "");
      return false;
    }
    if (!filter->keep(static_cast<int>(id))) {
      *why = "class \"" + labels[id] + "\" has id " + std::to_string(id) +
             ": classes filters ids below " + std::to_string(dnn::kMaxFilteredClasses) + " only";
      return false;
    }
  }
  return true;
}

const std::vector<std::string> &gst_dnn_detect_coco_labels() {
  static const std::vector<std::string> names = {"person",        "bicycle",      "car",
                                                 "motorcycle",    "airplane",     "bus",
                                                 "train",         "truck",        "boat",
                                                 "traffic light", "fire hydrant", "stop sign",
                                                 "parking meter", "bench",        "bird",
                                                 "cat",           "dog",          "horse",
                                                 "sheep",         "cow",          "elephant",
                                                 "bear",          "zebra",        "giraffe",
                                                 "backpack",      "umbrella",     "handbag",
                                                 "tie",           "suitcase",     "frisbee",
                                                 "skis",          "snowboard",    "sports ball",
                                                 "kite",          "baseball bat", "baseball glove",
                                                 "skateboard",    "surfboard",    "tennis racket",
                                                 "bottle",        "wine glass",   "cup",
                                                 "fork",          "knife",        "spoon",
                                                 "bowl",          "banana",       "apple",
                                                 "sandwich",      "orange",       "broccoli",
                                                 "carrot",        "hot dog",      "pizza",
                                                 "donut",         "cake",         "chair",
                                                 "couch",         "potted plant", "bed",
                                                 "dining table",  "toilet",       "tv",
                                                 "laptop",        "mouse",        "remote",
                                                 "keyboard",      "cell phone",   "microwave",
                                                 "oven",          "toaster",      "sink",
                                                 "refrigerator",  "book",         "clock",
                                                 "vase",          "scissors",     "teddy bear",
                                                 "hair drier",    "toothbrush"};
  return names;
}

/* A read-only time in milliseconds. */
static GParamSpec *mean_ms_spec(const gchar *name, const gchar *nick, const gchar *blurb) {
  return g_param_spec_double(name, nick, blurb, 0.0, G_MAXDOUBLE, 0.0,
                             static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
}

/* A read-only property's getter: a counter's sum over frames per frame (0 before any). */
template <typename Sum>
static auto mean_per_frame(Sum DnnDetectCounters::*sum) {
  return [sum](const DnnDetectCounters &c, GValue *value) {
    g_value_set_double(value, c.frames ? static_cast<double>(c.*sum) / c.frames : 0.0);
  };
}

/* A read-only property's getter: the detector's GPU time of one kind per batch (or per gap). */
static auto mean_per_batch(double dnn::GpuTimes::*sum, uint64_t dnn::GpuTimes::*count) {
  return [sum, count](const DnnDetectCounters &c, GValue *value) {
    const dnn::GpuTimes gpu = c.gpu_times();
    g_value_set_double(value, gpu.*count ? gpu.*sum / gpu.*count : 0.0);
  };
}

namespace {

const GParamFlags kReadWriteReady =
    static_cast<GParamFlags>(G_PARAM_READWRITE | GST_PARAM_MUTABLE_READY | G_PARAM_STATIC_STRINGS);
const GParamFlags kReadOnly = static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);

/* What the network is: its decoder, input, classes and precision. */
void install_network(GObjectClass *klass, PropertyTable<DnnDetectSettings>::StateOf settings_of) {
  const GParamFlags rw_ready = kReadWriteReady;
  PropertyTable<DnnDetectSettings>(klass, settings_of)
      .field(g_param_spec_enum("decoder", "Decoder", "What the network's outputs mean",
                               GST_TYPE_DNN_DETECT_DECODER, GST_DNN_DETECT_DECODER_AUTO, rw_ready),
             &DnnDetectSettings::decoder)
      .field(g_param_spec_int("input-width", "Input width",
                              "Width of the network's input; 0: the decoder's (blazeface 128, "
                              "yolo 640, nanodet 416)",
                              0, MAX_INPUT_SIZE, 0, rw_ready),
             &DnnDetectSettings::input_width)
      .field(g_param_spec_int("input-height", "Input height",
                              "Height of the network's input; 0: the decoder's (blazeface 128, "
                              "yolo 640, nanodet 416)",
                              0, MAX_INPUT_SIZE, 0, rw_ready),
             &DnnDetectSettings::input_height)
      .field(g_param_spec_boolean("letterbox", "Letterbox",
                                  "Scale the frame to fit the input keeping its aspect, centred "
                                  "and padded (blazeface and nanodet black, yolo grey 114); false: "
                                  "stretch it",
                                  TRUE, rw_ready),
             &DnnDetectSettings::letterbox)
      .field(g_param_spec_string("mean", "Mean",
                                 "Subtracted from each pixel (0..255) before scaling: one value "
                                 "or \"R,G,B\"; empty: the decoder's (blazeface 127.5, yolo 0, "
                                 "nanodet 123.675,116.28,103.53)",
                                 "", rw_ready),
             &DnnDetectSettings::mean)
      .field(g_param_spec_string("scale", "Scale",
                                 "Multiplies each pixel after the mean: one value or \"R,G,B\"; "
                                 "empty: the decoder's (blazeface 1/127.5, yolo 1/255, nanodet "
                                 "1/58.395,1/57.12,1/57.375)",
                                 "", rw_ready),
             &DnnDetectSettings::scale)
      .field(g_param_spec_boolean(
                 "cuda-graphs", "CUDA graphs",
                 "With the CUDA backend, replay the network as a CUDA graph (one per "
                 "power-of-two batch up to batch-size, a batch padded up to it, all captured "
                 "when the element starts) "
                 "instead of launching its operators one by one; a network that cannot be "
                 "captured runs uncaptured, warned",
                 TRUE, rw_ready),
             &DnnDetectSettings::cuda_graphs)
      .field(g_param_spec_string(
                 "classes", "Classes",
                 "Only candidates of these classes, by name, ',' between them "
                 "(\"person,car\"): COCO's with decoder=nanodet, the labels file's with "
                 "decoder=yolo; an unknown name is an error at start, which lists the names; "
                 "empty: every class",
                 "", rw_ready),
             &DnnDetectSettings::classes)
      .field(
          g_param_spec_enum("precision", "Precision",
                            "The network's floats on the GPU: tf32 runs float32 convolutions "
                            "on the tensor cores (NanoDet 2.5x faster than fp32 on an H100, "
                            "boxes within ~1.5 % IoU of fp32's); fp32 gives the CPU's boxes; "
                            "fp16 halves the memory traffic too (boxes within about a pixel of "
                            "fp32's, warned on the CPU); the CPU computes in fp32",
                            GST_TYPE_DNN_DETECT_PRECISION, GST_DNN_DETECT_PRECISION_TF32, rw_ready),
          &DnnDetectSettings::precision);
}

/* How frames of several instances share a forward. */
void install_batching(GObjectClass *klass, PropertyTable<DnnDetectSettings>::StateOf settings_of) {
  const GParamFlags rw_ready = kReadWriteReady;
  PropertyTable<DnnDetectSettings>(klass, settings_of)
      .field(g_param_spec_int(
                 "batch-size", "Batch size",
                 "Frames per forward at most: dnndetect instances of one process with the "
                 "same batch-group, model, decoder, input, backend, gpu-id, cuda-graphs, "
                 "precision, batch-size and batch-timeout run their frames (e.g. one per camera) "
                 "through one "
                 "forward. A batch runs when it is full, when every instance has a frame in it, "
                 "or batch-timeout after its first frame; 1: no batching, no waiting",
                 1, dnn::kMaxBatch, 1, rw_ready),
             &DnnDetectSettings::batch_size)
      .field(g_param_spec_uint("batch-timeout", "Batch timeout",
                               "The longest a frame waits for other instances' frames, in "
                               "microseconds",
                               0, G_MAXINT, 20000, rw_ready),
             &DnnDetectSettings::batch_timeout)
      .field(g_param_spec_string("batch-group", "Batch group",
                                 "Instances batch together only with instances of the same group "
                                 "name",
                                 "", rw_ready),
             &DnnDetectSettings::batch_group)
      .field(g_param_spec_uint(
                 "frames-in-flight", "Frames in flight",
                 "Frames of this instance in the network at once: 1, each frame leaves before "
                 "the next one comes in; 2 or more, its next frame joins the next batch while "
                 "this one's runs, and a frame leaves once its candidates are in or when that "
                 "many are in flight, so that batches of many cameras keep the GPU busy "
                 "(up to frames-in-flight - 1 frames later out, reported as latency; a GPU failure "
                 "under a frame in flight is an error, as it cannot run again on the CPU)",
                 1, kMaxFramesInFlight, 1, rw_ready),
             &DnnDetectSettings::frames_in_flight);
}

/* What it counted since start, read-only. */
void install_counters(GObjectClass *klass, PropertyTable<DnnDetectCounters>::StateOf counters_of) {
  const GParamFlags ro = kReadOnly;
  PropertyTable<DnnDetectCounters>(klass, counters_of)
      .field(
          g_param_spec_uint64("frames-in-pinned-memory", "Frames in pinned memory",
                              "Frames since start that upstream wrote into the pinned host "
                              "memory this element proposes (CUDA backend), copied to the GPU "
                              "at the bus's rate",
                              0, G_MAXUINT64, 0, ro),
          [](auto &c) -> auto & { return c.frames_in_pinned_memory; })
      .read_only(g_param_spec_double("mean-batch", "Mean batch",
                                     "Frames per forward since start, averaged over this "
                                     "instance's frames (1 without batching)",
                                     0.0, dnn::kMaxBatch, 0.0, ro),
                 mean_per_frame(&DnnDetectCounters::batched_frames))
      .read_only(mean_ms_spec("mean-fill-ms", "Mean batch fill time",
                              "Per frame since start, the mean time its batch took to fill: "
                              "from the batch's first frame to its launch (waiting for the "
                              "other cameras; 0 without batching)"),
                 mean_per_frame(&DnnDetectCounters::fill_ms))
      .read_only(mean_ms_spec("mean-launch-ms", "Mean batch launch time",
                              "Per frame since start, the mean time its batch took to launch: "
                              "pre-processing, network and decoding queued on the GPU (the "
                              "frames' threads wait for it)"),
                 mean_per_frame(&DnnDetectCounters::launch_ms))
      .read_only(mean_ms_spec("mean-forward-gpu-ms", "Mean forward GPU time",
                              "Per batch of the detector (this instance's and those it batches "
                              "with) since it opened, the mean GPU time of its forward: from "
                              "when the detector's stream reached it, its pre-processing done, "
                              "to its decoding (CUDA; 0 before a batch has passed)"),
                 mean_per_batch(&dnn::GpuTimes::forward_ms, &dnn::GpuTimes::batches))
      .read_only(mean_ms_spec("mean-decode-gpu-ms", "Mean decode GPU time",
                              "Per batch of the detector since it opened, the mean GPU time of "
                              "its decoding, the candidates' download packed included (CUDA)"),
                 mean_per_batch(&dnn::GpuTimes::decode_ms, &dnn::GpuTimes::batches))
      .read_only(mean_ms_spec("mean-idle-gpu-ms", "Mean GPU idle time",
                              "Between two batches of the detector, the mean time its stream "
                              "stood idle from the first's end to the second's start: the GPU "
                              "waiting for a batch to fill and launch, or for its "
                              "pre-processing (CUDA)"),
                 mean_per_batch(&dnn::GpuTimes::idle_ms, &dnn::GpuTimes::gaps))
      .field(
          g_param_spec_uint64("graphed-frames", "Graphed frames",
                              "Frames since start whose forward replayed a CUDA graph", 0,
                              G_MAXUINT64, 0, ro),
          [](auto &c) -> auto & { return c.graphed_frames; });
}

}  // namespace

void gst_dnn_detect_install_properties(GObjectClass *klass,
                                       PropertyTable<DnnDetectSettings>::StateOf settings_of,
                                       PropertyTable<DnnDetectCounters>::StateOf counters_of) {
  install_network(klass, settings_of);
  install_batching(klass, settings_of);
  install_counters(klass, counters_of);
  gst_type_mark_as_plugin_api(GST_TYPE_DNN_DETECT_DECODER, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_DNN_DETECT_PRECISION, static_cast<GstPluginAPIFlags>(0));
}

const gchar *gst_dnn_detect_model_blurb() {
  return "Path of the TorchScript network, or a model the README's set-up converts: "
         "\"nanodet\" (NanoDet-g, COCO's 80 classes: $XDG_CACHE_HOME/cudanms/" NANODET_CACHE_DIR
         "/" NANODET_MODEL_FILE
         "), \"blazeface\" or empty with decoder=blazeface "
         "($XDG_CACHE_HOME/cudanms/" BLAZEFACE_CACHE_DIR "/" BLAZEFACE_MODEL_FILE
         "). Loaded when the element starts";
}
