// The lists of GPUs the camera service (gpus) and pipelines/streams (--gpus) take.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpulist.h"

namespace {

TEST(GpuList, AllNoneOrIndicesOnceEach) {
  std::vector<unsigned> gpus;
  bool all = false;
  std::string why;
  EXPECT_TRUE(gst_cv_parse_gpu_list("all", &gpus, &all, &why));
  EXPECT_TRUE(all);
  EXPECT_TRUE(gpus.empty());
  EXPECT_TRUE(gst_cv_parse_gpu_list("none", &gpus, &all, &why));
  EXPECT_FALSE(all);
  EXPECT_TRUE(gpus.empty());
  EXPECT_TRUE(gst_cv_parse_gpu_list("0, 2,3", &gpus, &all, &why));
  EXPECT_EQ(gpus, (std::vector<unsigned>{0, 2, 3}));
  for (const char *bad : {"", "1,1", "-1", "0,", "gpu0", "1.5", "99999999999999999999", "2048"}) {
    EXPECT_FALSE(gst_cv_parse_gpu_list(bad, &gpus, &all, &why)) << bad;
    EXPECT_EQ(why, std::string("must be all, none or GPU indices once each (0,2,3), not \"") + bad +
                       "\"");
    EXPECT_TRUE(gpus.empty());
  }
}

}  // namespace
