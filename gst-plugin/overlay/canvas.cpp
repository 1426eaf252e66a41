#include "canvas.h"

#include <algorithm>
#include <cmath>
#include <opencv2/imgproc.hpp>

namespace {

/* Class colors, by class id modulo the size. */
const Rgb kPalette[] = {{0, 230, 0},   {255, 48, 48}, {40, 120, 255}, {255, 210, 0},
                        {230, 0, 230}, {0, 220, 220}, {255, 128, 0},  {150, 60, 255}};

/* BT.601, limited range. */
int luma(Rgb c) { return cvRound(16 + 0.257 * c.r + 0.504 * c.g + 0.098 * c.b); }
int cb(Rgb c) { return cvRound(128 - 0.148 * c.r - 0.291 * c.g + 0.439 * c.b); }
int cr(Rgb c) { return cvRound(128 + 0.439 * c.r - 0.368 * c.g - 0.071 * c.b); }

constexpr int kFont = cv::FONT_HERSHEY_SIMPLEX;
constexpr int kTagPad = 2;

int text_thickness(double font_scale) { return std::max(1, cvRound(font_scale * 2)); }

/* Fills what `draw` rasterises into a mask covering `bounds` (frame pixels). */
template <typename Draw>
void fill_drawn(Canvas &canvas, cv::Rect bounds, Rgb c, Draw draw) {
  bounds &= cv::Rect(0, 0, canvas.width(), canvas.height());
  if (bounds.empty()) return;
  cv::Mat mask = cv::Mat::zeros(bounds.size(), CV_8UC1);
  draw(mask, -bounds.tl());
  canvas.fill_mask(bounds.tl(), mask, c);
}

}  // namespace

Rgb class_color(gint class_id) {
  const int n = G_N_ELEMENTS(kPalette);
  return kPalette[((class_id % n) + n) % n];
}

Rgb track_color(guint64 track_id) {
  /* Golden-ratio hues: consecutive ids land far apart; full saturation, bright. */
  const double hue = std::fmod(static_cast<double>(track_id) * 0.6180339887, 1.0) * 6.0;
  const int sector = static_cast<int>(hue);
  const double f = hue - sector;
  const int up = static_cast<int>(255 * f), down = static_cast<int>(255 * (1 - f));
  switch (sector) {
    case 0:
      return {255, up, 40};
    case 1:
      return {down, 255, 40};
    case 2:
      return {40, 255, up};
    case 3:
      return {40, down, 255};
    case 4:
      return {up, 40, 255};
    default:
      return {255, 40, down};
  }
}

Rgb light(Rgb c) { return {(c.r + 2 * 255) / 3, (c.g + 2 * 255) / 3, (c.b + 2 * 255) / 3}; }

Rgb text_color_on(Rgb c) {
  return 0.299 * c.r + 0.587 * c.g + 0.114 * c.b > 140 ? Rgb{0, 0, 0} : Rgb{255, 255, 255};
}

Canvas::Canvas(GstVideoFrame *frame) : frame_(frame) {
  const GstVideoFormatInfo *finfo = frame->info.finfo;
  width_ = GST_VIDEO_FRAME_WIDTH(frame);
  height_ = GST_VIDEO_FRAME_HEIGHT(frame);
  yuv_ = GST_VIDEO_FORMAT_INFO_IS_YUV(finfo);
  if (!yuv_) {
    channels_ = GST_VIDEO_FRAME_COMP_PSTRIDE(frame, 0);
    packed_ = plane(0, width_, height_, channels_);
  }
}

void Canvas::fill(cv::Rect r, Rgb c) {
  r &= cv::Rect(0, 0, width_, height_);
  if (r.empty()) return;
  if (!yuv_) {
    packed_(r).setTo(packed_value(c));
    return;
  }
  plane(0, width_, height_, 1)(r).setTo(cv::Scalar(luma(c)));
  fill_chroma(chroma_rect(r), c, cv::noArray());
}

void Canvas::fill_mask(cv::Point origin, const cv::Mat &mask, Rgb c) {
  const cv::Rect r = cv::Rect(origin, mask.size()) & cv::Rect(0, 0, width_, height_);
  if (r.empty()) return;
  const cv::Mat m = mask(cv::Rect(r.tl() - origin, r.size()));
  if (!yuv_) {
    packed_(r).setTo(packed_value(c), m);
    return;
  }
  plane(0, width_, height_, 1)(r).setTo(cv::Scalar(luma(c)), m);
  /* The chroma of every 2x2 block with a pixel set. */
  const cv::Rect cr = chroma_rect(r);
  cv::Mat block = cv::Mat::zeros(cr.height * 2, cr.width * 2, CV_8UC1);
  m.copyTo(block(cv::Rect(r.x - cr.x * 2, r.y - cr.y * 2, r.width, r.height)));
  cv::Mat small;
  cv::resize(block, small, cr.size(), 0, 0, cv::INTER_AREA);
  fill_chroma(cr, c, small > 0);
}

cv::Mat Canvas::plane(int p, int w, int h, int channels) const {
  return cv::Mat(h, w, CV_8UC(channels), GST_VIDEO_FRAME_PLANE_DATA(frame_, p),
                 GST_VIDEO_FRAME_PLANE_STRIDE(frame_, p));
}

cv::Scalar Canvas::packed_value(Rgb c) const {
  cv::Scalar v = cv::Scalar::all(255); /* alpha and padding bytes */
  const int offsets[3] = {static_cast<int>(GST_VIDEO_FRAME_COMP_POFFSET(frame_, 0)),
                          static_cast<int>(GST_VIDEO_FRAME_COMP_POFFSET(frame_, 1)),
                          static_cast<int>(GST_VIDEO_FRAME_COMP_POFFSET(frame_, 2))};
  v[offsets[0]] = c.r;
  v[offsets[1]] = c.g;
  v[offsets[2]] = c.b;
  return v;
}

