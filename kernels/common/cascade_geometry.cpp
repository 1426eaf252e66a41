#include "common/cascade_geometry.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cudanms::cascade::detail {
namespace {

// cvRound: to nearest, ties to even (the FPU's default mode).
int round_even(double v) { return static_cast<int>(std::nearbyint(v)); }
int round_even(float v) { return static_cast<int>(std::nearbyintf(v)); }

// interpolationLinear<uchar>::getCoeffs of OpenCV's resize_bitExact, in IEEE double as its
// softdouble computes. Taps falling left of the source copy its first pixel, right of it its last.
void append_taps(int src, int dst, std::vector<AxisTap> *taps) {
  const double inv_scale = static_cast<double>(dst) / src;
  const double scale = 1.0 / inv_scale;
  for (int d = 0; d < dst; ++d) {
    const double f = scale * (static_cast<double>(d) + 0.5) - 0.5;
    const int i = static_cast<int>(std::floor(f));
    AxisTap tap{0, 256, 0};
    if (i >= 0 && src > 1) {
      if (i < src - 1) {
        const double frac = f - static_cast<double>(i);
        const auto w1 = static_cast<uint16_t>(std::signbit(frac) ? 0 : round_even(frac * 256.0));
        tap = AxisTap{i, static_cast<uint16_t>(256 - w1), w1};
      } else {
        tap = AxisTap{src - 1, 256, 0};
      }
    }
    taps->push_back(tap);
  }
}

}  // namespace

bool Geometry::matches(int width, int height, const DetectParams &p) const {
  return width == image_width && height == image_height && p.scale_factor == params.scale_factor &&
         p.min_width == params.min_width && p.min_height == params.min_height &&
         p.max_width == params.max_width && p.max_height == params.max_height;
}

Geometry make_geometry(const Model &model, int width, int height, const DetectParams &params,
                       bool with_taps) {
  Geometry g;
  g.image_width = width;
  g.image_height = height;
  g.params = params;
  int max_w = params.max_width, max_h = params.max_height;
  if (max_w == 0 || max_h == 0) max_w = width, max_h = height;

  // CascadeClassifierImpl::detectMultiScaleNoGrouping's scale list.
  std::vector<float> factors;
  for (double factor = 1;; factor *= params.scale_factor) {
    const int ww = round_even(model.window_width * factor);
    const int wh = round_even(model.window_height * factor);
    if (ww > max_w || wh > max_h || ww > width || wh > height) break;
    if (ww < params.min_width || wh < params.min_height) continue;
    if (factors.size() == kMaxLevels) {  // geometry_fits refuses it
      g.too_many_levels = true;
      return g;
    }
    factors.push_back(static_cast<float>(factor));
  }

  size_t rows_so_far = 0;
  for (const float factor : factors) {
    Level level{};
    level.factor = factor;
    level.width = round_even(static_cast<float>(width) / factor);
    level.height = round_even(static_cast<float>(height) / factor);
    level.step = factor >= 2 ? 1 : 2;
    const int work_w = std::max(level.width + 1 - model.window_width, 0);
    const int work_h = std::max(level.height + 1 - model.window_height, 0);
    level.cols = (work_w + level.step - 1) / level.step;
    level.rows = (work_h + level.step - 1) / level.step;
    level.out_width = round_even(static_cast<float>(model.window_width) * factor);
    level.out_height = round_even(static_cast<float>(model.window_height) * factor);
    level.x_taps = g.x_taps.size();
    level.y_taps = g.y_taps.size();
    if (with_taps) {
      append_taps(width, level.width, &g.x_taps);
      append_taps(height, level.height, &g.y_taps);
    }
    level.first_window = g.windows;
    g.windows += static_cast<size_t>(level.cols) * level.rows;
    g.grid_rows += level.rows;
    level.origin = rows_so_far;  // rows for now; elements once the stride is known
    rows_so_far += static_cast<size_t>(level.height) + 1;
    g.levels.push_back(level);
  }
  // Levels shrink, so the first is the widest; rows padded to 32 elements for coalescing.
  const int widest = g.levels.empty() ? 0 : g.levels.front().width + 1;
  g.stride = (widest + 31) / 32 * 32;
  for (Level &level : g.levels) level.origin *= static_cast<size_t>(g.stride);
  g.plane_size = rows_so_far * static_cast<size_t>(g.stride);
  return g;
}

FeatureTables make_feature_tables(const Model &model, int stride) {
  FeatureTables t;
  auto corners = [stride](const Model::Rect &r, int32_t(&o)[4]) {
    o[0] = r.x + stride * r.y;
    o[1] = r.x + r.width + stride * r.y;
    o[2] = r.x + stride * (r.y + r.height);
    o[3] = r.x + r.width + stride * (r.y + r.height);
  };
  auto tilted_corners = [stride](const Model::Rect &r, int32_t(&o)[4]) {
    o[0] = r.x + stride * r.y;
    o[1] = r.x - r.height + stride * (r.y + r.height);
    o[2] = r.x + r.width + stride * (r.y + r.width);
    o[3] = r.x + r.width - r.height + stride * (r.y + r.width + r.height);
  };
  for (const Model::HaarFeature &f : model.haar_features) {
    HaarOffsets h{};
    for (int k = 0; k < 3; ++k) {
      h.weight[k] = f.weights[k];
      // HaarEvaluator::OptFeature::setOffsets: a third rectangle only with a positive weight.
      const Model::Rect r = k < 2 || f.weights[2] > 0 ? f.rects[k] : Model::Rect{0, 0, 0, 0};
      if (f.tilted) {
        tilted_corners(r, h.ofs[k]);
      } else {
        corners(r, h.ofs[k]);
      }
    }
    h.tilted = f.tilted ? 1 : 0;
    t.haar.push_back(h);
  }
  for (const Model::Rect &r : model.lbp_features) {
    LbpOffsets l{};
    for (int row = 0; row < 4; ++row) {
      for (int col = 0; col < 4; ++col) {
        l.ofs[4 * row + col] = r.x + col * r.width + stride * (r.y + row * r.height);
      }
    }
    t.lbp.push_back(l);
  }
  const Model::Rect norm{1, 1, model.window_width - 2, model.window_height - 2};
  corners(norm, t.norm_ofs);
  t.norm_area = static_cast<double>(norm.width) * norm.height;
  return t;
}

