// The cascade library's parts against OpenCV's (resize, integrals) and its refusals: bad models,
// bad parameters, odd images. The whole detector against OpenCV is test_cascade_opencv.cpp.
#include <unistd.h>

#include <opencv2/imgproc.hpp>
#include <random>

#include "cascade_support.h"
#include "common/cascade_eval.h"
#include "common/cascade_geometry.h"
#include "support/seed.h"

namespace cudanms::testing {
namespace {

using namespace cudanms::cascade;

// A file holding `text`, removed when the test ends.
class TempFile {
 public:
  explicit TempFile(const std::string &text) {
    char name[] = "/tmp/cudanms-cascade-XXXXXX";
    const int fd = mkstemp(name);
    path_ = name;
    if (fd >= 0) {
      (void)!write(fd, text.data(), text.size());
      close(fd);
    }
  }
  ~TempFile() { unlink(path_.c_str()); }
  const std::string &path() const { return path_; }

 private:
  std::string path_;
};

// A one-stage Haar cascade over a 4x4 window with the given feature rectangle.
std::string tiny_haar(const std::string &rect, int left = 0, int right = -1) {
  return "<?xml version=\"1.0\"?><opencv_storage><cascade><stageType>BOOST</stageType>"
         "<featureType>HAAR</featureType><height>4</height><width>4</width>"
         "<featureParams><maxCatCount>0</maxCatCount></featureParams><stages><_>"
         "<stageThreshold>-1.</stageThreshold><weakClassifiers><_><internalNodes>" +
         std::to_string(left) + " " + std::to_string(right) +
         " 0 0.5</internalNodes><leafValues>1. 2.</leafValues></_></weakClassifiers></_>"
         "</stages><features><_><rects><_>" +
         rect + "</_></rects><tilted>0</tilted></_></features></cascade></opencv_storage>";
}

std::string load_error(const std::string &text) {
  TempFile file(text);
  Status status;
  auto model = Model::load(file.path(), &status);
  EXPECT_FALSE(model);
  return status.message();
}

TEST(CascadeModel, LoadsDebiansCascades) {
  for (const char *name : {"haarcascade_frontalface_alt2", "haarcascade_fullbody",
                           "lbpcascade_frontalface_improved"}) {
    const std::string path = cascade_path(name);
    if (!file_exists(path)) GTEST_SKIP() << path << " is missing: install opencv-data";
    Status status;
    auto model = Model::load(path, &status);
    ASSERT_TRUE(model) << status.message();
    EXPECT_EQ(model->name, name);
  }
  Status status;
  auto alt2 = Model::load(cascade_path("haarcascade_frontalface_alt2"), &status);
  ASSERT_TRUE(alt2);
  // The talk's numbers for this cascade.
  EXPECT_EQ(alt2->stages.size(), 20u);
  EXPECT_EQ(alt2->trees.size(), 1047u);
  EXPECT_EQ(alt2->haar_features.size(), 2094u);
  EXPECT_FALSE(alt2->has_tilted_features);
  auto body = Model::load(cascade_path("haarcascade_fullbody"), &status);
  ASSERT_TRUE(body);
  EXPECT_TRUE(body->has_tilted_features);
}

// The CUDA segments add a stage's leaves across lanes only where no order can round.
TEST(CascadeModel, StageSumsAreExactInAnyOrderForDebiansCascadesOnly) {
  const std::string alt2_path = cascade_path("haarcascade_frontalface_alt2");
  if (!file_exists(alt2_path)) GTEST_SKIP() << alt2_path << " is missing: install opencv-data";
  for (const char *name :
       {"haarcascade_frontalface_alt2", "haarcascade_frontalface_default", "haarcascade_fullbody",
        "haarcascade_upperbody", "haarcascade_eye_tree_eyeglasses",
        "lbpcascade_frontalface_improved", "lbpcascade_profileface"}) {
    Status status;
    auto model = Model::load(cascade_path(name), &status);
    ASSERT_TRUE(model) << status.message();
    EXPECT_TRUE(detail::stage_sums_exact(*model)) << name;
  }
  Status status;
  auto alt2 = Model::load(alt2_path, &status);
  ASSERT_TRUE(alt2);
  EXPECT_FALSE(detail::stage_sums_exact(*order_sensitive_model(*alt2)));
  // The order does matter there.
  const double tiny = std::ldexp(1.0, -53);
  EXPECT_NE((1.0 + tiny) + tiny, 1.0 + (tiny + tiny));
  Model zero = *alt2;  // zero leaves bound nothing
  zero.leaves[0] = 0;
  EXPECT_TRUE(detail::stage_sums_exact(zero));
}

TEST(CascadeModel, RefusesWhatCannotBeEvaluated) {
  Status status;
  EXPECT_FALSE(Model::load("/nonexistent/cascade.xml", &status));
  EXPECT_NE(status.message().find("cannot read"), std::string::npos) << status.message();
  EXPECT_FALSE(load_error("this is not xml").empty());
  EXPECT_FALSE(load_error("<?xml version=\"1.0\"?><opencv_storage></opencv_storage>").empty());
  {  // usable as written
    TempFile file(tiny_haar("0 0 2 2 1."));
    auto model = Model::load(file.path(), &status);
    EXPECT_TRUE(model) << status.message();
  }
  EXPECT_NE(load_error(tiny_haar("3 3 2 2 1.")).find("outside the window"), std::string::npos);
  EXPECT_NE(load_error(tiny_haar("-1 0 2 2 1.")).find("outside the window"), std::string::npos);
  EXPECT_NE(load_error(tiny_haar("0 0 2 2")).find("x y w h weight"), std::string::npos);
  std::string two_nodes = tiny_haar("0 0 2 2 1.");
  // A tree whose node points back at itself would never end.
  const std::string looping =
      "<internalNodes>0 1 0 0.5 0 1 0 0.5</internalNodes>"
      "<leafValues>1. 2. 3.</leafValues>";
  two_nodes.replace(two_nodes.find("<internalNodes>"),
                    two_nodes.find("</leafValues>") + 13 - two_nodes.find("<internalNodes>"),
                    looping);
  EXPECT_NE(load_error(two_nodes).find("child out of range"), std::string::npos);
}

TEST(CascadeDetect, RefusesBadParametersAndImages) {
  const std::string path = cascade_path("haarcascade_frontalface_alt2");
  if (!file_exists(path)) GTEST_SKIP() << "opencv-data is missing";
  Status status;
  auto detector = Detector::create(Model::load(path, &status), {}, &status);
  ASSERT_TRUE(detector);
  cv::Mat gray(100, 100, CV_8UC1, cv::Scalar(0));
  std::vector<Window> windows;
  for (const double factor : {1.0, 0.5, -1.0, std::nan(""), double{INFINITY}}) {
    DetectParams p;
    p.scale_factor = factor;
    EXPECT_FALSE(detector->detect(view_of(gray), p, &windows).ok()) << factor;
  }
  DetectParams negative;
  negative.min_width = -1;
  EXPECT_FALSE(detector->detect(view_of(gray), negative, &windows).ok());
  EXPECT_FALSE(detector->detect({nullptr, 10, 10, 10}, {}, &windows).ok());
  EXPECT_FALSE(detector->detect({gray.data, 100, 100, 50}, {}, &windows).ok());
  EXPECT_TRUE(detector->detect({nullptr, 0, 0, 0}, {}, &windows).ok());
  EXPECT_TRUE(windows.empty());
  DetectParams tiny;
  tiny.scale_factor = 1.0000001;  // millions of scales: refused before allocating them
  cv::Mat big(2000, 2000, CV_8UC1, cv::Scalar(0));
  status = detector->detect(view_of(big), tiny, &windows);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("too close to 1"), std::string::npos) << status.message();
  // A window larger than the image: no scales, no windows.
  cv::Mat small(10, 10, CV_8UC1, cv::Scalar(0));
  EXPECT_TRUE(detector->detect(view_of(small), {}, &windows).ok());
  EXPECT_TRUE(windows.empty());
  DetectorOptions bad;
  bad.segment_starts = {3, 3};
  EXPECT_FALSE(Detector::create(Model::load(path, &status), bad, &status));
  EXPECT_NE(status.message().find("ascend"), std::string::npos) << status.message();
}

TEST(CascadeParts, ResizeIsOpenCvsBitExactBilinear) {
  // Every level of a random frame and scale factor against cv::resize(INTER_LINEAR_EXACT); the
  // first level (factor 1) is the identity.
  std::mt19937 rng(static_cast<uint32_t>(run_seed()));
  std::uniform_int_distribution<int> side(1, 300);
  std::uniform_real_distribution<double> factor(1.01, 3.0);
  Model model;
  model.window_width = 1;
  model.window_height = 1;
  for (int trial = 0; trial < 60; ++trial) {
    cv::Mat src(side(rng), side(rng), CV_8UC1);
    cv::randu(src, 0, 256);
    DetectParams p;
    p.scale_factor = factor(rng);
    const detail::Geometry g = detail::make_geometry(model, src.cols, src.rows, p);
    ASSERT_FALSE(g.levels.empty());
    for (const detail::Level &l : g.levels) {
      cv::Mat expected;
      cv::resize(src, expected, cv::Size(l.width, l.height), 0, 0, cv::INTER_LINEAR_EXACT);
      for (int y = 0; y < l.height; ++y)
        for (int x = 0; x < l.width; ++x)
          ASSERT_EQ(detail::resize_pixel(src.data, src.step[0], g.x_taps[l.x_taps + x],
                                         g.y_taps[l.y_taps + y]),
                    expected.at<uint8_t>(y, x))
              << src.cols << "x" << src.rows << " -> " << l.width << "x" << l.height << " at " << x
              << "," << y;
    }
  }
}

// A count of the windows (max_windows) skips the resize taps, and nothing else.
TEST(CascadeParts, GeometryWithoutTapsIsTheSameGeometry) {
  std::mt19937 rng(static_cast<uint32_t>(run_seed()));
  std::uniform_int_distribution<int> side(1, 2000);
  std::uniform_real_distribution<double> factor(1.05, 2.0);
  Model model;
  model.window_width = 24;
  model.window_height = 24;
  for (int trial = 0; trial < 100; ++trial) {
    DetectParams p;
    p.scale_factor = factor(rng);
    p.min_width = p.min_height = trial % 3 * 20;
    p.max_width = p.max_height = trial % 4 * 150;
    const int width = side(rng), height = side(rng);
    const detail::Geometry with = detail::make_geometry(model, width, height, p);
    const detail::Geometry without = detail::make_geometry(model, width, height, p, false);
    EXPECT_TRUE(without.x_taps.empty() && without.y_taps.empty());
    ASSERT_EQ(with.levels.size(), without.levels.size()) << width << "x" << height;
    EXPECT_EQ(with.windows, without.windows);
    EXPECT_EQ(with.plane_size, without.plane_size);
    for (size_t l = 0; l < with.levels.size(); ++l) {
      EXPECT_EQ(with.levels[l].first_window, without.levels[l].first_window);
      EXPECT_EQ(with.levels[l].origin, without.levels[l].origin);
    }
  }
}

TEST(CascadeParts, TiltedIntegralIsOpenCvs) {
  std::mt19937 rng(static_cast<uint32_t>(run_seed()));
  std::uniform_int_distribution<int> side(1, 120);
  std::vector<int32_t> scratch;
  for (int trial = 0; trial < 100; ++trial) {
    cv::Mat src(side(rng), side(rng), CV_8UC1);
    cv::randu(src, 0, 256);
    cv::Mat sum, sqsum, tilted;
    cv::integral(src, sum, sqsum, tilted, CV_32S, CV_64F);
    std::vector<int32_t> ours(static_cast<size_t>(src.rows + 1) * (src.cols + 1));
    detail::tilted_integral(src.data, src.cols, src.rows, src.step[0], ours.data(), src.cols + 1,
                            &scratch);
    for (int y = 0; y <= src.rows; ++y)
      for (int x = 0; x <= src.cols; ++x)
        ASSERT_EQ(ours[static_cast<size_t>(y) * (src.cols + 1) + x], tilted.at<int32_t>(y, x))
            << src.cols << "x" << src.rows << " at " << x << "," << y;
  }
}

}  // namespace
}  // namespace cudanms::testing
