// Shared by the OpenCV element tests: registering the elements statically, and the sample
// videos of Debian's opencv-doc.
#pragma once

#include <glib.h>
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <string>

#include "gstblazeface.h"
#include "gstboxoverlay.h"
#include "gstcudacascade.h"
#include "gstcudanms.h"
#include "gstcvdetect.h"
#include "gstjsonmetawriter.h"

namespace cudanms::testing {

inline void init_cv_elements_once() {
  static const bool done = [] {
    gst_init(nullptr, nullptr);
    // The elements registered from the static libraries the plugins are built from.
    return GST_ELEMENT_REGISTER(cudanms, nullptr) && GST_ELEMENT_REGISTER(cvdetect, nullptr) &&
           GST_ELEMENT_REGISTER(cudacascade, nullptr) && GST_ELEMENT_REGISTER(blazeface, nullptr) &&
           GST_ELEMENT_REGISTER(boxoverlay, nullptr) &&
           GST_ELEMENT_REGISTER(jsonmetawriter, nullptr);
  }();
  ASSERT_TRUE(done);
}

inline std::string opencv_sample(const char *name) {
  return std::string("/usr/share/doc/opencv-doc/examples/data/") + name;
}

}  // namespace cudanms::testing

// Skips the test, visibly, when a file of an optional Debian package is missing.
#define SKIP_WITHOUT_FILE(path, package)                                                 \
  do {                                                                                   \
    if (!g_file_test((path).c_str(), G_FILE_TEST_IS_REGULAR))                            \
      GTEST_SKIP() << (path) << " is missing: install the Debian package " << (package); \
  } while (0)
