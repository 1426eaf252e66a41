// GPU memory on /metrics is labelled with CUDA's index, as gpus and gpu-id count: NVML's devices
// are matched to CUDA's by UUID, so that CUDA_VISIBLE_DEVICES's reordering and hiding hold.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cudanms/nms.h"
#include "gpu_memory.h"

namespace cudanms::service {
namespace {

TEST(GpuMemory, NvmlDevicesAreNumberedAsCudaSeesThem) {
  // CUDA_VISIBLE_DEVICES=2,0 on a host of three: CUDA's 0 is NVML's 2, NVML's 1 is hidden.
  const std::vector<std::string> cuda = {"GPU-cccc", "GPU-aaaa"};
  EXPECT_EQ(cuda_index_of("GPU-cccc", cuda), 0);
  EXPECT_EQ(cuda_index_of("GPU-aaaa", cuda), 1);
  EXPECT_EQ(cuda_index_of("GPU-bbbb", cuda), -1);
  EXPECT_EQ(cuda_index_of("", {""}), -1);  // an unreadable UUID matches nothing
}

TEST(GpuMemory, EveryGpuListedIsOneThisProcessMayUse) {
  const std::vector<GpuMemory> gpus = gpu_memory();
  const int visible = cudanms::cuda_device_count();
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (visible > 0) {
      EXPECT_LT(gpus[i].index, static_cast<unsigned>(visible));
    }
    if (i > 0) {
      EXPECT_LT(gpus[i - 1].index, gpus[i].index);
    }
    EXPECT_LE(gpus[i].used, gpus[i].total);
  }
  if (visible > 0) {
    EXPECT_EQ(gpus.size(), static_cast<size_t>(visible));
  }
}

}  // namespace
}  // namespace cudanms::service