bool stage_sums_exact(const Model &model) {
  const size_t tree_count = model.trees.size();
  for (const Model::Stage &stage : model.stages) {
    double largest_sum = 0;  // of the largest |leaf| of each tree
    int smallest_exponent = std::numeric_limits<int>::max();
    for (int t = stage.first_tree; t < stage.first_tree + stage.trees; ++t) {
      const size_t first = static_cast<size_t>(model.trees[t].first_leaf);
      const size_t end = static_cast<size_t>(t) + 1 < tree_count
                             ? static_cast<size_t>(model.trees[t + 1].first_leaf)
                             : model.leaves.size();
      float largest = 0;
      for (size_t k = first; k < end && k < model.leaves.size(); ++k) {
        const float v = std::fabs(model.leaves[k]);
        if (!std::isfinite(v)) return false;
        largest = std::max(largest, v);
        if (v != 0) smallest_exponent = std::min(smallest_exponent, std::max(std::ilogb(v), -126));
      }
      largest_sum += largest;
    }
    if (largest_sum == 0) continue;
    // The unit in the last place of the smallest leaf: 2^(exponent - 23) for a float.
    const double unit = std::ldexp(1.0, smallest_exponent - 23);
    if (largest_sum * (1 + 1e-9) >= std::ldexp(unit, 53)) return false;
  }
  return true;
}

CascadeView host_view(const Model &model, const FeatureTables &tables) {
  CascadeView v{};
  v.stages = model.stages.data();
  v.trees = model.trees.data();
  v.nodes = model.nodes.data();
  v.leaves = model.leaves.data();
  v.subsets = model.subsets.data();
  v.haar = tables.haar.data();
  v.lbp = tables.lbp.data();
  v.stage_count = static_cast<int32_t>(model.stages.size());
  v.is_lbp = model.feature_type == FeatureType::kLbp;
  v.exact_stage_sums = stage_sums_exact(model);
  std::copy(std::begin(tables.norm_ofs), std::end(tables.norm_ofs), v.norm_ofs);
  v.norm_area = tables.norm_area;
  return v;
}

bool window_rect(const Geometry &g, const Level &level, int x, int y, Window *window) {
  const int x0 = round_even(static_cast<float>(x) * level.factor);
  const int y0 = round_even(static_cast<float>(y) * level.factor);
  const int x1 = std::max(x0, 0), y1 = std::max(y0, 0);
  const int x2 = std::min(x0 + level.out_width, g.image_width);
  const int y2 = std::min(y0 + level.out_height, g.image_height);
  if (x2 <= x1 || y2 <= y1) return false;
  window->x = x1;
  window->y = y1;
  window->width = x2 - x1;
  window->height = y2 - y1;
  return true;
}

void tilted_integral(const uint8_t *image, int width, int height, size_t stride, int32_t *out,
                     int out_stride, std::vector<int32_t> *scratch) {
  // u = x + y and v = x - y + height - 1 both run over [0, n).
  const size_t n = static_cast<size_t>(width) + height - 1;
  scratch->assign(n * n, 0);
  uint32_t *grid = reinterpret_cast<uint32_t *>(scratch->data());
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      grid[static_cast<size_t>(x + y) * n + (x - y + height - 1)] = image[y * stride + x];
    }
  }
  // Sums over v' >= v along each u, then over u' <= u.
  for (size_t u = 0; u < n; ++u) {
    uint32_t *row = grid + u * n;
    for (size_t v = n - 1; v-- > 0;) row[v] += row[v + 1];
    if (u > 0) {
      const uint32_t *above = row - n;
      for (size_t v = 0; v < n; ++v) row[v] += above[v];
    }
  }
  for (int Y = 0; Y <= height; ++Y) {
    int32_t *dst = out + static_cast<size_t>(Y) * out_stride;
    for (int X = 0; X <= width; ++X) {
      const long u = static_cast<long>(X) + Y - 2;
      const long v = static_cast<long>(X) - Y + height - 1;
      uint32_t value = 0;
      if (u >= 0 && v < static_cast<long>(n)) {
        value = grid[std::min<size_t>(u, n - 1) * n + static_cast<size_t>(std::max<long>(v, 0))];
      }
      dst[X] = static_cast<int32_t>(value);
    }
  }
}

}  // namespace cudanms::cascade::detail

namespace cudanms::cascade::detail {

Status geometry_fits(const Geometry &g) {
  constexpr size_t kMaxPlane = size_t{1} << 28;
  if (g.plane_size <= kMaxPlane && !g.too_many_levels) return Status::Ok();
  return Status::Error(
      "scale factor " + std::to_string(g.params.scale_factor) + " is too close to 1 for a " +
      std::to_string(g.image_width) + "x" + std::to_string(g.image_height) + " frame: more than " +
      std::to_string(g.too_many_levels ? kMaxLevels : g.levels.size()) + " scales");
}

}  // namespace cudanms::cascade::detail
