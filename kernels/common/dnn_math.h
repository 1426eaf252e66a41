// The arithmetic of cudanms/dnn.h, compiled by the host compiler and nvcc alike so that the CPU
// and the GPU make the same input tensor and the same candidates: pixel fetch and YUV to RGB,
// the bilinear taps, and each head's decoding of one anchor.
#pragma once

#include <math.h>  // ::floorf, ::expf for host and device alike

#include <cstdint>

#include "common/overlap.h"  // CUDANMS_HD
#include "cudanms/dnn.h"

namespace cudanms::detail {

// A frame and an input the backends can sample: an error saying what is missing.
Status check_image(const dnn::Image &image, const dnn::InputSpec &spec);

// ---- Pixels --------------------------------------------------------------------------------

struct Rgb {
  float r, g, b;
};

CUDANMS_HD float clamp255(float v) { return v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v; }

// Y'CbCr to R'G'B' from the matrix's Kr and Kb (ITU-R BT.601 and BT.709), limited or full range.
CUDANMS_HD Rgb yuv_to_rgb(float y, float u, float v, dnn::YuvMatrix matrix, bool full_range) {
  const float kr = matrix == dnn::YuvMatrix::kBt709 ? 0.2126f : 0.299f;
  const float kb = matrix == dnn::YuvMatrix::kBt709 ? 0.0722f : 0.114f;
  const float kg = 1.0f - kr - kb;
  const float ys = full_range ? 1.0f : 255.0f / 219.0f;
  const float cs = full_range ? 1.0f : 255.0f / 224.0f;
  const float l = (y - (full_range ? 0.0f : 16.0f)) * ys;
  const float cb = (u - 128.0f) * cs, cr = (v - 128.0f) * cs;
  return {clamp255(l + 2.0f * (1.0f - kr) * cr),
          clamp255(l - (2.0f * kb * (1.0f - kb) / kg) * cb - (2.0f * kr * (1.0f - kr) / kg) * cr),
          clamp255(l + 2.0f * (1.0f - kb) * cb)};
}

CUDANMS_HD Rgb fetch_rgb(const dnn::Image &im, int x, int y) {
  const uint8_t *row = im.planes[0] + static_cast<int64_t>(y) * im.strides[0];
  switch (im.format) {
    case dnn::PixelFormat::kRGB:
      return {float(row[3 * x]), float(row[3 * x + 1]), float(row[3 * x + 2])};
    case dnn::PixelFormat::kBGR:
      return {float(row[3 * x + 2]), float(row[3 * x + 1]), float(row[3 * x])};
    case dnn::PixelFormat::kRGBx:
      return {float(row[4 * x]), float(row[4 * x + 1]), float(row[4 * x + 2])};
    case dnn::PixelFormat::kBGRx:
      return {float(row[4 * x + 2]), float(row[4 * x + 1]), float(row[4 * x])};
    case dnn::PixelFormat::kI420: {
      const int64_t c = static_cast<int64_t>(y / 2);
      return yuv_to_rgb(float(row[x]), float(im.planes[1][c * im.strides[1] + x / 2]),
                        float(im.planes[2][c * im.strides[2] + x / 2]), im.matrix, im.full_range);
    }
    default: {  // kNV12
      const uint8_t *uv = im.planes[1] + static_cast<int64_t>(y / 2) * im.strides[1] + (x / 2) * 2;
      return yuv_to_rgb(float(row[x]), float(uv[0]), float(uv[1]), im.matrix, im.full_range);
    }
  }
}

// ---- Resampling ----------------------------------------------------------------------------

// The two frame pixels one input pixel interpolates along one axis, and the weight of the
// second: bilinear sampling at pixel centres, the rule of OpenCV's `cv::resize(INTER_LINEAR)`
// (Ultralytics' LetterBox) and of MediaPipe's GPU ImageToTensorCalculator. Scaled down too: no
// averaging of the footprint, as the models were trained and are served so.
struct Taps {
  int first = 0, last = 0;  // last == first + 1, or first at the frame's edge
  float t = 0;              // the weight of `last`

