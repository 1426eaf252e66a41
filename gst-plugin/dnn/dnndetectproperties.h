/* dnndetect's own properties (the shared ones are GstCudaNmsDetector's): what the network is and
 * how its input is made and batched, and the counters it reads back. */
#pragma once

#include <cudanms/dnn.h>
#include <gst/gst.h>

#include <string>
#include <vector>

#include "dnndetector.h"
#include "gstcudanmsdetector.h"
#include "propertytable.h"

typedef enum {
  GST_DNN_DETECT_DECODER_BLAZEFACE,
  GST_DNN_DETECT_DECODER_YOLO,
  GST_DNN_DETECT_DECODER_NANODET,
  GST_DNN_DETECT_DECODER_AUTO,
} GstDnnDetectDecoder;

typedef enum {
  GST_DNN_DETECT_PRECISION_FP32,
  GST_DNN_DETECT_PRECISION_FP16,
  GST_DNN_DETECT_PRECISION_TF32,
} GstDnnDetectPrecision;

/* The most frames an instance keeps in the network at once (frames-in-flight). */
constexpr guint kMaxFramesInFlight = 8;

/* What its own properties say (guarded by the base's lock). */
struct DnnDetectSettings {
  GstDnnDetectDecoder decoder = GST_DNN_DETECT_DECODER_AUTO;
  int input_width = 0, input_height = 0;
  bool letterbox = true;
  std::string mean, scale;
  bool cuda_graphs = true;
  int batch_size = 1;
  guint batch_timeout = 20000;
  std::string batch_group;
  guint frames_in_flight = 1;
  std::string classes;
  GstDnnDetectPrecision precision = GST_DNN_DETECT_PRECISION_TF32;

  /* What the outputs of @model (the shared property) mean: the decoder's, or with decoder=auto
   * the named model's (model=nanodet: NanoDet; else BlazeFace). */
  cudanms::dnn::Head head(const std::string &model) const;
  /* The network's input for @head: the decoder's own unless set; false (and *why) for a bad
   * mean or scale. */
  bool input_spec(cudanms::dnn::Head head, cudanms::dnn::InputSpec *spec, std::string *why) const;
  /* The file of @model: a path as it is; empty or a model's name ("blazeface", "nanodet") is
   * that model where the README's set-up converts it ($XDG_CACHE_HOME/cudanms/...); empty for
   * YOLO, which has no such model. */
  std::string model_path(cudanms::dnn::Head head, const std::string &model) const;
};

/* Class names (e.g. "person, car") into the ids of @labels (by id, compared without case):
 * the filter, or false and *why naming the unknown one. *known: the names there are. Empty text:
 * every class. */
bool gst_dnn_detect_parse_classes(const std::string &text, const std::vector<std::string> &labels,
                                  cudanms::dnn::ClassFilter *filter, std::string *why,
                                  std::string *known);
/* COCO's 80 class names by NanoDet's class id, "person" to "toothbrush". */
const std::vector<std::string> &gst_dnn_detect_coco_labels();

/* Since start: frames, the sum over frames of the frames in their forward, those replaying a CUDA
 * graph and those upstream wrote into the pinned memory the element proposed; the sums over
 * frames of their batch's fill and launch times (DnnJob); the GPU times of its detector (those
 * of every instance it batches with): read from the detector on CUDA while it runs (`on_gpu`),
 * else the last ones it had. */
struct DnnDetectCounters {
  guint64 frames = 0, batched_frames = 0, graphed_frames = 0, frames_in_pinned_memory = 0;
  double fill_ms = 0, launch_ms = 0;
  const DnnDetector *on_gpu = nullptr;
  cudanms::dnn::GpuTimes gpu;
  cudanms::dnn::GpuTimes gpu_times() const { return on_gpu ? on_gpu->gpu_times() : gpu; }
};

/* Installs its own properties on @klass: the settings, and the counters read-only. */
void gst_dnn_detect_install_properties(GObjectClass *klass,
                                       PropertyTable<DnnDetectSettings>::StateOf settings_of,
                                       PropertyTable<DnnDetectCounters>::StateOf counters_of);
/* The shared "model" property's blurb, which names the models' places. */
const gchar *gst_dnn_detect_model_blurb();
