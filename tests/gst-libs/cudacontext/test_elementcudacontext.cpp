// Where an element whose gpu-id is -1 (the default) runs: on the device of the CUDA context its
// pipeline is given, so that an application (the service) places a pipeline on a GPU by the
// context alone and sets no element's gpu-id.
#include <cudanms/nms.h>
#include <gst/gst.h>
#include <gtest/gtest.h>

#include "elementcudacontext.h"

namespace {

class ElementCudaContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gst_init(nullptr, nullptr);
    element_ = gst_element_factory_make("identity", nullptr);
    ASSERT_NE(element_, nullptr);
    gst_object_ref_sink(element_);
  }
  void TearDown() override { gst_object_unref(element_); }
  GstElement *element_ = nullptr;
};

TEST_F(ElementCudaContextTest, AContextNamingADeviceAlonePlacesAnElementOfGpuIdMinusOne) {
  GstContext *named = gst_cv_cuda_device_context_new(3);
  ASSERT_NE(named, nullptr);
  EXPECT_EQ(gst_cv_cuda_context_device(named), 3);
  EXPECT_EQ(gst_cv_cuda_device_context_new(-1), nullptr);
  GstContext *other = gst_context_new("gst.gl.GLDisplay", TRUE);
  EXPECT_EQ(gst_cv_cuda_context_device(other), -1);
  EXPECT_EQ(gst_cv_cuda_context_device(nullptr), -1);

  ElementCudaContext cuda;
  EXPECT_EQ(cuda.device_for(-1), 0) << "given nothing: device 0";
  EXPECT_EQ(cuda.device_for(2), 2);
  cuda.set_context(element_, other, -1);
  EXPECT_EQ(cuda.device_for(-1), 0);
  cuda.set_context(element_, named, -1);
  EXPECT_EQ(cuda.device_for(-1), 3);
  EXPECT_EQ(cuda.device_for(2), 2) << "a gpu-id set wins over the context";
  cuda.reset();
  EXPECT_EQ(cuda.device_for(-1), 0) << "stopped: forgotten, asked again at the next start";
  gst_context_unref(named);
  gst_context_unref(other);
}

// On a GPU host: a device's context given, an element of gpu-id -1 holds it and runs on its
// device; each GPU of the machine in turn.
TEST_F(ElementCudaContextTest, TheContextOfAGpuGivenAnElementOfGpuIdMinusOneRunsThere) {
  const int gpus = cudanms::cuda_device_count();
  if (gpus == 0) GTEST_SKIP() << "no CUDA device";
  for (int gpu = 0; gpu < gpus; gpu++) {
    GstContext *context = gst_cv_cuda_primary_context_new(gpu);
    ASSERT_NE(context, nullptr) << gpu;
    EXPECT_EQ(gst_cv_cuda_context_device(context), gpu);
    ElementCudaContext cuda;
    cuda.set_context(element_, context, -1);
    ASSERT_TRUE(cuda.ensure(element_, -1));
    EXPECT_NE(cuda.handle(), nullptr);
    EXPECT_EQ(cuda.device_for(-1), gpu);
    gst_context_unref(context);
  }
  if (gpus < 2) printf("one GPU: the context of a second could not be given here\n");
}

}  // namespace
