/* The cudanms element's settable properties: their specs, and their values with what a value
 * that could not be used left behind. */
#pragma once

#include <gst/gst.h>

#include <string>
#include <vector>

#include "backend.h"
#include "cudanms/nms.h"
#include "cudanmslabels.h"
#include "propertytable.h"

/* What the settable properties say; copied under the lock at the top of each frame. */
struct Settings {
  double iou_threshold = 0.5;
  cudanms::Overlap overlap = cudanms::Overlap::kIoU;
  cudanms::Method method = cudanms::Method::kGreedy;
  double score_threshold = 0.0;
  // Set by the user: method=group applies it then only (groupRectangles looks at no score).
  bool score_threshold_set = false;
  guint max_candidates = 4096;
  guint max_detections = 0;
  bool class_agnostic = false;
  std::vector<std::vector<int32_t>> class_groups;
  cudanms::SoftDecay soft_decay = cudanms::SoftDecay::kGaussian;
  double sigma = 0.5;
  guint min_neighbors = 0;
  double group_eps = 0.2;
  GstCudaNmsBackend backend = GST_CUDA_NMS_BACKEND_AUTO;
  int gpu_id = -1; /* -1: the pipeline's CUDA context's device, else 0 */
  bool batch_streams = false;
  bool keep_candidates = false;
  guint stats_interval = 0;
  bool time_gpu = false;
  ClassLabels::Table labels;      /* from labels or labels-file, whichever was set last */
  guint64 backend_generation = 0; /* bumped when the NMS context must be made again */

  cudanms::Params params() const;
};

struct CudaNmsProperties {
  Settings settings;
  std::string labels_text;
  std::string labels_file;
  std::string labels_file_error; /* why labels-file could not be read; empty: it could */
  std::string class_groups_text;
  std::string class_groups_error; /* why class-groups is not valid; empty: it is */
};

/* Installs the settable properties on @klass (the element answers for its totals). A
 * labels-file that cannot be read, or class-groups that are not valid, leave the settings as
 * they were and say why in labels_file_error or class_groups_error, for @changed to tell. */
void gst_cuda_nms_install_properties(GObjectClass *klass,
                                     PropertyTable<CudaNmsProperties>::StateOf properties_of,
                                     PropertyTable<CudaNmsProperties>::Changed changed);
