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
 * - nanodet: NanoDet-g (RangiLyu/nanodet, Apache-2.0), COCO's 80 classes at 416x416, as
 *   tools/nanodet-to-torchscript.py converts the TF.js model the README's set-up fetches;
 *   model=nanodet (decoder=auto, the default, then means this decoder) finds it in
 *   $XDG_CACHE_HOME/cudanms/human-models-3.0.4/. The frame is letterboxed black, in BGR,
 *   normalised by ImageNet's mean and std, as NanoDet's config says; each side of a box is the
 *   mean of its Generalized Focal Loss distribution. Every class of an anchor scoring at least
 *   score-threshold is a candidate of its own (NanoDet's rule); NanoDet then keeps per class at
 *   IoU 0.6, at most 100 boxes (cudanms iou-threshold=0.6 max-detections=100). classes keeps
 *   only the named ones (classes=person,car); COCO's names are announced downstream.
 * - yolo: Ultralytics YOLO v8/v11 exported with `yolo export format=torchscript` (output
 *   [B, 4 + classes, anchors]); each anchor's best class. Class ids are the model's class indices;
 *   labels-file names them (one per line) for overlays, writers and classes.
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
 * every instance has a frame in it, or batch-timeout after its first frame. A queue after each
 * instance (queue max-size-buffers=2) lets its next frame join the next batch while cudanms waits
 * for this one's GPU work, so that batches fill and launch while the last one runs; where the
 * candidates come back to the host (BlazeFace's), frames-in-flight=2 keeps a frame while the
 * camera's next one joins the next batch.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 filesrc location=vtest.avi ! decodebin ! videoconvert ! \
 *     dnndetect model=nanodet classes=person,car score-threshold=0.35 ! \
 *     cudanms iou-threshold=0.6 ! boxtrack ! boxoverlay ! videoconvert ! autovideosink
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

#include <memory>
#include <string>

#include "cudaframe.h"
#include "detections.h"
#include "devicecandidates.h"
#include "dnnbatchgroup.h"
#include "dnndetectproperties.h"
#include "dnnframesinflight.h"
#include "dnnimage.h"
#include "elementclass.h"
#include "elementcudacontext.h"
#include "pinnedpool.h"
#include "torchmodel.h"

GST_DEBUG_CATEGORY_STATIC(gst_dnn_detect_debug);
#define GST_CAT_DEFAULT gst_dnn_detect_debug

namespace dnn = cudanms::dnn;

#define DEFAULT_SCORE_THRESHOLD 0.5

#define VIDEO_FORMATS "{ RGB, BGR, RGBx, BGRx, RGBA, BGRA, I420, NV12 }"
#define CUDA_FORMATS "{ I420, NV12 }" /* in GPU memory, read in place */

struct GstDnnDetectPrivate {
  DnnDetectSettings settings; /* under the base's lock */
  DnnDetectCounters counters; /* under the base's lock */

  /* Streaming thread (and start/stop) only. */
  DnnDetectSettings running; /* settings as they were at start */
  dnn::InputSpec spec;
  dnn::Head head = dnn::Head::kBlazeFace;
  dnn::ClassFilter classes;
  std::unique_ptr<DnnBatchGroup::Member> network;
  bool graph_problem_told = false;
  std::unique_ptr<DnnFramesInFlight> in_flight; /* between open() and close() */
};

static GstCudaNmsDetection finish(GstDnnDetect *self, DnnFrame *frame, GstBuffer *buffer);

ELEMENT_DEFINE(GstDnnDetect, gst_dnn_detect, GstCudaNmsDetector, GST_TYPE_CUDA_NMS_DETECTOR,
               dnndetect, "DNN detector (TorchScript)");

/* ------------------------------------------------------------------------------------------ */
/* The network                                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* The network told to the base: where it runs, and the CUDA context (the device's primary one,
 * LibTorch's) of frames it reads in place. */
static void use_network(GstDnnDetect *self, std::unique_ptr<DnnBatchGroup::Member> network) {
  self->priv->network = std::move(network);
  const DnnDetector &detector = self->priv->network->detector();
  if (detector.on_cuda()) {
    auto guard = gst_cuda_nms_detector_lock(GST_CUDA_NMS_DETECTOR(self));
    self->priv->counters.on_gpu = &detector;
  }
  gst_cuda_nms_detector_set_device(GST_CUDA_NMS_DETECTOR(self), detector.device_name(),
                                   detector.on_cuda() ? detector.context() : nullptr);
}

/* The element's network in its batch group, on CUDA device shared.gpu_id unless @on_cpu. */
static std::unique_ptr<DnnBatchGroup::Member> join_batch_group(
    GstDnnDetect *self, const GstCudaNmsDetectorSettings &shared, bool on_cpu, std::string *why,
    std::string *detail) {
  const DnnDetectSettings &s = self->priv->running;
  DnnBatchGroup::Options options;
  options.name = s.batch_group;
  options.batch_size = s.batch_size;
  options.timeout_us = s.batch_timeout;
  options.config.model_path = s.model_path(self->priv->head, shared.model);
  options.config.head = self->priv->head;
  options.config.spec = self->priv->spec;
  options.config.cuda_graphs = s.cuda_graphs;
  options.config.device = on_cpu ? -1 : shared.gpu_id;
  options.config.half_precision = !on_cpu && s.precision == GST_DNN_DETECT_PRECISION_FP16;
  options.config.tf32 = !on_cpu && s.precision == GST_DNN_DETECT_PRECISION_TF32;
  return DnnBatchGroup::join(options, why, detail);
}

/* On CUDA device shared.gpu_id where the backend allows and it can, else on the CPU (warned for
 * backend=auto). */
static bool open_network(GstDnnDetect *self, const GstCudaNmsDetectorSettings &shared,
                         const std::string &path) {
  std::unique_ptr<DnnBatchGroup::Member> network;
  std::string why, detail;
  if (shared.backend != GST_CUDA_NMS_BACKEND_CPU) {
    if (!cudanms::cuda_available()) {
      why = "no usable CUDA device (or cudanms built without CUDA)";
    } else if (!TorchModel::cuda_usable(shared.gpu_id)) {
      why = "this LibTorch has no CUDA for device " + std::to_string(shared.gpu_id);
    } else {
      network = join_batch_group(self, shared, false, &why, &detail);
      if (!network) why = "model \"" + path + "\" " + why + ": " + detail;
    }
    if (!network && !gst_cuda_nms_backend_falls_back(GST_ELEMENT(self), shared.backend,
                                                     shared.gpu_id, "the network", why))
      return false;
  }
  if (!network) network = join_batch_group(self, shared, true, &why, &detail);
  if (!network) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("Model \"%s\" %s", path.c_str(), why.c_str()),
                      ("%s", detail.c_str()));
    return false;
  }
  use_network(self, std::move(network));
  if (!self->priv->network->detector().on_cuda() &&
      self->priv->running.precision == GST_DNN_DETECT_PRECISION_FP16) {
    GST_ELEMENT_WARNING(self, RESOURCE, SETTINGS,
                        ("precision=fp16 runs on the GPU only: the network computes in fp32 on "
                         "the CPU"),
                        (NULL));
  }
  return true;
}

