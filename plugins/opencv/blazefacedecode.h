/* BlazeFace's raw output as NMS candidates: MediaPipe's anchors, the letterbox that fits a frame
 * into the model's square input, and the decoding of the score and regressor tensors into boxes
 * and keypoints in frame pixels. Plain C++: no GStreamer, no OpenCV. */
#pragma once

#include <cstddef>
#include <vector>

namespace cudanms::blazeface {

/* The front (short-range) model's square input, in pixels. */
constexpr int kInputSize = 128;
/* Values per anchor in the regressor tensors: a box (x, y, w, h), then six keypoints (x, y). */
constexpr int kKeypoints = 6;
constexpr int kRegressors = 4 + 2 * kKeypoints;

/* An anchor's centre in [0, 1] of the model's input. Its size is 1 x 1: MediaPipe's face graph
 * sets fixed_anchor_size, so the regressors alone give the box's size. */
struct Anchor {
  float x_center;
  float y_center;
};

/* The 896 anchors of MediaPipe's SsdAnchorsCalculator with the options of its face detection
 * graph for this model (google-ai-edge/mediapipe,
 * mediapipe/modules/face_detection/face_detection_front_cpu.pbtxt): num_layers 4, strides
 * 8, 16, 16, 16, input 128x128, anchor_offset 0.5, one aspect ratio (1.0) plus the interpolated
 * scale, fixed_anchor_size. Layers of equal stride share one grid, so: 16x16 cells x 2 anchors
 * (the 512 of the first output head), then 8x8 cells x 6 anchors (the 384 of the second), row
 * by row, the anchors of a cell together. */
const std::vector<Anchor> &front_anchors();

/* How a frame of width x height sits in the square input: scaled by the same factor on both
 * axes to fit (MediaPipe's scale_mode FIT), centred, the rest padded. */
struct Letterbox {
  int frame_width = 0, frame_height = 0;
  int scaled_width = 0, scaled_height = 0;
  int pad_x = 0, pad_y = 0;

  static Letterbox fit(int frame_width, int frame_height, int input_size = kInputSize);
  /* A point in [0, 1] of the input as frame pixels (DetectionLetterboxRemovalCalculator). */
  float frame_x(float u, int input_size = kInputSize) const;
  float frame_y(float v, int input_size = kInputSize) const;
};

/* The candidates of one frame, in frame pixels, in anchor order. */
struct Candidates {
  std::vector<float> boxes;     /* x1, y1, x2, y2 per candidate */
  std::vector<float> scores;    /* sigmoid of the logit, clipped to [-100, 100] first */
  std::vector<float> keypoints; /* kKeypoints x {x, y} per candidate, in MediaPipe's order: right
                                   eye, left eye, nose tip, mouth centre, right and left ear
                                   tragion (the subject's right and left) */
  void clear();
  size_t size() const { return scores.size(); }
};

/* Appends every anchor of one output head whose score is at least score_threshold
 * (MediaPipe's TensorsToDetectionsCalculator with sigmoid_score, score_clipping_thresh 100,
 * reverse_output_order and x/y/w/h scales of 128; keypoints offset from the anchor like the
 * box's centre): logits[i] and regressors[kRegressors * i] belong to anchors[i], i < count. */
void decode(const float *logits, const float *regressors, const Anchor *anchors, size_t count,
            float score_threshold, const Letterbox &letterbox, Candidates *out);

}  // namespace cudanms::blazeface
