/* Drawing on a frame's pixels in place, for boxoverlay: packed RGB formats exactly, YUV 4:2:0
 * with an exact luma and the chroma of every 2x2 block a drawn pixel touches. Shapes and text are
 * rasterised by OpenCV into a mask, then filled in the frame's own format. */
#pragma once

#include <gst/video/video.h>

#include <opencv2/core.hpp>
#include <string>
#include <vector>

struct Rgb {
  int r, g, b;
};

/* A class's color, by class id. */
Rgb class_color(gint class_id);
/* A track's color, by id: neighbouring ids far apart on the palette. */
Rgb track_color(guint64 track_id);
/* A light tint: two thirds of the way to white. */
Rgb light(Rgb c);
/* Black or white, whichever reads better on c. */
Rgb text_color_on(Rgb c);

/* Where a frame's pixels are and how a color is written into them. */
class Canvas {
 public:
  explicit Canvas(GstVideoFrame *frame);

  int width() const { return width_; }
  int height() const { return height_; }

  /* Fills r (clipped to the frame) with c. */
  void fill(cv::Rect r, Rgb c);
  /* Sets the pixels where mask (CV_8UC1, placed at origin) is non-zero to c. */
  void fill_mask(cv::Point origin, const cv::Mat &mask, Rgb c);

 private:
  cv::Mat plane(int p, int w, int h, int channels) const;
  cv::Scalar packed_value(Rgb c) const;
  cv::Rect chroma_rect(const cv::Rect &r) const;
  void fill_chroma(const cv::Rect &cr_rect, Rgb c, cv::InputArray mask);

  GstVideoFrame *frame_;
  int width_ = 0, height_ = 0;
  bool yuv_ = false;
  int channels_ = 0;
  cv::Mat packed_;
};

/* The outline of box, width pixels thick, inside the box. */
void draw_outline(Canvas &canvas, const cv::Rect &box, int width, Rgb c);

/* The size of a tag with the text: the text and a 2-pixel margin. */
cv::Size tag_size(const std::string &text, double font_scale);
/* A filled tag with the text, at `tag` (tag_size() large). */
void draw_tag(Canvas &canvas, const cv::Rect &tag, const std::string &text, double font_scale,
              Rgb c);

/* Straight segments through the points, `thickness` pixels wide (closed: back to the first). */
void draw_polyline(Canvas &canvas, const std::vector<cv::Point> &points, bool closed, int thickness,
                   Rgb c);
/* An arrow from `from` to `to`. */
void draw_arrow(Canvas &canvas, cv::Point from, cv::Point to, int thickness, Rgb c);

/* The pixels of a box {x1, y1, x2, y2}; empty for NaN/inf. */
cv::Rect pixel_rect(const float *b);