/* The classes the element keeps, from their names: the labels file's, else the network's own
 * (NanoDet's COCO names, which it announces downstream as it would a labels file's). */
static bool choose_classes(GstDnnDetect *self) {
  GstDnnDetectPrivate *priv = self->priv;
  GstCudaNmsDetector *detector = GST_CUDA_NMS_DETECTOR(self);
  if (priv->head == dnn::Head::kNanoDet && gst_cuda_nms_detector_labels(detector).empty())
    gst_cuda_nms_detector_set_labels(detector, gst_dnn_detect_coco_labels());
  std::string why, known;
  if (!gst_dnn_detect_parse_classes(priv->running.classes, gst_cuda_nms_detector_labels(detector),
                                    &priv->classes, &why, &known)) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                      ("Invalid classes \"%s\": %s", priv->running.classes.c_str(), why.c_str()),
                      ("the classes are: %s", known.empty() ? "(no names)" : known.c_str()));
    return false;
  }
  return true;
}

static gboolean gst_dnn_detect_open(GstCudaNmsDetector *detector,
                                    const GstCudaNmsDetectorSettings &shared) {
  GstDnnDetect *self = GST_DNN_DETECT(detector);
  GstDnnDetectPrivate *priv = self->priv;
  {
    auto guard = gst_cuda_nms_detector_lock(detector);
    priv->counters = DnnDetectCounters();
    priv->running = priv->settings;
  }
  const DnnDetectSettings &s = priv->running;
  priv->graph_problem_told = false;
  priv->head = s.head(shared.model);
  std::string why;
  if (!s.input_spec(priv->head, &priv->spec, &why)) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("Invalid input settings"), ("%s", why.c_str()));
    return FALSE;
  }
  if (!choose_classes(self)) return FALSE;
  const std::string path = s.model_path(priv->head, shared.model);
  if (path.empty()) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS, ("No model"),
                      ("decoder=yolo needs model, the path of a TorchScript file (yolo export "
                       "format=torchscript)"));
    return FALSE;
  }
  if (!cudanms::check_bounded_file(path, cudanms::kModelFileLimit, &why)) {
    GST_ELEMENT_ERROR(self, RESOURCE, NOT_FOUND,
                      ("Model file \"%s\" cannot be read: %s", path.c_str(), why.c_str()),
                      ("model must be a TorchScript file; the README's set-up makes "
                       "model=nanodet's (tools/fetch-nanodet.sh, then "
                       "tools/nanodet-to-torchscript.py) and BlazeFace's "
                       "(tools/fetch-blazeface.sh, then tools/blazeface-to-torchscript.py)"));
    return FALSE;
  }
  if (!open_network(self, shared, path)) return FALSE;
  priv->in_flight = std::make_unique<DnnFramesInFlight>(
      GST_BASE_TRANSFORM(self),
      [self](DnnFrame *frame) { return finish(self, frame, frame->buffer); });
  const DnnDetector &network = priv->network->detector();
  /* Unless the pipeline had a CUDA context first, it shares the network's (the device's primary
   * one) with nvh264dec, cudaupload and cudanms; otherwise frames in its memory are mapped on the
   * host and cudanms downloads the candidates, correct but slower. */
  const void *pipeline_context = gst_cuda_nms_detector_cuda_context(detector).handle();
  if (network.on_cuda() && pipeline_context && pipeline_context != network.context()) {
    GST_INFO_OBJECT(self,
                    "the pipeline's CUDA context is not the device's primary one, the network's: "
                    "frames in its memory are copied");
  }
  GST_INFO_OBJECT(self, "model %s (%s): %d anchors, %d classes, input %dx%d, on %s, batches of %d",
                  path.c_str(), dnn::head_name(priv->head), network.anchors(), network.classes(),
                  priv->spec.width, priv->spec.height, network.device_name().c_str(), s.batch_size);
  return TRUE;
}

