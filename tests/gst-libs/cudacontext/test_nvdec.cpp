// Each GPU's NVDEC decoder (gst-libs/cudacontext/nvdec.h): what the camera service and
// pipelines/streams decode a GPU's cameras with, so that no frame crosses GPUs.
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <string>

#include "cudanms/nms.h"
#include "nvdec.h"

namespace {

class Nvdec : public ::testing::Test {
 protected:
  void SetUp() override { gst_init(nullptr, nullptr); }
};

TEST_F(Nvdec, OtherElementsAreNoNvidiaDecoders) {
  EXPECT_EQ(gst_cv_nvdec_device(nullptr), -1);
  for (const char *name : {"avdec_h264", "videoconvert", "h264parse", "identity"}) {
    GstElementFactory *factory = gst_element_factory_find(name);
    if (!factory) continue;
    EXPECT_EQ(gst_cv_nvdec_device(factory), -1) << name;
    gst_object_unref(factory);
  }
  EXPECT_EQ(gst_cv_nvdec_for("h264", cudanms::cuda_device_count()), "");  // no such GPU
}

// On a GPU host with gst-plugins-bad's nvcodec: every GPU has an H.264 decoder, which says it
// decodes there.
TEST_F(Nvdec, CudaEveryGpuHasItsOwnH264Decoder) {
  std::string why;
  if (!cudanms::cuda_available(&why)) GTEST_SKIP() << why;
  GstElementFactory *first = gst_element_factory_find("nvh264dec");
  if (!first) GTEST_SKIP() << "no nvh264dec: gst-plugins-bad's nvcodec is not installed";
  gst_object_unref(first);
  for (int gpu = 0; gpu < cudanms::cuda_device_count(); ++gpu) {
    const std::string name = gst_cv_nvdec_for("h264", gpu);
    ASSERT_NE(name, "") << "GPU " << gpu;
    GstElementFactory *factory = gst_element_factory_find(name.c_str());
    ASSERT_NE(factory, nullptr) << name;
    EXPECT_EQ(gst_cv_nvdec_device(factory), gpu) << name;
    gst_object_unref(factory);
  }
}

}  // namespace
