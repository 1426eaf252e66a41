// OpenCV's sample media (Debian's opencv-doc): vtest.avi, Megamind.avi, messi5.jpg. Where
// opencv-doc cannot be installed (the GPU host), CUDANMS_OPENCV_SAMPLES names a folder that
// holds them (tools/gpu-host/env.sh points it at the carried media/).
#pragma once

#include <glib.h>

#include <string>

namespace cudanms::testing {

inline std::string opencv_sample(const char *name) {
  const char *dir = g_getenv("CUDANMS_OPENCV_SAMPLES");
  return std::string(dir && *dir ? dir : "/usr/share/doc/opencv-doc/examples/data") + "/" + name;
}

}  // namespace cudanms::testing
