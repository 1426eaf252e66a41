/* Where boxoverlay puts each box's label tag so that no tag covers another: the first free place
 * of a few around the box (above it, left-aligned; inside its top; below it; then further up and
 * further down, a tag's height at a time), inside the frame. With no free place left the tag goes
 * above the box, as it would alone. */
#pragma once

#include <opencv2/core.hpp>
#include <vector>

class TagPlacer {
 public:
  explicit TagPlacer(cv::Size frame) : frame_(frame) {}
  /* A place for a tag of `size` near `box`, then taken. */
  cv::Rect place(const cv::Rect &box, cv::Size size);

 private:
  bool free(const cv::Rect &r) const;

  cv::Size frame_;
  std::vector<cv::Rect> taken_;
};
