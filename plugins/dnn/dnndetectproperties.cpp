#include "dnndetectproperties.h"

#include <cmath>
#include <sstream>
#include <vector>

namespace dnn = cudanms::dnn;

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

void gst_dnn_detect_install_properties(GObjectClass *klass,
                                       PropertyTable<DnnDetectSettings>::StateOf settings_of,
                                       PropertyTable<DnnDetectCounters>::StateOf counters_of) {
  const GParamFlags rw_ready = static_cast<GParamFlags>(
      G_PARAM_READWRITE | GST_PARAM_MUTABLE_READY | G_PARAM_STATIC_STRINGS);
  const GParamFlags ro = static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  PropertyTable<DnnDetectSettings>(klass, settings_of)
      .field(
          g_param_spec_enum("decoder", "Decoder", "What the network's outputs mean",
                            GST_TYPE_DNN_DETECT_DECODER, GST_DNN_DETECT_DECODER_BLAZEFACE,
                            rw_ready),
          &DnnDetectSettings::decoder)
      .field(
          g_param_spec_int("input-width", "Input width",
                           "Width of the network's input; 0: the decoder's (blazeface 128, "
                           "yolo 640)",
                           0, MAX_INPUT_SIZE, 0, rw_ready),
          &DnnDetectSettings::input_width)
      .field(
          g_param_spec_int("input-height", "Input height",
                           "Height of the network's input; 0: the decoder's (blazeface 128, "
                           "yolo 640)",
                           0, MAX_INPUT_SIZE, 0, rw_ready),
          &DnnDetectSettings::input_height)
      .field(
          g_param_spec_boolean("letterbox", "Letterbox",
                               "Scale the frame to fit the input keeping its aspect, centred "
                               "and padded (blazeface black, yolo grey 114); false: stretch it",
                               TRUE, rw_ready),
          &DnnDetectSettings::letterbox)
      .field(
          g_param_spec_string("mean", "Mean",
                              "Subtracted from each pixel (0..255) before scaling: one value "
                              "or \"R,G,B\"; empty: the decoder's (blazeface 127.5, yolo 0)",
                              "", rw_ready),
          &DnnDetectSettings::mean)
      .field(
          g_param_spec_string("scale", "Scale",
                              "Multiplies each pixel after the mean: one value or \"R,G,B\"; "
                              "empty: the decoder's (blazeface 1/127.5, yolo 1/255)",
                              "", rw_ready),
          &DnnDetectSettings::scale)
      .field(
          g_param_spec_boolean(
              "cuda-graphs", "CUDA graphs",
              "With the CUDA backend, replay the network as a CUDA graph (one per "
              "power-of-two batch up to batch-size, a batch padded up to it, all captured "
              "when the element starts) "
              "instead of launching its operators one by one; a network that cannot be "
              "captured runs uncaptured, warned",
              TRUE, rw_ready),
          &DnnDetectSettings::cuda_graphs)
      .field(
          g_param_spec_int(
              "batch-size", "Batch size",
              "Frames per forward at most: dnndetect instances of one process with the "
              "same batch-group, model, decoder, input, backend, gpu-id, cuda-graphs, "
              "batch-size and batch-timeout run their frames (e.g. one per camera) through one "
              "forward. A batch runs when it is full, when every instance has a frame in it, "
              "or batch-timeout after its first frame; 1: no batching, no waiting",
              1, dnn::kMaxBatch, 1, rw_ready),
          &DnnDetectSettings::batch_size)
      .field(
          g_param_spec_uint("batch-timeout", "Batch timeout",
                            "The longest a frame waits for other instances' frames, in "
                            "microseconds",
                            0, G_MAXINT, 20000, rw_ready),
          &DnnDetectSettings::batch_timeout)
      .field(
          g_param_spec_string("batch-group", "Batch group",
                              "Instances batch together only with instances of the same group "
                              "name",
                              "", rw_ready),
          &DnnDetectSettings::batch_group);
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
                 [](const DnnDetectCounters &c, GValue *value) {
                   g_value_set_double(
                       value, c.frames ? static_cast<double>(c.batched_frames) / c.frames : 0.0);
                 })
      .field(
          g_param_spec_uint64("graphed-frames", "Graphed frames",
                              "Frames since start whose forward replayed a CUDA graph", 0,
                              G_MAXUINT64, 0, ro),
          [](auto &c) -> auto & { return c.graphed_frames; });

  gst_type_mark_as_plugin_api(GST_TYPE_DNN_DETECT_DECODER, static_cast<GstPluginAPIFlags>(0));
}

const gchar *gst_dnn_detect_model_blurb() {
  return "Path of the TorchScript network; empty with decoder=blazeface: "
         "$XDG_CACHE_HOME/cudanms/" BLAZEFACE_CACHE_DIR "/" BLAZEFACE_MODEL_FILE
         ", which the README's set-up writes. Loaded when the element starts";
}
