#include "dnndetectproperties.h"

#include <cmath>
#include <sstream>
#include <vector>

namespace dnn = cudanms::dnn;

enum {
  PROP_DECODER = GST_CUDA_NMS_DETECTOR_N_PROPERTIES,
  PROP_INPUT_WIDTH,
  PROP_INPUT_HEIGHT,
  PROP_LETTERBOX,
  PROP_MEAN,
  PROP_SCALE,
  PROP_CUDA_GRAPHS,
  PROP_BATCH_SIZE,
  PROP_BATCH_TIMEOUT,
  PROP_BATCH_GROUP,
  PROP_FRAMES_IN_PINNED_MEMORY,
  PROP_MEAN_BATCH,
  PROP_GRAPHED_FRAMES,
};

#define BLAZEFACE_MODEL_FILE "face_detection_front_128x128.torchscript.pt"
#define BLAZEFACE_CACHE_DIR "blazeface-1.2.0"

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

/* The network's input for the settings: the decoder's own unless set. */
}  // namespace

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

bool DnnDetectSettings::input_spec(dnn::InputSpec *spec, std::string *why) const {
  const bool blazeface = decoder == GST_DNN_DETECT_DECODER_BLAZEFACE;
  *spec = dnn::InputSpec();
  spec->width = input_width ? input_width : blazeface ? 128 : 640;
  spec->height = input_height ? input_height : blazeface ? 128 : 640;
  spec->letterbox = letterbox;
  /* BlazeFace: [-1, 1], black padding (MediaPipe); YOLO: [0, 1], grey 114 padding (Ultralytics). */
  const float m = blazeface ? 127.5f : 0.0f, k = blazeface ? 1.0f / 127.5f : 1.0f / 255.0f;
  for (int c = 0; c < 3; c++) spec->mean[c] = m, spec->scale[c] = k;
  spec->pad_value = blazeface ? 0.0f : 114.0f;
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

std::string DnnDetectSettings::model_path(const std::string &model) const {
  if (!model.empty() || decoder != GST_DNN_DETECT_DECODER_BLAZEFACE) return model;
  gchar *path = g_build_filename(g_get_user_cache_dir(), "cudanms", BLAZEFACE_CACHE_DIR,
                                 BLAZEFACE_MODEL_FILE, nullptr);
  std::string result = path;
  g_free(path);
  return result;
}

void gst_dnn_detect_install_properties(GObjectClass *klass) {
  const GParamFlags rw_ready = static_cast<GParamFlags>(
      G_PARAM_READWRITE | GST_PARAM_MUTABLE_READY | G_PARAM_STATIC_STRINGS);
  const GParamFlags ro = static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_property(
      klass, PROP_DECODER,
      g_param_spec_enum("decoder", "Decoder", "What the network's outputs mean",
                        GST_TYPE_DNN_DETECT_DECODER, GST_DNN_DETECT_DECODER_BLAZEFACE, rw_ready));
  g_object_class_install_property(
      klass, PROP_INPUT_WIDTH,
      g_param_spec_int("input-width", "Input width",
                       "Width of the network's input; 0: the decoder's (blazeface 128, yolo 640)",
                       0, MAX_INPUT_SIZE, 0, rw_ready));
  g_object_class_install_property(
      klass, PROP_INPUT_HEIGHT,
      g_param_spec_int("input-height", "Input height",
                       "Height of the network's input; 0: the decoder's (blazeface 128, yolo 640)",
                       0, MAX_INPUT_SIZE, 0, rw_ready));
  g_object_class_install_property(
      klass, PROP_LETTERBOX,
      g_param_spec_boolean("letterbox", "Letterbox",
                           "Scale the frame to fit the input keeping its aspect, centred and "
                           "padded (blazeface black, yolo grey 114); false: stretch it",
                           TRUE, rw_ready));
  g_object_class_install_property(
      klass, PROP_MEAN,
      g_param_spec_string("mean", "Mean",
                          "Subtracted from each pixel (0..255) before scaling: one value or "
                          "\"R,G,B\"; empty: the decoder's (blazeface 127.5, yolo 0)",
                          "", rw_ready));
  g_object_class_install_property(
      klass, PROP_SCALE,
      g_param_spec_string("scale", "Scale",
                          "Multiplies each pixel after the mean: one value or \"R,G,B\"; empty: "
                          "the decoder's (blazeface 1/127.5, yolo 1/255)",
                          "", rw_ready));
  g_object_class_install_property(
      klass, PROP_CUDA_GRAPHS,
      g_param_spec_boolean(
          "cuda-graphs", "CUDA graphs",
          "With the CUDA backend, replay the network as a CUDA graph (one per power-of-two "
          "batch, a batch padded up to it, captured on its fourth forward) instead of launching "
          "its operators one by one; a network that cannot be captured runs uncaptured, warned",
          TRUE, rw_ready));
  g_object_class_install_property(
      klass, PROP_BATCH_SIZE,
      g_param_spec_int(
          "batch-size", "Batch size",
          "Frames per forward at most: dnndetect instances of one process with the "
          "same batch-group, model, decoder, input, backend, gpu-id, cuda-graphs, batch-size and "
          "batch-timeout run their frames (e.g. one per camera) through one forward. "
          "A batch runs when it is full, when every instance has a frame in it, or "
          "batch-timeout after its first frame; 1: no batching, no waiting",
          1, dnn::kMaxBatch, 1, rw_ready));
  g_object_class_install_property(
      klass, PROP_BATCH_TIMEOUT,
      g_param_spec_uint("batch-timeout", "Batch timeout",
                        "The longest a frame waits for other instances' frames, in microseconds", 0,
                        G_MAXINT, 20000, rw_ready));
  g_object_class_install_property(
      klass, PROP_BATCH_GROUP,
      g_param_spec_string("batch-group", "Batch group",
                          "Instances batch together only with instances of the same group name", "",
                          rw_ready));
  g_object_class_install_property(
      klass, PROP_FRAMES_IN_PINNED_MEMORY,
      g_param_spec_uint64("frames-in-pinned-memory", "Frames in pinned memory",
                          "Frames since start that upstream wrote into the pinned host memory "
                          "this element proposes (CUDA backend), copied to the GPU at the "
                          "bus's rate",
                          0, G_MAXUINT64, 0, ro));
  g_object_class_install_property(
      klass, PROP_MEAN_BATCH,
      g_param_spec_double("mean-batch", "Mean batch",
                          "Frames per forward since start, averaged over this instance's frames "
                          "(1 without batching)",
                          0.0, dnn::kMaxBatch, 0.0, ro));
  g_object_class_install_property(
      klass, PROP_GRAPHED_FRAMES,
      g_param_spec_uint64("graphed-frames", "Graphed frames",
                          "Frames since start whose forward replayed a CUDA graph", 0, G_MAXUINT64,
                          0, ro));

  gst_type_mark_as_plugin_api(GST_TYPE_DNN_DETECT_DECODER, static_cast<GstPluginAPIFlags>(0));
}

const gchar *gst_dnn_detect_model_blurb() {
  return "Path of the TorchScript network; empty with decoder=blazeface: "
         "$XDG_CACHE_HOME/cudanms/" BLAZEFACE_CACHE_DIR "/" BLAZEFACE_MODEL_FILE
         ", which the README's set-up writes. Loaded when the element starts";
}

bool gst_dnn_detect_set_setting(DnnDetectSettings *s, guint prop_id, const GValue *value) {
  switch (prop_id) {
    case PROP_DECODER:
      s->decoder = static_cast<GstDnnDetectDecoder>(g_value_get_enum(value));
      break;
    case PROP_INPUT_WIDTH:
      s->input_width = g_value_get_int(value);
      break;
    case PROP_INPUT_HEIGHT:
      s->input_height = g_value_get_int(value);
      break;
    case PROP_LETTERBOX:
      s->letterbox = g_value_get_boolean(value);
      break;
    case PROP_MEAN:
      s->mean = string_value(value);
      break;
    case PROP_SCALE:
      s->scale = string_value(value);
      break;
    case PROP_CUDA_GRAPHS:
      s->cuda_graphs = g_value_get_boolean(value);
      break;
    case PROP_BATCH_SIZE:
      s->batch_size = g_value_get_int(value);
      break;
    case PROP_BATCH_TIMEOUT:
      s->batch_timeout = g_value_get_uint(value);
      break;
    case PROP_BATCH_GROUP:
      s->batch_group = string_value(value);
      break;
    default:
      return false;
  }
  return true;
}

bool gst_dnn_detect_get_setting(const DnnDetectSettings &s, const DnnDetectCounters &counters,
                                guint prop_id, GValue *value) {
  switch (prop_id) {
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
    case PROP_CUDA_GRAPHS:
      g_value_set_boolean(value, s.cuda_graphs);
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
      g_value_set_uint64(value, counters.frames_in_pinned_memory);
      break;
    case PROP_MEAN_BATCH:
      g_value_set_double(value, counters.frames
                                    ? static_cast<double>(counters.batched_frames) / counters.frames
                                    : 0.0);
      break;
    case PROP_GRAPHED_FRAMES:
      g_value_set_uint64(value, counters.graphed_frames);
      break;
    default:
      return false;
  }
  return true;
}