/* The network let go; its GPU times kept for the properties. */
static void leave_network(GstDnnDetect *self) {
  {
    auto guard = gst_cuda_nms_detector_lock(GST_CUDA_NMS_DETECTOR(self));
    DnnDetectCounters &c = self->priv->counters;
    c.gpu = c.gpu_times();
    c.on_gpu = nullptr;
  }
  self->priv->network.reset();
}

static void gst_dnn_detect_close(GstCudaNmsDetector *detector) {
  GstDnnDetect *self = GST_DNN_DETECT(detector);
  self->priv->in_flight.reset(); /* waits for their batches: before the network goes */
  leave_network(self);
}

/* The network joins its batch group again, on the CPU. */
static gboolean gst_dnn_detect_fall_back_to_cpu(GstCudaNmsDetector *detector,
                                                const GstCudaNmsDetectorSettings &shared) {
  GstDnnDetect *self = GST_DNN_DETECT(detector);
  /* The frames in flight leave later, in order, with what their batches gave. */
  self->priv->in_flight->wait_all();
  leave_network(self);
  std::string why, detail;
  std::unique_ptr<DnnBatchGroup::Member> network =
      join_batch_group(self, shared, true, &why, &detail);
  if (!network) {
    GST_WARNING_OBJECT(self, "the network cannot run on the CPU: %s: %s", why.c_str(),
                       detail.c_str());
    return FALSE;
  }
  use_network(self, std::move(network));
  return TRUE;
}

/* 'face' for BlazeFace; NanoDet's are COCO's (set_labels), YOLO's named by the labels file. */
static std::string gst_dnn_detect_default_label(GstCudaNmsDetector *detector,
                                                const GstCudaNmsDetectorSettings &) {
  return GST_DNN_DETECT(detector)->priv->head == dnn::Head::kBlazeFace ? "face" : "";
}

