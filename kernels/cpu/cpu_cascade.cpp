// The CPU twin of the CUDA cascade detector: OpenCV's loop (scales, rows, columns with its skip
// rule) around the per-window code of common/cascade_eval.h that the CUDA kernels run too; rows
// run in parallel on OpenCV's thread pool (cv::setNumThreads sets its size).
#include "cpu/cpu_cascade.h"

#include <algorithm>
#include <opencv2/core.hpp>

#include "common/cascade_eval.h"
#include "common/cascade_geometry.h"

namespace cudanms::cascade::detail {
namespace {

class CpuDetector final : public Detector {
 public:
  explicit CpuDetector(std::shared_ptr<const Model> model) : Detector(std::move(model)) {}
  Backend backend() const override { return Backend::kCpu; }
  std::string device_name() const override { return "cpu"; }

 private:
  Status detect_checked(const GrayView &image, const DetectParams &params,
                        std::vector<Window> *windows, DetectStats *stats) override {
    const Model &m = *model_;
    if (!geometry_.matches(image.width, image.height, params)) {
      Geometry g = make_geometry(m, image.width, image.height, params);
      Status status = geometry_fits(g);
      if (!status.ok()) return status;
      if (g.stride != geometry_.stride || tables_.haar.size() + tables_.lbp.size() == 0)
        tables_ = make_feature_tables(m, g.stride);
      geometry_ = std::move(g);
    }
    const Geometry &g = geometry_;
    stats->scales = g.levels.size();
    const CascadeView view = host_view(m, tables_);
    const int stage_count = view.stage_count;
    const bool haar = m.feature_type == FeatureType::kHaar;

    for (const Level &level : g.levels) {
      prepare_level(image, level);
      const int32_t *sum = sum_.data();
      const int32_t *sqsum = sqsum_.data();
      const int32_t *tilted = tilted_.empty() ? sum : tilted_.data();
      const int scale = static_cast<int>(&level - g.levels.data());
      // Stripes of rows on OpenCV's thread pool, as CascadeClassifierInvoker; each stripe keeps
      // its windows, joined in row order so that the result does not depend on the threads.
      const int stripes = std::max(1, std::min(level.rows, 4 * cv::getNumThreads()));
      std::vector<std::vector<Window>> found(stripes);
      std::vector<size_t> evaluated(stripes, 0);
      cv::parallel_for_(cv::Range(0, stripes), [&](const cv::Range &range) {
        for (int k = range.start; k < range.end; ++k) {
          const int row_end =
              static_cast<int>(static_cast<int64_t>(level.rows) * (k + 1) / stripes);
          for (int row = static_cast<int>(static_cast<int64_t>(level.rows) * k / stripes);
               row < row_end; ++row) {
            const int y = row * level.step;
            // A window failing its first stage makes OpenCV skip the next one.
            for (int x = 0; x < level.cols * level.step; x += level.step) {
              ++evaluated[k];
              const size_t at = static_cast<size_t>(y) * g.stride + x;
              float norm = 1.f;
              if (haar && !haar_window_norm(view, sum + at, sqsum + at, &norm)) continue;
              double weight = 0;
              const int failed =
                  run_stages(view, sum + at, tilted + at, norm, 0, stage_count, &weight);
              if (failed == stage_count) {
                Window w{};
                if (window_rect(g, level, x, y, &w)) {
                  w.score = weight;
                  w.scale = scale;
                  found[k].push_back(w);
                }
              } else if (failed == 0) {
                x += level.step;
              }
            }
          }
        }
      });
      for (int k = 0; k < stripes; ++k) {
        windows->insert(windows->end(), found[k].begin(), found[k].end());
        stats->windows_evaluated += evaluated[k];
      }
    }
    stats->windows_out = windows->size();
    return Status::Ok();
  }

  // The level's resized image and its integrals, at the element the level's windows start from
  // (the CPU keeps one level at a time, so every level is at origin 0 of its own planes).
  void prepare_level(const GrayView &image, const Level &level) {
    const Geometry &g = geometry_;
    const int w = level.width, h = level.height;
    resized_.resize(static_cast<size_t>(w) * h);
    cv::parallel_for_(cv::Range(0, h), [&](const cv::Range &rows) {
      for (int y = rows.start; y < rows.end; ++y) {
        const AxisTap ty = g.y_taps[level.y_taps + y];
        for (int x = 0; x < w; ++x) {
          resized_[static_cast<size_t>(y) * w + x] =
              resize_pixel(image.pixels, image.stride, g.x_taps[level.x_taps + x], ty);
        }
      }
    });
    const size_t plane = static_cast<size_t>(h + 1) * g.stride;
    sum_.assign(plane, 0);
    const bool haar = model_->feature_type == FeatureType::kHaar;
    if (haar) sqsum_.assign(plane, 0);
    for (int y = 0; y < h; ++y) {
      uint32_t row_sum = 0, row_sq = 0;
      const uint8_t *src = &resized_[static_cast<size_t>(y) * w];
      int32_t *s = &sum_[static_cast<size_t>(y + 1) * g.stride];
      const int32_t *above = s - g.stride;
      for (int x = 0; x < w; ++x) {
        row_sum += src[x];
        s[x + 1] = static_cast<int32_t>(static_cast<uint32_t>(above[x + 1]) + row_sum);
      }
      if (haar) {
        int32_t *q = &sqsum_[static_cast<size_t>(y + 1) * g.stride];
        const int32_t *q_above = q - g.stride;
        for (int x = 0; x < w; ++x) {
          row_sq += static_cast<uint32_t>(src[x]) * src[x];
          q[x + 1] = static_cast<int32_t>(static_cast<uint32_t>(q_above[x + 1]) + row_sq);
        }
      }
    }
    if (model_->has_tilted_features) {
      tilted_.assign(plane, 0);
      tilted_integral(resized_.data(), w, h, static_cast<size_t>(w), tilted_.data(), g.stride,
                      &scratch_);
    }
  }

  Geometry geometry_;
  FeatureTables tables_;
  std::vector<uint8_t> resized_;
  std::vector<int32_t> sum_, sqsum_, tilted_, scratch_;
};

}  // namespace

std::unique_ptr<Detector> create_cpu_detector(std::shared_ptr<const Model> model) {
  return std::make_unique<CpuDetector>(std::move(model));
}

}  // namespace cudanms::cascade::detail
