// Each GPU's NVDEC decoder (gst-libs/cudacontext/nvdec.h): what the camera service and
// pipelines/streams decode a GPU's cameras with, so that no frame crosses GPUs.
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

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

// A source written for one GPU, given to a camera of another: the decoders move, nothing else
// does. Two GPUs pretended (CI has none), each with an H.264 decoder, only the first with AV1.
TEST_F(Nvdec, ASourceDecodesOnItsCamerasGpu) {
  auto device_of = [](const std::string &name) {
    if (name == "nvh264dec" || name == "nvh264sldec" || name == "nvav1dec") return 0;
    if (name == "nvh264device1dec") return 1;
    return -1;
  };
  auto decoder_for = [](const std::string &codec, int gpu) -> std::string {
    if (codec != "h264") return codec == "av1" && gpu == 0 ? "nvav1dec" : "";
    return gpu == 0 ? "nvh264dec" : gpu == 1 ? "nvh264device1dec" : "";
  };
  auto moved_to = [&](const std::string &source, int gpu, std::vector<std::string> *moved) {
    return gst_cv_nvdec_moved(source, gpu, device_of, decoder_for, moved);
  };
  const std::string source =
      "rtspsrc location=rtsp://127.0.0.1/a ! rtph264depay ! h264parse ! nvh264dec ! queue";
  std::vector<std::string> moved;
  EXPECT_EQ(moved_to(source, 1, &moved),
            "rtspsrc location=rtsp://127.0.0.1/a ! rtph264depay ! h264parse ! nvh264device1dec ! "
            "queue");
  EXPECT_EQ(moved, std::vector<std::string>{"nvh264dec -> nvh264device1dec"});
  moved.clear();
  EXPECT_EQ(moved_to(source, 0, &moved), source);  // already there
  EXPECT_EQ(moved_to(source, -1, &moved), source);  // the CPU: NVDEC is no worse than another
  EXPECT_TRUE(moved.empty());
  // Back to the first GPU, the stateless decoder too; without blanks around the links.
  EXPECT_EQ(moved_to("filesrc location=a.h264!h264parse!nvh264device1dec", 0, nullptr),
            "filesrc location=a.h264!h264parse!nvh264dec");
  EXPECT_EQ(moved_to("h264parse ! nvh264sldec", 1, nullptr), "h264parse ! nvh264device1dec");
  // Quoted values and properties name no element; a codec the GPU cannot decode stays.
  const std::string quoted = "filesrc location=\"nvh264dec\" name=nvh264dec ! nvav1dec";
  EXPECT_EQ(moved_to(quoted, 1, &moved), quoted);
  EXPECT_TRUE(moved.empty());
}

}  // namespace
