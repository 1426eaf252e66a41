// The CUDA cascade detector against its CPU twin: the same windows, rectangles and scores to the
// last bit, on every real frame and case, for several segment splits, and on odd frames.
#include <unistd.h>

#include <random>

#ifdef CUDANMS_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "cascade_support.h"
#include "compare.h"
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

// A CUDA detector of `model` with `options` otherwise; nullptr, the reason a test failure, where
// it cannot be made.
std::unique_ptr<Detector> cuda_detector(std::shared_ptr<const Model> model,
                                        DetectorOptions options = {}) {
  options.backend = Backend::kCuda;
  Status status;
  auto detector = Detector::create(std::move(model), options, &status);
  EXPECT_TRUE(detector) << status.message();
  return detector;
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
    auto cuda = cuda_detector(model);
    ASSERT_TRUE(cuda);
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

// A cascade whose stage sums could round differently in another order keeps the tree-order sum
// of the group's first lane: the CPU twin's windows and scores, bit for bit, where adding the
// last stage's leaves across lanes would keep 2^-53 that tree order rounds away.
TEST(CudaCascade, StageSumsThatCouldRoundStayInTreeOrder) {
  SKIP_WITHOUT_CUDA();
  std::string why;
  const std::vector<GrayFrame> &frames = cascade_frames(&why);
  if (frames.empty()) GTEST_SKIP() << why;
  if (!file_exists(cascade_path("haarcascade_frontalface_alt2"))) GTEST_SKIP() << "no opencv-data";
  auto alt2 = load_or_skip("haarcascade_frontalface_alt2");
  ASSERT_TRUE(alt2);
  auto model = order_sensitive_model(*alt2);
  Status status;
  auto cpu = Detector::create(model, {}, &status);
  ASSERT_TRUE(status.ok()) << status.message();
  auto cuda = cuda_detector(model);
  ASSERT_TRUE(cuda);
  cascade::DetectParams params;
  params.min_width = params.min_height = 30;
  size_t compared = 0;
  for (const GrayFrame &frame : frames) {
    std::vector<Window> a, b;
    DetectStats sa, sb;
    ASSERT_TRUE(cpu->detect(view_of(frame.gray), params, &a, &sa).ok());
    ASSERT_TRUE(cuda->detect(view_of(frame.gray), params, &b, &sb).ok());
    expect_same_windows(a, b, frame.name);
    compared += a.size();
  }
  EXPECT_GT(compared, 20u);
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
    for (const std::vector<int> &split :
         std::vector<std::vector<int>>{{},
                                       {1},
                                       {3},
                                       {3, 7},
                                       {1, 3, 7},
                                       {1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
                                       {stages - 1},
                                       {2, 5, 9, 14}}) {
      DetectorOptions options;
      options.segment_starts = split;
      auto cuda = cuda_detector(model, options);
      ASSERT_TRUE(cuda);
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
    auto cuda = cuda_detector(model);
    ASSERT_TRUE(cuda);
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

// A one-stage LBP cascade that every window passes.
std::shared_ptr<const Model> all_pass_model() {
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
  if (fd < 0) return nullptr;
  const bool written = write(fd, xml.data(), xml.size()) == static_cast<ssize_t>(xml.size());
  close(fd);
  Status status;
  auto model = written ? Model::load(path, &status) : nullptr;
  unlink(path);
  return model;
}

// More windows than the mapped buffer the first synchronisation brings back (16 Ki), so the
// detector grows it and copies the rest.
TEST(CudaCascade, MoreWindowsThanEverBeforeComeBackWhole) {
  SKIP_WITHOUT_CUDA();
  auto model = all_pass_model();
  ASSERT_TRUE(model);
  Status status;
  auto cpu = Detector::create(model, {}, &status);
  auto cuda = cuda_detector(model);
  ASSERT_TRUE(cuda);
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

#ifdef CUDANMS_HAVE_CUDA

// The CUDA detector of a case's cascade; nullptr, the reason a test failure, where it cannot be
// made.
std::unique_ptr<Detector> case_detector(const CascadeCase &c) {
  auto model = load_or_skip(c.cascade);
  return model ? cuda_detector(model) : nullptr;
}

// The windows of detect() as the candidates the device path must write.
HostCandidates as_candidates(const std::vector<Window> &windows, double min_score, int32_t id) {
  HostCandidates c;
  for (const Window &w : windows) {
    if (w.score < min_score) continue;
    c.boxes.insert(c.boxes.end(),
                   {static_cast<float>(w.x), static_cast<float>(w.y),
                    static_cast<float>(w.x + w.width), static_cast<float>(w.y + w.height)});
    c.scores.push_back(static_cast<float>(w.score));
    c.class_ids.push_back(id);
  }
  return c;
}

void expect_same_candidates(const HostCandidates &want, const HostCandidates &got,
                            const std::string &what) {
  ASSERT_EQ(want.scores.size(), got.scores.size()) << what;
  EXPECT_EQ(want.boxes, got.boxes) << what;
  EXPECT_EQ(want.scores, got.scores) << what;
  EXPECT_EQ(want.class_ids, got.class_ids) << what;
}

// Detection into device candidates, then NMS in place: the same candidates, in the same order,
// as detect() on the host, and the same kept set as NMS on those host windows, with the frame
// read from host memory and from device memory.
TEST(CudaCascade, DeviceCandidatesAreTheHostWindowsAndNmsAgrees) {
  SKIP_WITHOUT_CUDA();
  std::string why;
  const std::vector<GrayFrame> &frames = cascade_frames(&why);
  if (frames.empty()) GTEST_SKIP() << why;
  Status status;
  auto nms = Context::create({Backend::kCuda}, &status);
  auto cpu_nms = Context::create({Backend::kCpu}, &status);
  ASSERT_TRUE(nms && cpu_nms);
  size_t compared = 0;
  for (const CascadeCase &c : cascade_cases()) {
    if (!file_exists(cascade_path(c.cascade))) GTEST_SKIP() << "opencv-data is missing";
    auto cuda = case_detector(c);
    ASSERT_TRUE(cuda);
    const cascade::DetectParams params = params_of(c);
    for (const GrayFrame &frame : frames) {
      const cv::Mat &gray = frame.gray;
      DeviceCandidatesPoolOptions pool_options;
      pool_options.capacity = cuda->max_windows(gray.cols, gray.rows, params);
      pool_options.max_buffers = 1;
      auto pool = DeviceCandidatesPool::create(pool_options, &status);
      ASSERT_TRUE(pool) << status.message();
      auto out = pool->acquire(&status);
      ASSERT_TRUE(out);
      std::vector<Window> windows;
      ASSERT_TRUE(cuda->detect(view_of(gray), params, &windows).ok());
      const double min_score = windows.empty() ? 0 : windows[windows.size() / 2].score;
      for (const double threshold : {-1e300, min_score}) {
        const std::string what =
            case_name(c) + " " + frame.name + " min score " + std::to_string(threshold);
        const HostCandidates want = as_candidates(windows, threshold, 7);
        cascade::DeviceOutput output;
        output.class_id = 7;
        output.min_score = threshold;
        status = cuda->detect(view_of(gray), params, output, out.get());
        ASSERT_TRUE(status.ok()) << status.message();
        Params nms_params;
        nms_params.threshold = 0.3f;
        Result on_device, on_host;
        ASSERT_TRUE(nms->run(out->view(), nms_params, &on_device).ok());
        HostCandidates got;
        ASSERT_TRUE(out->download(&got).ok());
        expect_same_candidates(want, got, what);
        ASSERT_TRUE(cpu_nms->run(want.view(), nms_params, &on_host).ok());
        EXPECT_TRUE(same_result(on_device, on_host)) << what;
        compared += want.scores.size();
      }
      // The frame already on the device: read in place.
      // A copy from pageable memory may still be landing when cudaMemcpy returns: the event
      // after it orders the detector's reads, as a producer's would.
      uint8_t *d_gray = nullptr;
      cudaEvent_t copied;
      ASSERT_EQ(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&d_gray, gray.total()), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(d_gray, gray.data, gray.total(), cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaEventRecord(copied, 0), cudaSuccess);
      cascade::GrayView on_device{d_gray, gray.cols, gray.rows, static_cast<size_t>(gray.cols),
                                  true,   copied};
      ASSERT_TRUE(cuda->detect(on_device, params, cascade::DeviceOutput{7}, out.get()).ok());
      HostCandidates got;
      ASSERT_TRUE(out->download(&got).ok());
      cudaFree(d_gray);
      cudaEventDestroy(copied);
      expect_same_candidates(as_candidates(windows, -1e300, 7), got,
                             case_name(c) + " " + frame.name + " from device memory");
    }
  }
  EXPECT_GT(compared, 500u);
}

// A small real frame into device candidates: every kernel of the device path (the marks, the
// compaction, the emission) on a frame small enough for the sanitizers.
TEST(CudaCascade, DeviceCandidatesOfASmallRealFrame) {
  SKIP_WITHOUT_CUDA();
  std::string why;
  const std::vector<GrayFrame> &frames = cascade_frames(&why);
  if (frames.empty()) GTEST_SKIP() << why;
  auto model = load_or_skip("haarcascade_frontalface_alt2");
  ASSERT_TRUE(model);
  Status status;
  auto cuda = cuda_detector(model);
  ASSERT_TRUE(cuda);
  // 240x240 pixels of a Megamind frame around a window the whole frame has.
  const cv::Mat &frame = frames[1].gray;
  cascade::DetectParams params;
  params.scale_factor = 1.2;
  std::vector<Window> all;
  ASSERT_TRUE(cuda->detect(view_of(frame), params, &all).ok());
  ASSERT_FALSE(all.empty());
  const Window &w = all[all.size() / 2];
  const int x0 = std::clamp(w.x + w.width / 2 - 120, 0, std::max(frame.cols - 240, 0));
  const int y0 = std::clamp(w.y + w.height / 2 - 120, 0, std::max(frame.rows - 240, 0));
  const cv::Mat crop =
      frame(cv::Rect(x0, y0, std::min(240, frame.cols - x0), std::min(240, frame.rows - y0)));
  DeviceCandidatesPoolOptions pool_options;
  pool_options.capacity = cuda->max_windows(crop.cols, crop.rows, params);
  auto pool = DeviceCandidatesPool::create(pool_options, &status);
  ASSERT_TRUE(pool) << status.message();
  auto out = pool->acquire(&status);
  std::vector<Window> windows;
  ASSERT_TRUE(cuda->detect(view_of(crop), params, &windows).ok());
  EXPECT_FALSE(windows.empty());
  ASSERT_TRUE(cuda->detect(view_of(crop), params, cascade::DeviceOutput{3}, out.get()).ok());
  HostCandidates got;
  ASSERT_TRUE(out->download(&got).ok());
  expect_same_candidates(as_candidates(windows, -1e300, 3), got, "240x240 crop");
}

TEST(CudaCascade, DeviceCandidatesOfEmptyFramesAndSmallBuffers) {
  SKIP_WITHOUT_CUDA();
  auto model = load_or_skip("haarcascade_frontalface_alt2");
  ASSERT_TRUE(model);
  Status status;
  auto cuda = cuda_detector(model);
  ASSERT_TRUE(cuda);
  DeviceCandidatesPoolOptions pool_options;
  pool_options.capacity = 1000;
  auto pool = DeviceCandidatesPool::create(pool_options, &status);
  auto out = pool->acquire(&status);
  ASSERT_TRUE(out);
  // A buffer smaller than the frame's windows: the count tells, and consumers refuse it.
  std::string why;
  const std::vector<GrayFrame> &frames = cascade_frames(&why);
  if (frames.empty()) GTEST_SKIP() << why;
  cascade::DetectParams params;
  std::vector<Window> windows;
  ASSERT_TRUE(cuda->detect(view_of(frames[1].gray), params, &windows).ok());
  ASSERT_GT(windows.size(), 8u);
  DeviceCandidatesPoolOptions tiny_options;
  tiny_options.capacity = 8;
  auto tiny = DeviceCandidatesPool::create(tiny_options, &status)->acquire(&status);
  ASSERT_TRUE(
      cuda->detect(view_of(frames[1].gray), params, cascade::DeviceOutput{}, tiny.get()).ok());
  auto nms = Context::create({Backend::kCuda}, &status);
  Result result;
  status = nms->run(tiny->view(), Params(), &result);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find(std::to_string(windows.size())), std::string::npos)
      << status.message();
  HostCandidates host;
  EXPECT_FALSE(tiny->download(&host).ok());
  // Frames with no scale (smaller than the window) and no pixels write a count of zero.
  for (const cv::Size size : {cv::Size(10, 10), cv::Size(0, 0)}) {
    const uint32_t stale = 55;
    ASSERT_EQ(cudaMemcpy(out->count(), &stale, 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the stale count has landed
    cv::Mat small(size, CV_8UC1, cv::Scalar(1));
    ASSERT_TRUE(cuda->detect(view_of(small), params, cascade::DeviceOutput{}, out.get()).ok());
    HostCandidates got;
    ASSERT_TRUE(out->download(&got).ok());
    EXPECT_TRUE(got.scores.empty()) << size;
  }
  // A CPU detector refuses with a status.
  auto cpu = Detector::create(model, {}, &status);
  status = cpu->detect(view_of(frames[1].gray), params, cascade::DeviceOutput{}, out.get());
  EXPECT_FALSE(status.ok());
}

// Device candidates are ranked into detect()'s order tile by tile (1 024 windows a tile): with
// every window passing, thousands of them come out in order, and a buffer smaller than them keeps
// the first ones in that order.
TEST(CudaCascade, DeviceCandidatesOfAnAllPassCascadeAreInDetectOrder) {
  SKIP_WITHOUT_CUDA();
  auto model = all_pass_model();
  ASSERT_TRUE(model);
  Status status;
  auto cuda = cuda_detector(model);
  ASSERT_TRUE(cuda);
  cv::Mat gray(64, 80, CV_8UC1);
  cv::randu(gray, 0, 256);
  cascade::DetectParams params;
  params.scale_factor = 1.5;
  std::vector<Window> windows;
  ASSERT_TRUE(cuda->detect(view_of(gray), params, &windows).ok());
  ASSERT_GT(windows.size(), 2u * 1024) << "the windows should fill several rank tiles";
  const HostCandidates all = as_candidates(windows, -1e300, 3);
  for (const size_t capacity : {cuda->max_windows(gray.cols, gray.rows, params), size_t{1500}}) {
    DeviceCandidatesPoolOptions pool_options;
    pool_options.capacity = capacity;
    auto out = DeviceCandidatesPool::create(pool_options, &status)->acquire(&status);
    ASSERT_TRUE(out) << status.message();
    ASSERT_TRUE(cuda->detect(view_of(gray), params, cascade::DeviceOutput{3}, out.get()).ok());
    if (capacity < windows.size()) {
      // The count says how many there were; the buffer holds the first `capacity` in order.
      uint32_t count = 0;
      std::vector<float> boxes(4 * capacity), scores(capacity);
      ASSERT_EQ(cudaEventSynchronize(static_cast<cudaEvent_t>(out->ready())), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(&count, out->count(), 4, cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(count, windows.size());
      ASSERT_EQ(cudaMemcpy(boxes.data(), out->boxes(), boxes.size() * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      ASSERT_EQ(cudaMemcpy(scores.data(), out->scores(), scores.size() * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      EXPECT_TRUE(std::equal(boxes.begin(), boxes.end(), all.boxes.begin()));
      EXPECT_TRUE(std::equal(scores.begin(), scores.end(), all.scores.begin()));
    } else {
      HostCandidates got;
      ASSERT_TRUE(out->download(&got).ok());
      expect_same_candidates(all, got, "all-pass cascade");
    }
  }
}

// A frame of a batch test: its pixels on the host or on the device, its buffer, and what it wants.
struct BatchFrame {
  cv::Mat gray;
  bool on_device = false;
  cascade::DeviceOutput output;
  size_t capacity = 0;  // 0: the frame's most windows
  std::string name;
};

// Each frame of a batch as detect() alone finds it, through one detect() of the whole batch:
// frames of several sizes (grouped), host and device pixels, their own class ids, thresholds and
// buffers (one too small, whose count still tells), and an empty frame; then a smaller batch on
// the same detector (level tables made for more frames), and one frame alone after it.
void expect_batch_equals_frames_alone(Detector *cuda, const cascade::DetectParams &params,
                                      const std::vector<BatchFrame> &batch,
                                      const std::string &what) {
  Status status;
  std::vector<std::shared_ptr<DeviceCandidates>> outs;
  std::vector<uint8_t *> device_pixels;
  std::vector<cascade::DeviceFrame> frames;
  cudaEvent_t copied;
  ASSERT_EQ(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming), cudaSuccess);
  for (const BatchFrame &b : batch) {
    DeviceCandidatesPoolOptions pool_options;
    pool_options.capacity =
        b.capacity ? b.capacity
                   : std::max<size_t>(cuda->max_windows(b.gray.cols, b.gray.rows, params), 1);
    pool_options.max_buffers = 1;
    auto pool = DeviceCandidatesPool::create(pool_options, &status);
    ASSERT_TRUE(pool) << status.message();
    outs.push_back(pool->acquire(&status));
    ASSERT_TRUE(outs.back()) << status.message();
    cascade::DeviceFrame frame;
    frame.image = view_of(b.gray);
    if (b.on_device && !b.gray.empty()) {
      uint8_t *d = nullptr;
      ASSERT_EQ(cudaMalloc(&d, b.gray.total()), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(d, b.gray.data, b.gray.total(), cudaMemcpyHostToDevice), cudaSuccess);
      device_pixels.push_back(d);
      frame.image = cascade::GrayView{
          d, b.gray.cols, b.gray.rows, static_cast<size_t>(b.gray.cols), true, copied};
    }
    frame.output = b.output;
    frame.out = outs.back().get();
    frames.push_back(frame);
  }
  ASSERT_EQ(cudaEventRecord(copied, 0), cudaSuccess);  // after the copies, as a producer's
  // Stale counts, so that a frame the batch skipped cannot pass.
  for (const auto &out : outs) {
    const uint32_t stale = 12345;
    ASSERT_EQ(cudaMemcpy(out->count(), &stale, 4, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (const size_t n : {batch.size(), batch.size() / 2, size_t{1}}) {
    const std::vector<cascade::DeviceFrame> some(frames.begin(), frames.begin() + n);
    status = cuda->detect(some, params);
    ASSERT_TRUE(status.ok()) << what << ": " << status.message();
    for (size_t f = 0; f < n; ++f) {
      const BatchFrame &b = batch[f];
      const std::string name = what + ", batch of " + std::to_string(n) + ", frame " +
                               std::to_string(f) + " (" + b.name + ")";
      std::vector<Window> windows;
      ASSERT_TRUE(cuda->detect(view_of(b.gray), params, &windows).ok()) << name;
      const HostCandidates want = as_candidates(windows, b.output.min_score, b.output.class_id);
      HostCandidates got;
      status = outs[f]->download(&got);
      if (want.scores.size() > outs[f]->capacity()) {
        EXPECT_FALSE(status.ok()) << name << ": more windows than the buffer holds";
        uint32_t count = 0;
        ASSERT_EQ(cudaMemcpy(&count, outs[f]->count(), 4, cudaMemcpyDeviceToHost), cudaSuccess);
        EXPECT_EQ(count, want.scores.size()) << name;
        continue;
      }
      ASSERT_TRUE(status.ok()) << name << ": " << status.message();
      expect_same_candidates(want, got, name);
    }
  }
  for (uint8_t *d : device_pixels) cudaFree(d);
  cudaEventDestroy(copied);
}

TEST(CudaCascade, ABatchGivesEachFrameItsWindowsAlone) {
  SKIP_WITHOUT_CUDA();
  std::string why;
  const std::vector<GrayFrame> &frames = cascade_frames(&why);
  if (frames.empty()) GTEST_SKIP() << why;
  ASSERT_GE(frames.size(), 3u);
  for (const CascadeCase &c : cascade_cases()) {
    if (!file_exists(cascade_path(c.cascade))) GTEST_SKIP() << "opencv-data is missing";
    auto cuda = case_detector(c);
    ASSERT_TRUE(cuda);
    const cascade::DetectParams params = params_of(c);
    std::vector<Window> windows;
    ASSERT_TRUE(cuda->detect(view_of(frames[1].gray), params, &windows).ok());
    const double median = windows.empty() ? 0 : windows[windows.size() / 2].score;
    const cv::Mat &big = frames[1].gray;
    const cv::Mat crop = big(cv::Rect(big.cols / 5, big.rows / 7, big.cols / 2, big.rows / 2));
    std::vector<BatchFrame> batch;
    for (size_t f = 0; f < frames.size(); ++f) {
      batch.push_back({frames[f].gray, f % 2 == 1, {static_cast<int32_t>(f)}, 0, frames[f].name});
      if (f == 1) batch.push_back({crop.clone(), true, {9, median}, 0, "a crop, median score up"});
      if (f == 2) batch.push_back({cv::Mat(), false, {4}, 0, "empty"});
    }
    batch.push_back({frames[1].gray, false, {5}, 3, frames[1].name + " into 3 places"});
    batch.push_back({crop.clone(), false, {6}, 0, "the crop again, from the host"});
    expect_batch_equals_frames_alone(cuda.get(), params, batch, case_name(c));
  }
}

TEST(CudaCascade, ABatchWithoutABufferOrOnTheCpuIsAStatus) {
  SKIP_WITHOUT_CUDA();
  auto model = load_or_skip("haarcascade_frontalface_alt2");
  ASSERT_TRUE(model);
  auto cuda = cuda_detector(model);
  ASSERT_TRUE(cuda);
  Status status;
  DeviceCandidatesPoolOptions pool_options;
  pool_options.capacity = 100;
  auto out = DeviceCandidatesPool::create(pool_options, &status)->acquire(&status);
  ASSERT_TRUE(out);
  cv::Mat gray(120, 160, CV_8UC1, cv::Scalar(7));
  std::vector<cascade::DeviceFrame> frames(2);
  frames[0].image = frames[1].image = view_of(gray);
  frames[0].out = out.get();
  status = cuda->detect(frames, cascade::DetectParams());
  EXPECT_NE(status.message().find("frame 1 of the batch has no device candidates"),
            std::string::npos)
      << status.message();
  frames[1].out = out.get();
  EXPECT_TRUE(cuda->detect(frames, cascade::DetectParams()).ok());
  EXPECT_GT(cuda->max_batch_frames(1920, 1080, cascade::DetectParams()), 64u);
  auto cpu = Detector::create(model, {}, &status);
  ASSERT_TRUE(cpu);
  EXPECT_EQ(cpu->max_batch_frames(1920, 1080, cascade::DetectParams()), 1u);
  EXPECT_FALSE(cpu->detect(frames, cascade::DetectParams()).ok());
}

#endif  // CUDANMS_HAVE_CUDA

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