/* ------------------------------------------------------------------------------------------ */
/* The frame                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* Counted, and a network that could not be captured as a CUDA graph warned about once. */
static void count(GstDnnDetect *self, const DnnJob &job, GstBuffer *buffer) {
  GstDnnDetectPrivate *priv = self->priv;
  const DnnDetector &detector = priv->network->detector();
  {
    auto guard = gst_cuda_nms_detector_lock(GST_CUDA_NMS_DETECTOR(self));
    DnnDetectCounters &c = priv->counters;
    c.frames++;
    c.batched_frames += job.batch;
    c.fill_ms += job.fill_ms;
    c.launch_ms += job.launch_ms;
    if (!job.on_device && detector.on_cuda() && gst_cv_buffer_is_pinned(buffer))
      c.frames_in_pinned_memory++;
    if (job.graphed) c.graphed_frames++;
  }
  if (!detector.on_cuda() || !priv->running.cuda_graphs || job.graphed || priv->graph_problem_told)
    return;
  const std::string problem = detector.graph_problem();
  if (problem.empty()) return;
  priv->graph_problem_told = true;
  GST_ELEMENT_WARNING(self, LIBRARY, FAILED,
                      ("The network cannot run as a CUDA graph: its operators are launched one "
                       "by one (slower)"),
                      ("%s", problem.c_str()));
}

/* The frame's batch waited for and its candidates attached to its buffer: left in GPU memory
 * where the base's pool gave a buffer, else in host memory. */
static GstCudaNmsDetection finish(GstDnnDetect *self, DnnFrame *frame, GstBuffer *buffer) {
  const cudanms::Status status = frame->wait();
  if (!status.ok()) {
    if (self->priv->network->detector().on_cuda())
      return GstCudaNmsDetection::gpu_failed(status.message());
    return GstCudaNmsDetection::failed("Detection failed", status.message());
  }
  count(self, frame->job, buffer);
  if (frame->out) {
    if (!gst_cv_attach_device_candidates(buffer, std::move(frame->out), frame->gpu_id))
      return GstCudaNmsDetection::failed("Could not attach the device candidates");
    return GstCudaNmsDetection::done();
  }
  const dnn::Candidates &c = frame->host;
  if (!gst_cv_attach_candidates_of_classes(buffer, c.boxes, c.scores, c.class_ids, c.points,
                                           c.points_per_candidate))
    return GstCudaNmsDetection::failed("Could not add the candidates meta");
  return GstCudaNmsDetection::done();
}

/* The frame handed to the network (in a batch with other elements' frames where the group has
 * them). With frames-in-flight 1 its candidates are attached before this returns; above, the
 * frame stays in flight and generate_output hands it out once they are. */
static GstCudaNmsDetection detect(GstDnnDetect *self, GstBuffer *buffer,
                                  const GstCudaNmsDetectorSettings &shared, const dnn::Image &image,
                                  bool on_device) {
  GstDnnDetectPrivate *priv = self->priv;
  const DnnDetector &detector = priv->network->detector();
  std::unique_ptr<DnnFrame> frame = priv->in_flight->take();
  DnnJob &job = frame->job;
  job.image = image;
  job.on_device = on_device;
  job.params.score_threshold = static_cast<float>(shared.threshold);
  job.params.class_id = shared.detected.class_id;
  job.params.classes = priv->classes;
  job.host = &frame->host;
  frame->gpu_id = shared.gpu_id;
  if (detector.points_per_candidate() == 0) {
    frame->out = gst_cuda_nms_detector_device_candidates(
        GST_CUDA_NMS_DETECTOR(self), buffer, shared, detector.max_candidates(job.params));
    job.device_out = frame->out.get();
  }
  const bool stays = priv->running.frames_in_flight > 1;
  if (stays && !on_device) {
    /* Its planes as the batch will read them, mapped until it is finished. */
    if (!gst_video_frame_map(
            &frame->mapped, &GST_VIDEO_FILTER(self)->in_info, buffer,
            static_cast<GstMapFlags>(GST_MAP_READ | GST_VIDEO_FRAME_MAP_FLAG_NO_REF)))
      return GstCudaNmsDetection::failed("Could not read the frame");
    frame->is_mapped = true; /* unmapped by the frame itself (DnnFrame::wait), on error too */
    if (!gst_cv_dnn_image_of_frame(&frame->mapped, &job.image))
      return GstCudaNmsDetection::failed("Detection failed", "unsupported format");
  }
  frame->network = priv->network.get();
  frame->ticket = priv->network->submit(&job);
  frame->submitted = true;
  if (!stays) {
    const GstCudaNmsDetection detection = finish(self, frame.get(), buffer);
    priv->in_flight->recycle(std::move(frame));
    return detection;
  }
  priv->in_flight->submitted(std::move(frame));
  return GstCudaNmsDetection::done();
}

