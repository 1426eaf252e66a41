// The CUDA cascade detector against its CPU twin: the same windows, rectangles and scores to the
// last bit, on every real frame and case, for several segment splits, and on odd frames.
#include <unistd.h>

#include <random>

#include "cascade_support.h"
#include "support/seed.h"

namespace cudanms::testing {
namespace {

using cudanms::cascade::Detector;
using cudanms::cascade::DetectorOptions;
using cudanms::cascade::DetectStats;
using cudanms::cascade::Model;
using cudanms::cascade::Window;

#define SKIP_WITHOUT_CUDA()                                    \
  do {                                                         \
    std::string why_;                                          \
    if (!cudanms::cuda_available(&why_)) GTEST_SKIP() << why_; \
  } while (0)

std::shared_ptr<const Model> load_or_skip(const std::string &name) {
  Status status;
  auto model = Model::load(cascade_path(name), &status);
  EXPECT_TRUE(status.ok()) << status.message();
  return model;
}

void expect_same_windows(const std::vector<Window> &cpu, const std::vector<Window> &cuda,
                         const std::string &what) {
  ASSERT_EQ(cpu.size(), cuda.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const Window &a = cpu[i], &b = cuda[i];
    ASSERT_TRUE(a.x == b.x && a.y == b.y && a.width == b.width && a.height == b.height &&
                a.scale == b.scale && a.score == b.score)
        << what << ": window " << i << " cpu (" << a.x << "," << a.y << " " << a.width << "x"
        << a.height << " " << a.score << ") cuda (" << b.x << "," << b.y << " " << b.width << "x"
        << b.height << " " << b.score << ")";
  }
}

TEST(CudaCascade, SameWindowsAsTheCpuTwinOnRealFrames) {
  SKIP_WITHOUT_CUDA();
  std::string why;
  const std::vector<GrayFrame> &frames = cascade_frames(&why);
  if (frames.empty()) GTEST_SKIP() << why;
  size_t compared = 0;
  for (const CascadeCase &c : cascade_cases()) {
    if (!file_exists(cascade_path(c.cascade))) GTEST_SKIP() << "opencv-data is missing";
    auto model = load_or_skip(c.cascade);
    ASSERT_TRUE(model);
    Status status;
    auto cpu = Detector::create(model, {}, &status);
    ASSERT_TRUE(status.ok()) << status.message();
    DetectorOptions options;
    options.backend = Backend::kCuda;
    auto cuda = Detector::create(model, options, &status);
    ASSERT_TRUE(status.ok()) << status.message();
    for (const GrayFrame &frame : frames) {
      std::vector<Window> a, b;
      DetectStats sa, sb;
      ASSERT_TRUE(cpu->detect(view_of(frame.gray), params_of(c), &a, &sa).ok());
      status = cuda->detect(view_of(frame.gray), params_of(c), &b, &sb);
      ASSERT_TRUE(status.ok()) << status.message();
      expect_same_windows(a, b, case_name(c) + " " + frame.name);
      EXPECT_EQ(sa.windows_evaluated, sb.windows_evaluated) << case_name(c) << " " << frame.name;
      std::printf("%s %s: %zu scales, %zu windows evaluated, alive after segments:",
                  case_name(c).c_str(), frame.name.c_str(), sb.scales, sb.windows_evaluated);
      for (const size_t n : sb.alive_after_segment) std::printf(" %zu", n);
      std::printf("\n");
      compared += a.size();
    }
  }
  EXPECT_GT(compared, 500u);
}

TEST(CudaCascade, EverySegmentSplitFindsTheSameWindows) {
  SKIP_WITHOUT_CUDA();
  std::string why;
  const std::vector<GrayFrame> &frames = cascade_frames(&why);
  if (frames.empty()) GTEST_SKIP() << why;
  const cv::Mat &tile = frames[5].gray;
  for (const char *name : {"haarcascade_frontalface_alt2", "lbpcascade_frontalface_improved"}) {
    auto model = load_or_skip(name);
    ASSERT_TRUE(model);
    Status status;
    auto cpu = Detector::create(model, {}, &status);
    cascade::DetectParams params;
    params.scale_factor = 1.25;
    std::vector<Window> expected;
    ASSERT_TRUE(cpu->detect(view_of(tile), params, &expected).ok());
    const int stages = static_cast<int>(model->stages.size());
    for (const std::vector<int> &split : std::vector<std::vector<int>>{
             {}, {1}, {3}, {3, 7}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {stages - 1}, {2, 5, 9, 14}}) {
      DetectorOptions options;
      options.backend = Backend::kCuda;
      options.segment_starts = split;
      auto cuda = Detector::create(model, options, &status);
      ASSERT_TRUE(status.ok()) << status.message();
      std::vector<Window> got;
      status = cuda->detect(view_of(tile), params, &got);
      ASSERT_TRUE(status.ok()) << status.message();
      expect_same_windows(
          expected, got,
          std::string(name) + " split of " + std::to_string(split.size()) + " starts");
    }
  }
}

TEST(CudaCascade, OddFramesAndSizeChangesOnOneDetector) {
  SKIP_WITHOUT_CUDA();
  const uint64_t seed = run_seed();
  std::mt19937 rng(static_cast<uint32_t>(seed));
  for (const char *name : {"haarcascade_frontalface_default", "haarcascade_fullbody",
                           "lbpcascade_frontalface_improved"}) {
    auto model = load_or_skip(name);
    ASSERT_TRUE(model);
    Status status;
    auto cpu = Detector::create(model, {}, &status);
    DetectorOptions options;
    options.backend = Backend::kCuda;
    auto cuda = Detector::create(model, options, &status);
    ASSERT_TRUE(status.ok()) << status.message();
    for (const cv::Size size : {cv::Size(64, 64), cv::Size(1, 1), cv::Size(333, 97),
                                cv::Size(97, 333), cv::Size(640, 480), cv::Size(64, 64)}) {
      for (int kind = 0; kind < 3; ++kind) {
        cv::Mat gray(size, CV_8UC1);
        if (kind == 0) gray.setTo(128);  // flat: every Haar window skipped
        if (kind == 1) cv::randu(gray, 0, 256);
        if (kind == 2) {  // smooth blobs: windows pass some stages
          cv::Mat noise(size.height / 8 + 1, size.width / 8 + 1, CV_8UC1);
          cv::randu(noise, 0, 256);
          cv::resize(noise, gray, size, 0, 0, cv::INTER_CUBIC);
        }
        for (const double factor : {1.05, 1.3, 2.5}) {
          cascade::DetectParams params;
          params.scale_factor = factor;
          std::vector<Window> a, b;
          ASSERT_TRUE(cpu->detect(view_of(gray), params, &a).ok());
          status = cuda->detect(view_of(gray), params, &b);
          ASSERT_TRUE(status.ok()) << status.message();
          expect_same_windows(a, b,
                              std::string(name) + " " + std::to_string(size.width) + "x" +
                                  std::to_string(size.height) + " kind " + std::to_string(kind) +
                                  " seed " + std::to_string(seed));
        }
      }
    }
  }
}

// A one-stage cascade every window passes: more windows than the mapped buffer the first
// synchronisation brings back (16 Ki), so the detector grows it and copies the rest.
TEST(CudaCascade, MoreWindowsThanEverBeforeComeBackWhole) {
  SKIP_WITHOUT_CUDA();
  const std::string xml =
      "<?xml version=\"1.0\"?><opencv_storage><cascade><stageType>BOOST</stageType>"
      "<featureType>LBP</featureType><height>8</height><width>8</width>"
      "<featureParams><maxCatCount>256</maxCatCount></featureParams><stages><_>"
      "<stageThreshold>-1e9</stageThreshold><weakClassifiers><_><internalNodes>"
      "0 -1 0 -1 -1 -1 -1 -1 -1 -1 -1</internalNodes><leafValues>1. 2.</leafValues></_>"
      "</weakClassifiers></_></stages><features><_><rect>0 0 2 2</rect></_></features>"
      "</cascade></opencv_storage>";
  char path[] = "/tmp/cudanms-all-pass-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, xml.data(), xml.size()), static_cast<ssize_t>(xml.size()));
  close(fd);
  Status status;
  auto model = Model::load(path, &status);
  unlink(path);
  ASSERT_TRUE(model) << status.message();
  auto cpu = Detector::create(model, {}, &status);
  DetectorOptions options;
  options.backend = Backend::kCuda;
  auto cuda = Detector::create(model, options, &status);
  ASSERT_TRUE(cuda) << status.message();
  cv::Mat gray(300, 400, CV_8UC1);
  cv::randu(gray, 0, 256);
  cascade::DetectParams params;
  params.scale_factor = 1.5;
  for (int frame = 0; frame < 2; ++frame) {  // the second frame reuses the grown buffer
    std::vector<Window> a, b;
    ASSERT_TRUE(cpu->detect(view_of(gray), params, &a).ok());
    status = cuda->detect(view_of(gray), params, &b);
    ASSERT_TRUE(status.ok()) << status.message();
    EXPECT_GT(a.size(), 16u * 1024) << "the frame should overflow the mapped buffer";
    expect_same_windows(a, b, "all-pass cascade, frame " + std::to_string(frame));
  }
}

TEST(CudaCascade, AMissingDeviceIsAStatus) {
  SKIP_WITHOUT_CUDA();
  auto model = load_or_skip("haarcascade_frontalface_alt2");
  ASSERT_TRUE(model);
  DetectorOptions options;
  options.backend = Backend::kCuda;
  options.device = 4096;
  Status status;
  EXPECT_FALSE(Detector::create(model, options, &status));
  EXPECT_NE(status.message().find("does not exist"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace cudanms::testing
