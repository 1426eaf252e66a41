/* GstCudaNmsDetector: the abstract base class of the detector elements (cvdetect, blazeface,
 * cudacascade, dnndetect), on the model of gst-plugins-bad's GstCudaBaseTransform. A detector
 * reads each frame and attaches its candidates (one GstCudaNmsCandidatesMeta) for cudanms.
 *
 * The base owns what every detector does alike:
 * - the lock and the shared properties (model, label, class-id, labels-file, the threshold,
 *   min-size and max-size, backend, gpu-id, device-candidates, and the read-only device and
 *   frames-in-gpu-memory), installed by each subclass for what it has
 *   (gst_cuda_nms_detector_class_install_properties) and one copy of them, made again when one
 * changes, goes with each frame;
 * - the labels it announces downstream;
 * - the pipeline's CUDA context (found or made in start(), answered to neighbours) and the device
 *   candidates pool;
 * - the frame: in place, read where it is when it lies in GPU memory of the detector's CUDA
 *   context (detect_on_device), else mapped read-only on the host (detect_on_host);
 * - a GPU failing mid-stream: a warning and the "cudanms-gpu-failed" element message
 *   (gpufailure.h), then the subclass's detector made again on the CPU (fall_back_to_cpu) and the
 *   frame read again there.
 * A subclass opens and closes its model and detects on a frame; nothing else.
 *
 * It lives in a shared library (libgstcudanmsdetector, like gst-plugins-bad's libgstcuda) that
 * every detector's plugin module links: one copy in a process, the type registered once.
 *
 * A subclass's own properties are its own, as in any element: a PropertyTable
 * (propertytable.h) of its class, its values in its instance under gst_cuda_nms_detector_lock;
 * the shared ones are rows of the base's table, installed on the subclass's class by
 * gst_cuda_nms_detector_class_install_properties. */
#pragma once

#include <cudanms/nms.h>
#include <gst/video/gstvideofilter.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend.h"
#include "detectorproperties.h"
#include "propertytable.h"

class CudaFrame;
class ElementCudaContext;
namespace cudanms {
class DeviceCandidates;
}

#define GST_TYPE_CUDA_NMS_DETECTOR (gst_cuda_nms_detector_get_type())
G_DECLARE_DERIVABLE_TYPE(GstCudaNmsDetector, gst_cuda_nms_detector, GST, CUDA_NMS_DETECTOR,
                         GstVideoFilter)

/* What the properties say; the same copy goes with each call until a property changes. */
struct GstCudaNmsDetectorSettings {
  std::string model;      /* as set: a subclass says what empty means */
  DetectorClass detected; /* label, class-id */
  std::string labels_file;
  double threshold = 0.0; /* named by the subclass: score-threshold, hit-threshold */
  WindowSizes sizes;
  GstCudaNmsBackend backend = GST_CUDA_NMS_BACKEND_AUTO;
  /* As set, -1 for the device of the pipeline's CUDA context; in the copies the calls get
   * (gst_cuda_nms_detector_settings), the device it runs on, resolved in start(). */
  gint gpu_id = -1;
  bool device_candidates = true;
};

/* What a detection gives the base: done; failed (the stream stops with an element error, this
 * summary and detail); or the GPU failed (the base falls back to the CPU where the subclass can,
 * and reads the frame again there). */
class GstCudaNmsDetection {
 public:
  enum class Outcome { kDone, kFailed, kGpuFailed };
  static GstCudaNmsDetection done() { return GstCudaNmsDetection(Outcome::kDone, "", ""); }
  static GstCudaNmsDetection failed(std::string summary, std::string detail = "") {
    return GstCudaNmsDetection(Outcome::kFailed, std::move(summary), std::move(detail));
  }
  static GstCudaNmsDetection gpu_failed(std::string detail) {
    return GstCudaNmsDetection(Outcome::kGpuFailed, "", std::move(detail));
  }
  Outcome outcome() const { return outcome_; }
  const std::string &summary() const { return summary_; }
  const std::string &detail() const { return detail_; }

 private:
  GstCudaNmsDetection(Outcome outcome, std::string summary, std::string detail)
      : outcome_(outcome), summary_(std::move(summary)), detail_(std::move(detail)) {}
  Outcome outcome_;
  std::string summary_, detail_;
};

struct _GstCudaNmsDetectorClass {
  GstVideoFilterClass parent_class;

  /* In start(): loads the model and makes the detector, on CUDA device settings.gpu_id where
   * settings.backend allows and it can (inside gst_cuda_nms_detector_cuda_context's scope), else
   * on the CPU; then says where (gst_cuda_nms_detector_set_device). FALSE: it posted the error. */
  gboolean (*open)(GstCudaNmsDetector *self, const GstCudaNmsDetectorSettings &settings);
  /* In stop(), and before open() again. */
  void (*close)(GstCudaNmsDetector *self);
  /* The frame's candidates, attached to @buffer, from the frame mapped on the host. */
  GstCudaNmsDetection (*detect_on_host)(GstCudaNmsDetector *self, GstBuffer *buffer,
                                        GstVideoFrame *frame,
                                        const GstCudaNmsDetectorSettings &settings);