cv::Rect Canvas::chroma_rect(const cv::Rect &r) const {
  const int cw = (width_ + 1) / 2, ch = (height_ + 1) / 2;
  const int x0 = r.x / 2, y0 = r.y / 2;
  const int x1 = std::min(cw, (r.x + r.width + 1) / 2), y1 = std::min(ch, (r.y + r.height + 1) / 2);
  return cv::Rect(x0, y0, x1 - x0, y1 - y0);
}

void Canvas::fill_chroma(const cv::Rect &cr_rect, Rgb c, cv::InputArray mask) {
  const int cw = (width_ + 1) / 2, ch = (height_ + 1) / 2;
  const int u = cb(c), v = cr(c);
  switch (GST_VIDEO_FRAME_FORMAT(frame_)) {
    case GST_VIDEO_FORMAT_I420:
      plane(1, cw, ch, 1)(cr_rect).setTo(cv::Scalar(u), mask);
      plane(2, cw, ch, 1)(cr_rect).setTo(cv::Scalar(v), mask);
      break;
    case GST_VIDEO_FORMAT_YV12:
      plane(1, cw, ch, 1)(cr_rect).setTo(cv::Scalar(v), mask);
      plane(2, cw, ch, 1)(cr_rect).setTo(cv::Scalar(u), mask);
      break;
    case GST_VIDEO_FORMAT_NV12:
      plane(1, cw, ch, 2)(cr_rect).setTo(cv::Scalar(u, v), mask);
      break;
    case GST_VIDEO_FORMAT_NV21:
      plane(1, cw, ch, 2)(cr_rect).setTo(cv::Scalar(v, u), mask);
      break;
    default:
      break;
  }
}

void draw_outline(Canvas &canvas, const cv::Rect &box, int width, Rgb c) {
  if (box.width <= 0 || box.height <= 0) return;
  const int tw = std::min(width, box.width), th = std::min(width, box.height);
  canvas.fill(cv::Rect(box.x, box.y, box.width, th), c);
  canvas.fill(cv::Rect(box.x, box.y + box.height - th, box.width, th), c);
  canvas.fill(cv::Rect(box.x, box.y, tw, box.height), c);
  canvas.fill(cv::Rect(box.x + box.width - tw, box.y, tw, box.height), c);
}

cv::Size tag_size(const std::string &text, double font_scale) {
  int baseline = 0;
  const cv::Size size =
      cv::getTextSize(text, kFont, font_scale, text_thickness(font_scale), &baseline);
  return {size.width + 2 * kTagPad, size.height + baseline + 2 * kTagPad};
}

void draw_tag(Canvas &canvas, const cv::Rect &tag, const std::string &text, double font_scale,
              Rgb c) {
  canvas.fill(tag, c);
  int baseline = 0;
  const int thickness = text_thickness(font_scale);
  const cv::Size size = cv::getTextSize(text, kFont, font_scale, thickness, &baseline);
  cv::Mat mask = cv::Mat::zeros(tag.size(), CV_8UC1);
  cv::putText(mask, text, cv::Point(kTagPad, kTagPad + size.height), kFont, font_scale,
              cv::Scalar(255), thickness, cv::LINE_8);
  canvas.fill_mask(tag.tl(), mask, text_color_on(c));
}

void draw_polyline(Canvas &canvas, const std::vector<cv::Point> &points, bool closed, int thickness,
                   Rgb c) {
  if (points.size() < 2) return;
  const cv::Rect bounds = cv::boundingRect(points) + cv::Size(1, 1);
  const int grow = thickness + 1;
  fill_drawn(
      canvas,
      cv::Rect(bounds.x - grow, bounds.y - grow, bounds.width + 2 * grow, bounds.height + 2 * grow),
      c, [&](cv::Mat &mask, cv::Point shift) {
        std::vector<cv::Point> moved;
        for (const cv::Point &p : points) moved.push_back(p + shift);
        cv::polylines(mask, moved, closed, cv::Scalar(255), thickness, cv::LINE_8);
      });
}

void draw_arrow(Canvas &canvas, cv::Point from, cv::Point to, int thickness, Rgb c) {
  const cv::Rect bounds = cv::boundingRect(std::vector<cv::Point>{from, to});
  const int grow = thickness + std::max(bounds.width, bounds.height) / 3 + 2;
  fill_drawn(
      canvas,
      cv::Rect(bounds.x - grow, bounds.y - grow, bounds.width + 2 * grow, bounds.height + 2 * grow),
      c, [&](cv::Mat &mask, cv::Point shift) {
        cv::arrowedLine(mask, from + shift, to + shift, cv::Scalar(255), thickness, cv::LINE_8, 0,
                        0.3);
      });
}

/* Candidates are raw detector output: coordinates are clamped far outside any frame before they
 * become ints (a float past INT_MAX cast to int is undefined behaviour), and drawing clips to the
 * frame anyway. */
cv::Rect pixel_rect(const float *b) {
  if (!(std::isfinite(b[0]) && std::isfinite(b[1]) && std::isfinite(b[2]) && std::isfinite(b[3])))
    return cv::Rect();
  static constexpr float kFar = 1 << 24;
  auto pixel = [](float v) { return static_cast<int>(std::min(std::max(v, -kFar), kFar)); };
  const int x1 = pixel(std::floor(b[0])), y1 = pixel(std::floor(b[1]));
  const int x2 = pixel(std::ceil(b[2])), y2 = pixel(std::ceil(b[3]));
  return cv::Rect(x1, y1, std::max(0, x2 - x1), std::max(0, y2 - y1));
}
