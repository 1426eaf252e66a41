// Pools of pinned host memory (gst-libs/cudacontext/pinnedpool.h), what dnndetect proposes
// upstream: only for raw video in system memory on a machine with a GPU; their buffers are
// pinned memory that the GPU copies asynchronously, writable and shareable like system memory.
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cudanms/nms.h"
#include "pinnedpool.h"

#ifdef CUDANMS_HAVE_GST_CUDA
#include <cuda_runtime.h>
#endif

namespace {

class PinnedPool : public ::testing::Test {
 protected:
  void SetUp() override { gst_init(nullptr, nullptr); }

  // An ALLOCATION query for `caps`, and whether a pool of pinned memory was proposed in it.
  static bool proposed(const std::string &caps, GstQuery **query = nullptr) {
    GstCaps *c = gst_caps_from_string(caps.c_str());
    GstQuery *q = gst_query_new_allocation(c, TRUE);
    gst_caps_unref(c);
    const bool added = gst_cv_propose_pinned_memory(q);
    EXPECT_EQ(gst_query_get_n_allocation_pools(q), added ? 1u : 0u) << caps;
    if (query) {
      *query = q;
    } else {
      gst_query_unref(q);
    }
    return added;
  }
};

TEST_F(PinnedPool, OnlyRawVideoInSystemMemoryOnAMachineWithAGpu) {
  EXPECT_FALSE(proposed("audio/x-raw,format=S16LE,rate=48000,channels=2,layout=interleaved"));
  EXPECT_FALSE(proposed("video/x-raw(memory:CUDAMemory),format=NV12,width=64,height=48"));
  EXPECT_FALSE(proposed("video/x-raw,format=NV12"));  // not fixed: no size
  std::string why;
  const bool gpu = cudanms::cuda_available(&why);
  EXPECT_EQ(proposed("video/x-raw,format=NV12,width=64,height=48,framerate=30/1"), gpu) << why;
  GstBuffer *plain = gst_buffer_new_allocate(nullptr, 100, nullptr);
  EXPECT_FALSE(gst_cv_buffer_is_pinned(plain));
  gst_buffer_unref(plain);
  GstBuffer *empty = gst_buffer_new();
  EXPECT_FALSE(gst_cv_buffer_is_pinned(empty));
  gst_buffer_unref(empty);
}

TEST_F(PinnedPool, CudaBuffersArePinnedWritableAndShareable) {
  std::string why;
  if (!cudanms::cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
#ifndef CUDANMS_HAVE_GST_CUDA
  GTEST_SKIP() << "built without gstreamer-cuda: no pinned pools";
#else
  GstQuery *query = nullptr;
  ASSERT_TRUE(proposed("video/x-raw,format=NV12,width=64,height=48,framerate=30/1", &query));
  EXPECT_TRUE(gst_query_find_allocation_meta(query, GST_VIDEO_META_API_TYPE, nullptr));
  ASSERT_EQ(gst_query_get_n_allocation_params(query), 1u);
  GstAllocator *allocator = nullptr;
  gst_query_parse_nth_allocation_param(query, 0, &allocator, nullptr);
  ASSERT_NE(allocator, nullptr) << "the pool's allocator, which base classes set on the pool";
  gst_object_unref(allocator);
  GstBufferPool *pool = nullptr;
  guint size = 0;
  gst_query_parse_nth_allocation_pool(query, 0, &pool, &size, nullptr, nullptr);
  gst_query_unref(query);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(size, 64u * 48u * 3u / 2u);
  ASSERT_TRUE(gst_buffer_pool_set_active(pool, TRUE));
  GstBuffer *buffer = nullptr;
  ASSERT_EQ(gst_buffer_pool_acquire_buffer(pool, &buffer, nullptr), GST_FLOW_OK);
  EXPECT_TRUE(gst_cv_buffer_is_pinned(buffer));
  GstMapInfo map;
  ASSERT_TRUE(gst_buffer_map(buffer, &map, GST_MAP_WRITE));
  for (gsize i = 0; i < map.size; i++) map.data[i] = static_cast<guint8>(i * 7);
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, map.data), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost) << "page-locked, known to CUDA";
  // Through the GPU and back, asynchronously as a DMA from pinned memory may be.
  void *device = nullptr;
  std::vector<guint8> back(map.size);
  ASSERT_EQ(cudaMalloc(&device, map.size), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(device, map.data, map.size, cudaMemcpyHostToDevice, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), device, map.size, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(std::memcmp(back.data(), map.data, map.size), 0);
  cudaFree(device);
  gst_buffer_unmap(buffer, &map);
  // A region of it shares the pinned memory.
  GstBuffer *part = gst_buffer_copy_region(buffer, GST_BUFFER_COPY_MEMORY, 10, 20);
  EXPECT_TRUE(gst_cv_buffer_is_pinned(part));
  GstMapInfo part_map;
  ASSERT_TRUE(gst_buffer_map(part, &part_map, GST_MAP_READ));
  EXPECT_EQ(part_map.size, 20u);
  EXPECT_EQ(part_map.data[0], static_cast<guint8>(10 * 7));
  gst_buffer_unmap(part, &part_map);
  gst_buffer_unref(part);
  gst_buffer_unref(buffer);
  EXPECT_TRUE(gst_buffer_pool_set_active(pool, FALSE));
  gst_object_unref(pool);
#endif
}

}  // namespace