static GstCudaNmsDetection gst_dnn_detect_detect_on_host(GstCudaNmsDetector *detector,
                                                         GstBuffer *buffer, GstVideoFrame *frame,
                                                         const GstCudaNmsDetectorSettings &shared) {
  dnn::Image image;
  if (!gst_cv_dnn_image_of_frame(frame, &image))
    return GstCudaNmsDetection::failed("Detection failed", "unsupported format");
  return detect(GST_DNN_DETECT(detector), buffer, shared, image, false);
}

static GstCudaNmsDetection gst_dnn_detect_detect_on_device(
    GstCudaNmsDetector *detector, GstBuffer *buffer, const CudaFrame &frame,
    const GstCudaNmsDetectorSettings &shared) {
  const guint8 *planes[3] = {frame.plane(0), frame.plane(1), frame.plane(2)};
  const int strides[3] = {frame.stride(0), frame.stride(1), frame.stride(2)};
  dnn::Image image;
  if (!gst_cv_dnn_image_of(frame.format(), frame.width(), frame.height(), frame.info().colorimetry,
                           planes, strides, &image))
    return GstCudaNmsDetection::failed("Unsupported format in GPU memory");
  return detect(GST_DNN_DETECT(detector), buffer, shared, image, true);
}

/* ------------------------------------------------------------------------------------------ */
/* Frames in flight (frames-in-flight above 1)                                                  */
/* ------------------------------------------------------------------------------------------ */

/* The base's frame (detected by transform_ip) held while its batch may run; out goes the oldest
 * frame once its candidates are in (DnnFramesInFlight). GstBaseTransform calls this again after
 * each frame handed out, until none is. */
static GstFlowReturn gst_dnn_detect_generate_output(GstBaseTransform *trans, GstBuffer **outbuf) {
  GstDnnDetectPrivate *priv = GST_DNN_DETECT(trans)->priv;
  GstBuffer *fresh = nullptr;
  const GstFlowReturn ret =
      GST_BASE_TRANSFORM_CLASS(gst_dnn_detect_parent_class)->generate_output(trans, &fresh);
  if (!priv->in_flight) { /* not started */
    *outbuf = fresh;
    return ret;
  }
  if (ret != GST_FLOW_OK) {
    priv->in_flight->drop();
    *outbuf = fresh;
    return ret;
  }
  return priv->in_flight->hold(fresh, priv->running.frames_in_flight, outbuf);
}

static gboolean gst_dnn_detect_sink_event(GstBaseTransform *trans, GstEvent *event) {
  DnnFramesInFlight *in_flight = GST_DNN_DETECT(trans)->priv->in_flight.get();
  if (in_flight && GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP)
    in_flight->drop();
  else if (in_flight && GST_EVENT_IS_SERIALIZED(event))
    in_flight->drain();
  return GST_BASE_TRANSFORM_CLASS(gst_dnn_detect_parent_class)->sink_event(trans, event);
}

static guint frames_in_flight_setting(GstDnnDetect *self) {
  auto guard = gst_cuda_nms_detector_lock(GST_CUDA_NMS_DETECTOR(self));
  return self->priv->settings.frames_in_flight;
}