  /* Optional. The same from a frame in GPU memory of the detector's CUDA context, in a format
   * reads_in_place accepts (every format when that is NULL). */
  GstCudaNmsDetection (*detect_on_device)(GstCudaNmsDetector *self, GstBuffer *buffer,
                                          const CudaFrame &frame,
                                          const GstCudaNmsDetectorSettings &settings);
  gboolean (*reads_in_place)(GstVideoFormat format);
  /* Optional. After its GPU failed: the detector made again on the CPU (and set_device said so).
   * NULL or FALSE: the stream stops. */
  gboolean (*fall_back_to_cpu)(GstCudaNmsDetector *self,
                               const GstCudaNmsDetectorSettings &settings);
  /* Optional. The name announced for class-id when label is empty and no labels file names the
   * classes (e.g. the model file's); "" (or NULL) announces nothing. */
  std::string (*default_label)(GstCudaNmsDetector *self,
                               const GstCudaNmsDetectorSettings &settings);
};

/* What a subclass's properties say about the shared ones; NULL blurbs leave a property out. */
struct GstCudaNmsDetectorProperties {
  /* "model": what it loads when it starts (a path, or a name the subclass knows). */
  const gchar *model_default = "";
  const gchar *model_blurb = nullptr;
  /* "label" and "class-id", which every detector has. */
  const gchar *label_default = "";
  const gchar *label_blurb = nullptr;
  /* The score threshold (e.g. "score-threshold", "hit-threshold"), which every detector has. */
  const gchar *threshold_name = "score-threshold";
  const gchar *threshold_blurb = nullptr;
  double threshold_min = 0.0, threshold_max = 1.0, threshold_default = 0.5;
  /* "min-size" and "max-size". */
  const gchar *min_size_blurb = nullptr;
  /* "labels-file": class ids' names, announced instead of label. */
  const gchar *labels_file_blurb = nullptr;
  /* "backend", "gpu-id", "device-candidates" and the read-only "device" and
   * "frames-in-gpu-memory": a detector that can run on CUDA. */
  const gchar *backend_blurb = nullptr;
  const gchar *device_candidates_blurb = nullptr;
};

/* In the subclass's class_init: the shared properties it has, installed on its class. */
void gst_cuda_nms_detector_class_install_properties(GstCudaNmsDetectorClass *klass,
                                                    const GstCudaNmsDetectorProperties &properties);

/* In the subclass's class_init: its sink and src pads (an in-place filter: the same caps on
 * both), video in system memory in @formats ("{ GRAY8, I420 }") and, with gstreamer-cuda, in GPU
 * memory (memory:CUDAMemory) in @cuda_formats, where it reads frames in place (NULL: none). */
void gst_cuda_nms_detector_class_add_pad_templates(GstCudaNmsDetectorClass *klass,
                                                   const gchar *formats, const gchar *cuda_formats);

/* The lock that guards the settings: a subclass guards its own properties' values and counters
 * with it too. */
std::unique_lock<std::mutex> gst_cuda_nms_detector_lock(GstCudaNmsDetector *self);
/* The same lock, for a subclass's PropertyTable: its own properties, a member of its `priv`,
 *   locked_member<GstCvDetect, &GstCvDetectPrivate::settings, gst_cuda_nms_detector_mutex> */
std::mutex *gst_cuda_nms_detector_mutex(GObject *detector);
/* The settings as the properties say them now (shared until a property changes). */
std::shared_ptr<const GstCudaNmsDetectorSettings> gst_cuda_nms_detector_settings(
    GstCudaNmsDetector *self);

/* The names of the classes by id that the detector announces downstream: the labels file's (read
 * before open()), else those set_labels gave; empty: none (the label of class-id, if any). */
const std::vector<std::string> &gst_cuda_nms_detector_labels(GstCudaNmsDetector *self);
/* In open(): the network's own class names by id (e.g. COCO's), announced unless a labels file
 * names the classes; a blank name is not announced. */
void gst_cuda_nms_detector_set_labels(GstCudaNmsDetector *self, std::vector<std::string> labels);

/* In open() and fall_back_to_cpu(): where the detector runs, e.g. "cuda:0 (NVIDIA H100)" or
 * "cpu" (the device property), and the CUcontext whose GPU memory it reads frames from in place
 * (nullptr: none, every frame is mapped on the host). */
void gst_cuda_nms_detector_set_device(GstCudaNmsDetector *self, const std::string &name,
                                      void *cuda_context);
/* Whether the detector runs on CUDA (set_device gave it a context). */
bool gst_cuda_nms_detector_on_cuda(GstCudaNmsDetector *self);

/* The pipeline's CUDA context for settings.gpu_id, found or made before open() unless
 * backend=cpu or no CUDA device is usable (then it holds none). */
ElementCudaContext &gst_cuda_nms_detector_cuda_context(GstCudaNmsDetector *self);

/* A device candidates buffer for up to @capacity candidates, from the element's pool, in its CUDA
 * context; nullptr (the frame's candidates then go in host memory) when device-candidates is
 * off, the detector is not on CUDA, @buffer already holds candidates, every buffer is still
 * downstream or the GPU cannot give one. Attach it with gst_cv_attach_device_candidates. */
std::shared_ptr<cudanms::DeviceCandidates> gst_cuda_nms_detector_device_candidates(
    GstCudaNmsDetector *self, GstBuffer *buffer, const GstCudaNmsDetectorSettings &settings,
    size_t capacity);
