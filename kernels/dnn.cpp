// cudanms/dnn.h on the CPU, and what both backends share.
#include "cudanms/dnn.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>

#include "common/dnn_math.h"

namespace cudanms::detail {

Status check_image(const dnn::Image &image, const dnn::InputSpec &spec) {
  if (spec.width <= 0 || spec.height <= 0) return Status::Error("the input size must be positive");
  if (image.width <= 0 || image.height <= 0) return Status::Error("the frame is empty");
  const bool yuv =
      image.format == dnn::PixelFormat::kI420 || image.format == dnn::PixelFormat::kNV12;
  const int planes = image.format == dnn::PixelFormat::kI420 ? 3 : yuv ? 2 : 1;
  for (int p = 0; p < planes; p++) {
    if (!image.planes[p] || image.strides[p] <= 0) {
      return Status::Error("the frame's plane " + std::to_string(p) + " is missing");
    }
  }
  return Status::Ok();
}

}  // namespace cudanms::detail

namespace cudanms::dnn {

using detail::kBlazeFaceAnchors;
using detail::kBlazeFacePoints;
using detail::kBlazeFaceRegressors;

Letterbox Letterbox::fit(int frame_width, int frame_height, const InputSpec &spec) {
  Letterbox l;
  l.frame_width = frame_width;
  l.frame_height = frame_height;
  if (!spec.letterbox) {
    l.scaled_width = spec.width;
    l.scaled_height = spec.height;
    return l;
  }
  const double scale =
      std::min(double(spec.width) / frame_width, double(spec.height) / frame_height);
  // Ties to even, as Python's round() in Ultralytics' LetterBox: 1280x721 at 0.5 is 360 rows.
  const auto rounded = [](double v) { return static_cast<int>(std::nearbyint(v)); };
  l.scaled_width = std::clamp(rounded(frame_width * scale), 1, spec.width);
  l.scaled_height = std::clamp(rounded(frame_height * scale), 1, spec.height);
  l.pad_x = (spec.width - l.scaled_width) / 2;
  l.pad_y = (spec.height - l.scaled_height) / 2;
  return l;
}

float Letterbox::frame_x(float input_x) const { return detail::to_frame_x(*this, input_x); }
float Letterbox::frame_y(float input_y) const { return detail::to_frame_y(*this, input_y); }

Status preprocess(const Image &image, const InputSpec &spec, float *chw) {
  Status status = detail::check_image(image, spec);
  if (!status.ok()) return status;
  const Letterbox box = Letterbox::fit(image.width, image.height, spec);
  const int64_t plane = static_cast<int64_t>(spec.width) * spec.height;
  for (int y = 0; y < spec.height; y++) {
    for (int x = 0; x < spec.width; x++) {
      const int64_t at = static_cast<int64_t>(y) * spec.width + x;
      detail::write_input(chw, plane, at, detail::input_pixel(image, spec, box, x, y), spec);
    }
  }
  return Status::Ok();
}

const char *head_name(Head head) {
  switch (head) {
    case Head::kBlazeFace:
      return "blazeface";
    case Head::kYolo:
      return "yolo";
    default:
      return "nanodet";
  }
}

InputSpec model_input(Head head) {
  InputSpec spec;
  switch (head) {
    case Head::kBlazeFace:
      spec.width = spec.height = 128;
      for (int c = 0; c < 3; c++) spec.mean[c] = 127.5f, spec.scale[c] = 1.0f / 127.5f;
      break;
    case Head::kYolo:
      spec.width = spec.height = 640;
      for (int c = 0; c < 3; c++) spec.scale[c] = 1.0f / 255.0f;
      spec.pad_value = 114.0f;
      break;
    case Head::kNanoDet: {
      spec.width = spec.height = 416;
      const float mean[3] = {123.675f, 116.28f, 103.53f}, std[3] = {58.395f, 57.12f, 57.375f};
      for (int c = 0; c < 3; c++) spec.mean[c] = mean[c], spec.scale[c] = 1.0f / std[c];
      spec.bgr = true;
      break;
    }
  }
  return spec;
}

bool ClassFilter::keep(int class_id) {
  if (class_id < 0 || class_id >= kMaxFilteredClasses) return false;
  if (all) std::fill(std::begin(bits), std::end(bits), 0u);
  all = false;
  bits[class_id / 32] |= 1u << (class_id % 32);
  return true;
}

bool ClassFilter::keeps(int class_id) const { return detail::class_kept(*this, class_id); }

int ClassFilter::count(int classes) const {
  int n = 0;
  for (int c = 0; c < classes; c++) n += keeps(c) ? 1 : 0;
  return n;
}

size_t max_candidates(const Outputs &outputs, const DecodeParams &params) {
  const size_t anchors = static_cast<size_t>(std::max(outputs.anchors, 0));
  if (outputs.head != Head::kNanoDet) return anchors;
  return anchors * static_cast<size_t>(params.classes.count(outputs.classes));
}

Status Outputs::describe(Head head, const std::vector<std::vector<int64_t>> &shapes, Outputs *out,
                         int input_width, int input_height) {
  *out = Outputs();
  out->head = head;
  auto shape_text = [&] {
    std::string text;
    for (const auto &shape : shapes) {
      text += text.empty() ? "[" : ", [";
      for (size_t d = 0; d < shape.size(); d++) text += (d ? "x" : "") + std::to_string(shape[d]);
      text += "]";
    }
    return text.empty() ? std::string("none") : text;
  };
  if (head == Head::kBlazeFace) {
    const bool ok = shapes.size() == 2 && shapes[0].size() == 3 && shapes[1].size() == 3 &&
                    shapes[0][1] == kBlazeFaceAnchors && shapes[0][2] == kBlazeFaceRegressors &&
                    shapes[1][0] == shapes[0][0] && shapes[1][1] == kBlazeFaceAnchors &&
                    shapes[1][2] == 1 && shapes[0][0] >= 1;
    if (!ok) {
      return Status::Error(
          "BlazeFace outputs must be [B, 896, 16] and [B, 896, 1] "
          "(tools/blazeface-to-torchscript.py), got " +
          shape_text());
    }
    out->batch = static_cast<int>(shapes[0][0]);
    out->anchors = kBlazeFaceAnchors;
    out->classes = 1;
    return Status::Ok();
  }
  if (head == Head::kNanoDet) {
    if (input_width < 1 || input_height < 1)
      return Status::Error("NanoDet's outputs need the input's size (its grid of cells)");
    const int64_t anchors = detail::nanodet_anchors(input_width, input_height);
    const bool ok = shapes.size() == 2 && shapes[0].size() == 3 && shapes[1].size() == 3 &&
                    shapes[0][0] >= 1 && shapes[1][0] == shapes[0][0] && shapes[0][1] == anchors &&
                    shapes[1][1] == anchors && shapes[0][2] >= 1 && shapes[0][2] < (1 << 16) &&
                    shapes[1][2] >= 8 && shapes[1][2] % 4 == 0 && shapes[1][2] <= 4 * 64;
    if (!ok) {
      return Status::Error("NanoDet outputs must be [B, " + std::to_string(anchors) +
                           ", classes] and [B, " + std::to_string(anchors) + ", 4 x bins] for a " +
                           std::to_string(input_width) + "x" + std::to_string(input_height) +
                           " input (tools/nanodet-to-torchscript.py), got " + shape_text());
    }
    out->batch = static_cast<int>(shapes[0][0]);
    out->anchors = static_cast<int>(anchors);
    out->classes = static_cast<int>(shapes[0][2]);
    out->bins = static_cast<int>(shapes[1][2] / 4);
    out->input_width = input_width;
    out->input_height = input_height;
    return Status::Ok();
  }
  const bool ok = !shapes.empty() && shapes[0].size() == 3 && shapes[0][0] >= 1 &&
                  shapes[0][1] > 4 && shapes[0][1] < (1 << 20) && shapes[0][2] >= 1 &&
                  shapes[0][2] < (1 << 24);
  if (!ok) {
    return Status::Error(
        "a YOLO output must be [B, 4 + classes, anchors] (Ultralytics v8/11), "
        "got " +
        shape_text());
  }
  out->batch = static_cast<int>(shapes[0][0]);
  out->classes = static_cast<int>(shapes[0][1] - 4);
  out->anchors = static_cast<int>(shapes[0][2]);
  return Status::Ok();
}

int Outputs::points_per_candidate() const {
  return head == Head::kBlazeFace ? kBlazeFacePoints : 0;
}

void Candidates::clear() {
  boxes.clear();
  scores.clear();
  class_ids.clear();
  points.clear();
}

CandidatesView Candidates::view() const {
  CandidatesView v{boxes.data(), scores.data(), class_ids.data(), scores.size()};
  if (points_per_candidate > 0) {
    v.points = points.data();
    v.points_per_candidate = static_cast<uint32_t>(points_per_candidate);
  }
  return v;
}

namespace {

// A candidate per anchor and kept class scoring at least the threshold, anchor by anchor, classes
// in order within one.
Status decode_nanodet(const Outputs &outputs, int image, const Letterbox &letterbox,
                      const DecodeParams &params, Candidates *out) {
  const size_t frame = static_cast<size_t>(image) * outputs.anchors;
  const float *scores = outputs.tensors[0] + frame * outputs.classes;
  const float *distributions = outputs.tensors[1] + frame * 4 * outputs.bins;
  for (int i = 0; i < outputs.anchors; i++) {
    if (detail::nanodet_classes_kept(scores, outputs.classes, i, params.score_threshold,
                                     params.classes) == 0)
      continue;
    float box[4];
    detail::decode_nanodet_box(distributions, outputs.bins, i, outputs.input_width,
                               outputs.input_height, letterbox, box);
    const float *s = scores + static_cast<size_t>(i) * outputs.classes;
    for (int c = 0; c < outputs.classes; c++) {
      if (!(s[c] >= params.score_threshold) || !params.classes.keeps(c)) continue;
      out->boxes.insert(out->boxes.end(), box, box + 4);
      out->scores.push_back(s[c]);
      out->class_ids.push_back(c);
    }
  }
  return Status::Ok();
}

}  // namespace

Status decode(const Outputs &outputs, int image, const Letterbox &letterbox,
              const DecodeParams &params, Candidates *out) {
  out->clear();
  out->points_per_candidate = outputs.points_per_candidate();
  if (image < 0 || image >= outputs.batch) return Status::Error("no such frame in the batch");
  if (outputs.head == Head::kNanoDet) return decode_nanodet(outputs, image, letterbox, params, out);
  float box[4], score, points[2 * kBlazeFacePoints];
  int32_t class_id = params.class_id;
  for (int i = 0; i < outputs.anchors; i++) {
    bool kept;
    if (outputs.head == Head::kBlazeFace) {
      kept = detail::decode_blazeface(
          outputs.tensors[0] +
              static_cast<size_t>(image) * kBlazeFaceAnchors * kBlazeFaceRegressors,
          outputs.tensors[1] + static_cast<size_t>(image) * kBlazeFaceAnchors, i, letterbox,
          params.score_threshold, box, &score, points);
    } else {
      kept = detail::decode_yolo(
          outputs.tensors[0] + static_cast<size_t>(image) * (4 + outputs.classes) * outputs.anchors,
          outputs.anchors, outputs.classes, i, letterbox, params.score_threshold, params.classes,
          box, &score, &class_id);
    }
    if (!kept) continue;
    out->boxes.insert(out->boxes.end(), box, box + 4);
    out->scores.push_back(score);
    out->class_ids.push_back(class_id);
    out->points.insert(out->points.end(), points, points + 2 * out->points_per_candidate);
  }
  return Status::Ok();
}

const std::vector<Anchor> &blazeface_anchors() {
  static const std::vector<Anchor> anchors = [] {
    std::vector<Anchor> all(kBlazeFaceAnchors);
    for (int i = 0; i < kBlazeFaceAnchors; i++) all[i] = detail::blazeface_anchor(i);
    return all;
  }();
  return anchors;
}

}  // namespace cudanms::dnn