/* A live pipeline's latency with the frames held added, so that sinks wait for them. */
static gboolean gst_dnn_detect_query(GstBaseTransform *trans, GstPadDirection direction,
                                     GstQuery *query) {
  if (!GST_BASE_TRANSFORM_CLASS(gst_dnn_detect_parent_class)->query(trans, direction, query))
    return FALSE;
  if (direction != GST_PAD_SRC || GST_QUERY_TYPE(query) != GST_QUERY_LATENCY) return TRUE;
  gboolean live;
  GstClockTime min, max;
  gst_query_parse_latency(query, &live, &min, &max);
  const GstClockTime held = dnn_held_latency(frames_in_flight_setting(GST_DNN_DETECT(trans)),
                                             GST_VIDEO_FILTER(trans)->in_info);
  if (live && held > 0) {
    gst_query_set_latency(query, live, min + held,
                          GST_CLOCK_TIME_IS_VALID(max) ? max + held : GST_CLOCK_TIME_NONE);
  }
  return TRUE;
}

/* Upstream writing system-memory frames for the CUDA backend gets a pool of pinned host memory,
 * where downstream proposes none: the frames are then copied to the GPU at the bus's full rate
 * and asynchronously, where pageable memory is staged plane by plane on the batch's thread. */
static gboolean gst_dnn_detect_propose_allocation(GstBaseTransform *trans, GstQuery *decide_query,
                                                  GstQuery *query) {
  GstDnnDetect *self = GST_DNN_DETECT(trans);
  /* In place: downstream's proposal first. Sinks answer none (the query fails there). */
  gboolean proposed = GST_BASE_TRANSFORM_CLASS(gst_dnn_detect_parent_class)
                          ->propose_allocation(trans, decide_query, query);
  if ((!proposed || gst_query_get_n_allocation_pools(query) == 0) && self->priv->network &&
      gst_cuda_nms_detector_on_cuda(GST_CUDA_NMS_DETECTOR(self)) &&
      gst_cv_propose_pinned_memory(query)) {
    GST_DEBUG_OBJECT(self, "proposed a pool of pinned memory");
    proposed = TRUE;
  }
  if (proposed) dnn_reserve_held_buffers(query, frames_in_flight_setting(self));
  return proposed;
}

/* ------------------------------------------------------------------------------------------ */
/* The element: its instance and its class                                                     */
/* ------------------------------------------------------------------------------------------ */

static void gst_dnn_detect_class_init(GstDnnDetectClass *klass) {
  GstCudaNmsDetectorClass *detector_class = GST_CUDA_NMS_DETECTOR_CLASS(klass);

  own_private<GstDnnDetect>(klass);

  GstCudaNmsDetectorProperties shared;
  shared.model_blurb = gst_dnn_detect_model_blurb();
  shared.label_blurb =
      "Name of class-id's candidates, announced downstream for overlays and writers; empty: "
      "'face' with decoder=blazeface";
  shared.threshold_blurb = "Candidates scoring below this (0..1) are not attached";
  shared.threshold_default = DEFAULT_SCORE_THRESHOLD;
  shared.labels_file_blurb =
      "A text file with one class name per line, line N naming class id N, announced "
      "downstream and read by classes; empty: none (decoder=nanodet: COCO's names)";
  shared.backend_blurb = "Where the network and its processing run";
  shared.device_candidates_blurb =
      "With the CUDA backend, leave candidates without points in GPU memory for cudanms to use "
      "in place; false, and for decoders with points: host memory each frame";
  gst_cuda_nms_detector_class_install_properties(detector_class, shared);
  gst_dnn_detect_install_properties(
      G_OBJECT_CLASS(klass),
      locked_member<GstDnnDetect, &GstDnnDetectPrivate::settings, gst_cuda_nms_detector_mutex>,
      locked_member<GstDnnDetect, &GstDnnDetectPrivate::counters, gst_cuda_nms_detector_mutex>);

  gst_cuda_nms_detector_class_add_pad_templates(detector_class, VIDEO_FORMATS, CUDA_FORMATS);
  describe_element(
      klass, "DNN detector (TorchScript)", "Filter/Analyzer/Video",
      "Runs a TorchScript detector (NanoDet, BlazeFace, YOLO) with LibTorch, on the GPU where it "
      "can, and attaches every candidate above the score threshold as cudanms candidates "
      "metadata");

  ELEMENT_VFUNCS(GST_BASE_TRANSFORM_CLASS(klass), gst_dnn_detect, propose_allocation,
                 generate_output, sink_event, query);
  ELEMENT_VFUNCS(detector_class, gst_dnn_detect, open, close, fall_back_to_cpu, detect_on_host,
                 detect_on_device, default_label);
}