  // Output position o of an axis of `scaled` pixels drawn from `source` pixels. Positions left
  // of the first pixel's centre take it; right of the last one's, the last (OpenCV's clamping).
  CUDANMS_HD static Taps of(int o, int scaled, int source) {
    Taps taps;
    // In double as OpenCV does, then float: the position of a pixel far into a large frame.
    float x = float((double(o) + 0.5) * (double(source) / scaled) - 0.5);
    if (x < 0.0f) x = 0.0f;
    taps.first = int(floorf(x));
    if (taps.first >= source - 1) {
      taps.first = taps.last = source - 1;
      return taps;
    }
    taps.last = taps.first + 1;
    taps.t = x - float(taps.first);
    return taps;
  }
};

// Input pixel (x, y) of the tensor, RGB in 0..255 before normalisation.
CUDANMS_HD Rgb input_pixel(const dnn::Image &im, const dnn::InputSpec &spec,
                           const dnn::Letterbox &box, int x, int y) {
  const int sx = x - box.pad_x, sy = y - box.pad_y;
  if (sx < 0 || sy < 0 || sx >= box.scaled_width || sy >= box.scaled_height) {
    return {spec.pad_value, spec.pad_value, spec.pad_value};
  }
  const Taps tx = Taps::of(sx, box.scaled_width, im.width);
  const Taps ty = Taps::of(sy, box.scaled_height, im.height);
  auto row = [&](int j) {
    const Rgb a = fetch_rgb(im, tx.first, j), b = fetch_rgb(im, tx.last, j);
    return Rgb{a.r + tx.t * (b.r - a.r), a.g + tx.t * (b.g - a.g), a.b + tx.t * (b.b - a.b)};
  };
  const Rgb top = row(ty.first), bottom = row(ty.last);
  return {top.r + ty.t * (bottom.r - top.r), top.g + ty.t * (bottom.g - top.g),
          top.b + ty.t * (bottom.b - top.b)};
}

// Input pixel `at` of one frame's [3, H, W] slice (planes `plane` floats apart): normalised, in
// the spec's channel order.
CUDANMS_HD void write_input(float *chw, int64_t plane, int64_t at, Rgb p,
                            const dnn::InputSpec &spec) {
  const float r = (p.r - spec.mean[0]) * spec.scale[0];
  const float g = (p.g - spec.mean[1]) * spec.scale[1];
  const float b = (p.b - spec.mean[2]) * spec.scale[2];
  chw[at] = spec.bgr ? b : r;
  chw[plane + at] = g;
  chw[2 * plane + at] = spec.bgr ? r : b;
}

// ---- Heads ---------------------------------------------------------------------------------

CUDANMS_HD bool class_kept(const dnn::ClassFilter &filter, int class_id) {
  return filter.all || (class_id >= 0 && class_id < dnn::kMaxFilteredClasses &&
                        ((filter.bits[class_id / 32] >> (class_id % 32)) & 1u));
}

// Input pixels to frame pixels, in double as the frame may be far larger than the input.
CUDANMS_HD float to_frame_x(const dnn::Letterbox &box, float input_x) {
  return static_cast<float>((double(input_x) - box.pad_x) * box.frame_width / box.scaled_width);
}
CUDANMS_HD float to_frame_y(const dnn::Letterbox &box, float input_y) {
  return static_cast<float>((double(input_y) - box.pad_y) * box.frame_height / box.scaled_height);
}

constexpr int kBlazeFaceAnchors = 896;
constexpr int kBlazeFaceRegressors = 16;
constexpr int kBlazeFacePoints = 6;
constexpr float kBlazeFaceInput = 128.0f;

CUDANMS_HD dnn::Anchor blazeface_anchor(int i) {
  // 512 anchors of stride 8 (16x16 cells, 2 each), then 384 of stride 16 (8x8 cells, 6 each).
  const int cells = i < 512 ? 16 : 8;
  const int cell = i < 512 ? i / 2 : (i - 512) / 6;
  return {(float(cell % cells) + 0.5f) / float(cells), (float(cell / cells) + 0.5f) / float(cells)};
}

// Anchor i of a BlazeFace output: false when it scores below the threshold (or NaN); else its
// box (x1, y1, x2, y2) and points in frame pixels. MediaPipe's TensorsToDetectionsCalculator
// (sigmoid score clipped at 100, x/y/w/h scales 128, fixed anchor size).
CUDANMS_HD bool decode_blazeface(const float *regressors, const float *logits, int i,
                                 const dnn::Letterbox &box, float threshold, float *out_box,
                                 float *score, float *points) {
  float logit = logits[i];
  logit = logit < -100.0f ? -100.0f : logit > 100.0f ? 100.0f : logit;
  *score = 1.0f / (1.0f + expf(-logit));
  if (!(*score >= threshold)) return false;
  const float *r = regressors + static_cast<int64_t>(i) * kBlazeFaceRegressors;
  const dnn::Anchor a = blazeface_anchor(i);
  const float scale = kBlazeFaceInput;
  const float xc = a.x_center + r[0] / scale, yc = a.y_center + r[1] / scale;
  const float half_w = r[2] / scale / 2, half_h = r[3] / scale / 2;
  out_box[0] = to_frame_x(box, (xc - half_w) * scale);
  out_box[1] = to_frame_y(box, (yc - half_h) * scale);
  out_box[2] = to_frame_x(box, (xc + half_w) * scale);
  out_box[3] = to_frame_y(box, (yc + half_h) * scale);
  if (points) {
    for (int k = 0; k < kBlazeFacePoints; k++) {
      points[2 * k] = to_frame_x(box, (a.x_center + r[4 + 2 * k] / scale) * scale);
      points[2 * k + 1] = to_frame_y(box, (a.y_center + r[5 + 2 * k] / scale) * scale);
    }
  }
  return true;
}

// Anchor i of a YOLO output [4 + classes, anchors] (one frame's): its best class, the first of
// equal scores; false when that scores below the threshold, no class has a number or the filter
// drops the best class (Ultralytics' `classes`).
CUDANMS_HD bool decode_yolo(const float *out, int anchors, int classes, int i,
                            const dnn::Letterbox &box, float threshold,
                            const dnn::ClassFilter &filter, float *out_box, float *score,
                            int32_t *class_id) {
  float best = -INFINITY;
  int best_class = -1;
  for (int c = 0; c < classes; c++) {
    const float s = out[static_cast<int64_t>(4 + c) * anchors + i];
    if (s > best) best = s, best_class = c;
  }
  if (best_class < 0 || !(best >= threshold) || !class_kept(filter, best_class)) return false;
  const float cx = out[i], cy = out[anchors + i];
  const float w = out[2 * static_cast<int64_t>(anchors) + i];
  const float h = out[3 * static_cast<int64_t>(anchors) + i];
  out_box[0] = to_frame_x(box, cx - w / 2);
  out_box[1] = to_frame_y(box, cy - h / 2);
  out_box[2] = to_frame_x(box, cx + w / 2);
  out_box[3] = to_frame_y(box, cy + h / 2);
  *score = best;
  *class_id = best_class;
  return true;
}

// NanoDet's anchors: the cells of three strides, the finest first, each grid row by row.
constexpr int kNanoDetLevels = 3;
CUDANMS_HD int nanodet_stride(int level) { return 8 << level; }
// A level's grid over the input: its cells per row and per column (NanoDet's convolutions
// give ceil(size / stride)).
CUDANMS_HD int nanodet_cells(int size, int level) {
  return (size + nanodet_stride(level) - 1) / nanodet_stride(level);
}
CUDANMS_HD int nanodet_anchors(int width, int height) {
  int n = 0;
  for (int l = 0; l < kNanoDetLevels; l++) n += nanodet_cells(width, l) * nanodet_cells(height, l);
  return n;
}

// One side's distance in strides: the mean bin index under the softmax of its logits (NanoDet's
// Integral layer), the largest logit subtracted first as softmax does.
CUDANMS_HD float gfl_distance(const float *logits, int bins) {
  float top = logits[0];
  for (int k = 1; k < bins; k++) top = logits[k] > top ? logits[k] : top;
  float sum = 0.0f, weighted = 0.0f;
  for (int k = 0; k < bins; k++) {
    const float e = expf(logits[k] - top);
    sum += e;
    weighted += e * float(k);
  }
  return weighted / sum;
}

// Anchor i's box (x1, y1, x2, y2) in frame pixels, from its 4 x bins logits: the cell's centre
// ((col + 0.5) stride, (row + 0.5) stride) less the left and top distances, plus the right and
// bottom ones, clipped to the frame (NanoDet clips to the input, then its final boxes to the
// image: the frame is what a box can show).
CUDANMS_HD void decode_nanodet_box(const float *distributions, int bins, int i, int input_width,
                                   int input_height, const dnn::Letterbox &box, float *out_box) {
  int level = 0, cell = i;
  while (level < kNanoDetLevels - 1 &&
         cell >= nanodet_cells(input_width, level) * nanodet_cells(input_height, level)) {
    cell -= nanodet_cells(input_width, level) * nanodet_cells(input_height, level);
    level++;
  }
  const int columns = nanodet_cells(input_width, level);
  const float stride = float(nanodet_stride(level));
  const float cx = (float(cell % columns) + 0.5f) * stride;
  const float cy = (float(cell / columns) + 0.5f) * stride;
  const float *side = distributions + static_cast<int64_t>(i) * 4 * bins;
  const float input[4] = {cx - gfl_distance(side, bins) * stride,
                          cy - gfl_distance(side + bins, bins) * stride,
                          cx + gfl_distance(side + 2 * bins, bins) * stride,
                          cy + gfl_distance(side + 3 * bins, bins) * stride};
  const float w = float(box.frame_width), h = float(box.frame_height);
  const auto clip = [](float v, float high) { return v < 0.0f ? 0.0f : v > high ? high : v; };
  out_box[0] = clip(to_frame_x(box, input[0]), w);
  out_box[1] = clip(to_frame_y(box, input[1]), h);
  out_box[2] = clip(to_frame_x(box, input[2]), w);
  out_box[3] = clip(to_frame_y(box, input[3]), h);
}

// How many of anchor i's classes score at least the threshold and pass the filter (NaN never).
CUDANMS_HD int nanodet_classes_kept(const float *scores, int classes, int i, float threshold,
                                    const dnn::ClassFilter &filter) {
  const float *s = scores + static_cast<int64_t>(i) * classes;
  int n = 0;
  for (int c = 0; c < classes; c++) n += (s[c] >= threshold && class_kept(filter, c)) ? 1 : 0;
  return n;
}

}  // namespace cudanms::detail
