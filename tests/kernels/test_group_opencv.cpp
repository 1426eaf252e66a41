// Method::kGroup against OpenCV itself: cv::groupRectangles on random window sets and on the
// cascade windows of real frames (the same rectangles, level weights and class sizes, every
// set, CPU and CUDA), and the cascade chain with grouping against
// CascadeClassifier::detectMultiScale on the frames of Megamind.avi and vtest.avi. The table the
// last test prints is the one in the README.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <opencv2/objdetect.hpp>
#include <random>
#include <tuple>
#include <vector>

#include "cascade_support.h"
#include "cudanms/nms.h"
#include "support/seed.h"

namespace cudanms::testing {
namespace {

using cudanms::cascade::Detector;
using cudanms::cascade::DetectorOptions;
using cudanms::cascade::Model;
using cudanms::cascade::Window;

// A grouped rectangle as both sides report it: x, y, w, h, the class's best weight, its size.
using Grouped = std::tuple<int, int, int, int, float, int>;

// What OpenCV's groupRectangles keeps, with the level weights as scores: the rectangles and
// weights from the variant detectMultiScale calls with reject levels, the class sizes from the
// variant with weights alone (both partition alike).
std::vector<Grouped> opencv_groups(const std::vector<cv::Rect> &rects,
                                   const std::vector<float> &scores, int threshold, double eps) {
  std::vector<cv::Rect> with_levels = rects, with_sizes = rects;
  std::vector<int> levels(rects.size(), 1), sizes;
  std::vector<double> weights(scores.begin(), scores.end());
  cv::groupRectangles(with_levels, levels, weights, threshold, eps);
  cv::groupRectangles(with_sizes, sizes, threshold, eps);
  EXPECT_EQ(with_levels, with_sizes);
  std::vector<Grouped> out;
  for (size_t k = 0; k < with_levels.size() && k < with_sizes.size(); ++k) {
    const cv::Rect &r = with_levels[k];
    out.emplace_back(r.x, r.y, r.width, r.height, static_cast<float>(weights[k]), sizes[k]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Grouped> our_groups(Context &nms, const std::vector<cv::Rect> &rects,
                                const std::vector<float> &scores, int threshold, double eps) {
  std::vector<float> boxes;
  for (const cv::Rect &r : rects) {
    boxes.insert(boxes.end(),
                 {float(r.x), float(r.y), float(r.x + r.width), float(r.y + r.height)});
  }
  Params params;
  params.method = Method::kGroup;
  params.min_neighbors = static_cast<uint32_t>(threshold);
  params.group_eps = eps;
  params.score_threshold = -INFINITY;
  params.max_candidates = std::max<size_t>(1, rects.size());
  Result result;
  const Status status =
      nms.run({boxes.data(), scores.data(), nullptr, rects.size()}, params, &result);
  EXPECT_TRUE(status.ok()) << status.message();
  std::vector<Grouped> out;
  EXPECT_EQ(result.kept_neighbors.size(), result.kept.size());
  EXPECT_EQ(result.kept_boxes.size(), 4 * result.kept.size());
  for (size_t k = 0; k < result.kept.size() && k < result.kept_neighbors.size(); ++k) {
    const float *b = &result.kept_boxes[4 * k];
    EXPECT_EQ(result.kept_scores[k], scores[result.kept[k]]);
    out.emplace_back(int(b[0]), int(b[1]), int(b[2] - b[0]), int(b[3] - b[1]),
                     result.kept_scores[k], int(result.kept_neighbors[k]) + 1);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The contexts to compare: the CPU's always, CUDA's where a device is.
std::vector<std::unique_ptr<Context>> contexts() {
  std::vector<std::unique_ptr<Context>> out;
  Status status;
  out.push_back(Context::create({Backend::kCpu}, &status));
  if (cuda_available()) {
    out.push_back(Context::create({Backend::kCuda}, &status));
    EXPECT_TRUE(status.ok()) << status.message();
  }
  return out;
}

// Window sets of the shapes grouping meets: clusters of jittered windows around a face, chains
// whose ends are not similar but whose neighbours are, clusters nested in larger ones, windows
// of one size at one place (ties), and lone windows; scores with ties.
std::vector<cv::Rect> random_windows(std::mt19937_64 &rng, size_t n, int frame) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<cv::Rect> rects;
  while (rects.size() < n) {
    const int shape = uniform(0, 4);
    const int size = uniform(8, 200);
    const int x = uniform(0, frame), y = uniform(0, frame);
    const int members = std::min<int>(uniform(1, 12), static_cast<int>(n - rects.size()));
    const int jitter = std::max(1, size / 8);
    for (int k = 0; k < members; ++k) {
      switch (shape) {
        case 0:  // a cluster
          rects.emplace_back(x + uniform(-jitter, jitter), y + uniform(-jitter, jitter),
                             size + uniform(-jitter, jitter), size + uniform(-jitter, jitter));
          break;
        case 1:  // a chain
          rects.emplace_back(x + k * (jitter + 1), y, size, size);
          break;
        case 2:  // nested: a small cluster inside this large window
          rects.emplace_back(x, y, size, size);
          rects.emplace_back(x + size / 4 + uniform(0, 2), y + size / 4 + uniform(0, 2), size / 2,
                             size / 2);
          break;
        case 3:  // ties
          rects.emplace_back(x, y, size, size);
          break;
        default:  // lone
          rects.emplace_back(uniform(0, frame), uniform(0, frame), size, size);
      }
    }
  }
  rects.resize(n);
  return rects;
}

std::vector<float> random_scores(std::mt19937_64 &rng, size_t n) {
  std::vector<float> scores(n);
  for (float &s : scores) s = std::uniform_int_distribution<int>(0, 40)(rng) * 0.25f - 2.0f;
  return scores;
}

TEST(GroupOpenCv, EqualsGroupRectanglesOnRandomWindowSets) {
  std::mt19937_64 rng(run_seed() + 27);
  auto nms = contexts();
  size_t sets = 0, classes = 0;
  const std::vector<size_t> sizes = {1, 2, 3, 5, 17, 100, 1000, 3000, 10000, 50000};
  for (const size_t n : sizes) {
    const int rounds = n <= 100 ? 40 : n <= 3000 ? 4 : 1;
    for (int round = 0; round < rounds; ++round) {
      const int frame = n <= 100 ? 300 : 2000;
      const std::vector<cv::Rect> rects = random_windows(rng, n, frame);
      const std::vector<float> scores = random_scores(rng, n);
      // 0 (grouping off) only on small sets: the large ones are there to be grouped.
      const int threshold = std::uniform_int_distribution<int>(n <= 100 ? 0 : 1, 4)(rng);
      const double eps = std::uniform_int_distribution<int>(0, 1)(rng) ? 0.2 : 0.35;
      const std::vector<Grouped> want = opencv_groups(rects, scores, threshold, eps);
      for (auto &context : nms) {
        EXPECT_EQ(our_groups(*context, rects, scores, threshold, eps), want)
            << to_string(context->backend()) << ": " << n << " windows, min_neighbors " << threshold
            << ", eps " << eps << ", seed " << run_seed();
      }
      ++sets;
      classes += want.size();
    }
  }
  std::printf("%zu sets, %zu classes kept by OpenCV\n", sets, classes);
  EXPECT_GT(classes, 100u);
}

TEST(GroupOpenCv, EqualsGroupRectanglesOnCascadeWindowsOfRealFrames) {
  std::string why;
  const std::vector<GrayFrame> frames = cpu_cascade_frames(&why);
  if (frames.empty()) GTEST_SKIP() << why;
  auto nms = contexts();
  size_t compared = 0;
  for (const CascadeCase &c : cascade_cases()) {
    const std::string path = cascade_path(c.cascade);
    if (!file_exists(path)) GTEST_SKIP() << path << " is missing: install opencv-data";
    Status status;
    auto detector = Detector::create(Model::load(path, &status), DetectorOptions{}, &status);
    ASSERT_TRUE(status.ok()) << status.message();
    for (const GrayFrame &frame : frames) {
      std::vector<Window> windows;
      ASSERT_TRUE(detector->detect(view_of(frame.gray), params_of(c), &windows).ok());
      std::vector<cv::Rect> rects;
      std::vector<float> scores;
      for (const Window &w : windows) {
        rects.emplace_back(w.x, w.y, w.width, w.height);
        scores.push_back(static_cast<float>(w.score));
      }
      for (const int threshold : {1, 3}) {
        const std::vector<Grouped> want = opencv_groups(rects, scores, threshold, 0.2);
        for (auto &context : nms) {
          EXPECT_EQ(our_groups(*context, rects, scores, threshold, 0.2), want)
              << to_string(context->backend()) << ": " << case_name(c) << " " << frame.name;
        }
        compared += want.size();
      }
    }
  }
  EXPECT_GT(compared, 20u);
}

TEST(GroupOpenCv, CascadeWithGroupEqualsDetectMultiScale) {
  std::printf("| cascade | video | frames | OpenCV faces | identical | extra | missing |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  size_t faces = 0, identical = 0;
  for (const char *cascade : {"haarcascade_frontalface_default", "haarcascade_frontalface_alt2"}) {
    const std::string path = cascade_path(cascade);
    if (!file_exists(path)) GTEST_SKIP() << path << " is missing: install opencv-data";
    Status status;
    auto model = Model::load(path, &status);
    DetectorOptions options;
    options.backend = cuda_available() ? Backend::kCuda : Backend::kCpu;
    auto detector = Detector::create(model, options, &status);
    ASSERT_TRUE(status.ok()) << status.message();
    auto nms = Context::create({options.backend}, &status);
    ASSERT_TRUE(status.ok()) << status.message();
    cv::CascadeClassifier reference(path);
    cudanms::cascade::DetectParams detect;
    detect.scale_factor = 1.1;
    detect.min_width = detect.min_height = 40;
    // At the small scale (tools/sanitize.sh) Megamind's two videos alone: vtest.avi's people give
    // 3 faces in 14 of the frames there, and take most of the instrumented cascade's time.
    const std::vector<const char *> videos =
        small_test_scale() ? std::vector<const char *>{"Megamind", "Megamind_bugy"}
                           : std::vector<const char *>{"Megamind", "vtest", "Megamind_bugy"};
    for (const char *video : videos) {
      std::string why;
      const std::vector<cv::Mat> frames = video_gray_frames(video, &why);
      if (frames.empty()) GTEST_SKIP() << why;
      size_t want_total = 0, same = 0, extra = 0, missing = 0;
      for (const cv::Mat &gray : frames) {
        std::vector<cv::Rect> want;
        reference.detectMultiScale(gray, want, 1.1, 3, 0, cv::Size(40, 40));
        std::vector<Window> windows;
        ASSERT_TRUE(detector->detect(view_of(gray), detect, &windows).ok());
        std::vector<cv::Rect> rects;
        std::vector<float> scores;
        for (const Window &w : windows) {
          rects.emplace_back(w.x, w.y, w.width, w.height);
          scores.push_back(static_cast<float>(w.score));
        }
        std::vector<std::tuple<int, int, int, int>> ours, theirs;
        for (const Grouped &g : our_groups(*nms, rects, scores, 3, 0.2)) {
          ours.emplace_back(std::get<0>(g), std::get<1>(g), std::get<2>(g), std::get<3>(g));
        }
        for (const cv::Rect &r : want) theirs.emplace_back(r.x, r.y, r.width, r.height);
        std::sort(ours.begin(), ours.end());
        std::sort(theirs.begin(), theirs.end());
        std::vector<std::tuple<int, int, int, int>> both;
        std::set_intersection(ours.begin(), ours.end(), theirs.begin(), theirs.end(),
                              std::back_inserter(both));
        want_total += theirs.size();
        same += both.size();
        extra += ours.size() - both.size();
        missing += theirs.size() - both.size();
      }
      std::printf("| %s | %s.avi | %zu | %zu | %zu | %zu | %zu |\n", cascade, video, frames.size(),
                  want_total, same, extra, missing);
      // The raw windows agree with OpenCV's to 0.5% (test_cascade_opencv): a face may differ
      // where a window at a class's edge does.
      EXPECT_GE(same, want_total - want_total / 50) << cascade << " " << video;
      EXPECT_LE(extra, want_total / 50) << cascade << " " << video;
      faces += want_total;
      identical += same;
    }
  }
  EXPECT_GT(faces, 10u);
  std::printf("all: %zu of %zu faces identical\n", identical, faces);
}

}  // namespace
}  // namespace cudanms::testing
