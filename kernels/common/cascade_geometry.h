// Where every scale of a frame lives and which windows it has: the scale list, the resize taps,
// the layout of the integral planes and the window grid. Computed on the host once per frame
// size and parameters, shared by the CPU twin and the CUDA backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/cascade_eval.h"
#include "cudanms/cascade.h"

namespace cudanms::cascade::detail {

struct Level {
  float factor;                   // OpenCV's scale, in float as it keeps it
  int width, height;              // the resized image
  int step;                       // window step: 2 below factor 2, 1 from 2 up
  int cols, rows;                 // the window grid
  size_t origin;                  // integral element (0, 0) of this level in every plane
  size_t x_taps, y_taps;          // first tap of this level in Geometry::x_taps / y_taps
  size_t first_window;            // index of this level's first grid window over all levels
  int32_t out_width, out_height;  // the window in image pixels
};

inline constexpr size_t kMaxLevels = 1024;

struct Geometry {
  int image_width = 0, image_height = 0;
  DetectParams params;
  int stride = 0;         // int32 elements between integral rows, every level
  size_t plane_size = 0;  // int32 elements of one integral plane (all levels)
  std::vector<Level> levels;
  std::vector<AxisTap> x_taps, y_taps;
  size_t windows = 0;  // grid windows, all levels
  size_t grid_rows = 0;
  bool too_many_levels = false;  // more than kMaxLevels scales: nothing else was computed

  bool matches(int width, int height, const DetectParams &p) const;
};

// The scales and windows of a frame; with_taps false leaves out the resize taps (x_taps, y_taps
// empty), all that a count of the windows needs, for a fraction of the time.
Geometry make_geometry(const Model &model, int width, int height, const DetectParams &params,
                       bool with_taps = true);

// The Haar and LBP feature offsets and the normalisation offsets for a row stride.
struct FeatureTables {
  std::vector<HaarOffsets> haar;
  std::vector<LbpOffsets> lbp;
  int32_t norm_ofs[4] = {0, 0, 0, 0};
  double norm_area = 0;
};
FeatureTables make_feature_tables(const Model &model, int stride);

// Whether each stage's leaves sum to the same double in any order, as no addition can round:
// every partial sum of one leaf a tree is a multiple of the smallest leaf's unit in the last
// place, and the largest is below 2^53 of them. Then lanes may add a stage's leaves as a tree and
// still give OpenCV's sum (in tree order) bit for bit. True for every cascade opencv-data ships
// (7.8 bits to spare at least).
bool stage_sums_exact(const Model &model);

// The model and the tables as the per-window code reads them, in host memory; the CUDA backend
// points the arrays at its device copies.
CascadeView host_view(const Model &model, const FeatureTables &tables);

// The image rectangle of a window found at grid position (x, y) of a level, clipped to the
// image; false when nothing is left (OpenCV's clipObjects drops it).
bool window_rect(const Geometry &g, const Level &level, int x, int y, Window *window);

// The tilted integral of an 8-bit image, (width + 1) x (height + 1) elements written at out with
// out_stride elements per row: tilted(X, Y) sums the pixels (x, y) with y < Y and
// |x - X + 1| <= Y - y - 1, i.e. x - y >= X - Y and x + y <= X + Y - 2 (cv::integral's
// definition). Computed on a grid rotated by 45 degrees.
void tilted_integral(const uint8_t *image, int width, int height, size_t stride, int32_t *out,
                     int out_stride, std::vector<int32_t> *scratch);

}  // namespace cudanms::cascade::detail

namespace cudanms::cascade::detail {

// Refuses frames whose scales would need integral planes past 2^28 elements (a scale factor very
// close to 1 on a large frame), before anything is allocated.
Status geometry_fits(const Geometry &g);

}  // namespace cudanms::cascade::detail
