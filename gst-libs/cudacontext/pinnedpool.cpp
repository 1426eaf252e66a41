#include "pinnedpool.h"

#include <gst/video/gstvideopool.h>
#include <gst/video/video.h>

#ifdef CUDANMS_HAVE_GST_CUDA
#include <cuda_runtime.h>
#endif

#define PINNED_MEMORY_TYPE "CvPinnedMemory"

#ifdef CUDANMS_HAVE_GST_CUDA

namespace {

/* A block of cudaHostAlloc memory, or a share of one (parent set, data its parent's). */
struct PinnedMemory {
  GstMemory mem;
  guint8 *data;
};

struct GstCvPinnedAllocator {
  GstAllocator parent;
};
struct GstCvPinnedAllocatorClass {
  GstAllocatorClass parent_class;
};

GType gst_cv_pinned_allocator_get_type();
G_DEFINE_TYPE(GstCvPinnedAllocator, gst_cv_pinned_allocator, GST_TYPE_ALLOCATOR)

GstMemory *pinned_alloc(GstAllocator *allocator, gsize size, GstAllocationParams *params) {
  const gsize maxsize = size + params->prefix + params->padding;
  void *data = nullptr;
  /* Portable: pinned for every CUDA context of the process, whichever the frame goes to. The
   * block is page-aligned, more than any video alignment asks. */
  if (cudaHostAlloc(&data, maxsize, cudaHostAllocPortable) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  auto *m = g_new0(PinnedMemory, 1);
  gst_memory_init(GST_MEMORY_CAST(m), params->flags, allocator, nullptr, maxsize, params->align,
                  params->prefix, size);
  m->data = static_cast<guint8 *>(data);
  return GST_MEMORY_CAST(m);
}

void pinned_free(GstAllocator *, GstMemory *mem) {
  auto *m = reinterpret_cast<PinnedMemory *>(mem);
  if (!mem->parent) cudaFreeHost(m->data);
  g_free(m);
}

gpointer pinned_map(GstMemory *mem, gsize, GstMapFlags) {
  return reinterpret_cast<PinnedMemory *>(mem)->data;
}

void pinned_unmap(GstMemory *) {}

GstMemory *pinned_share(GstMemory *mem, gssize offset, gssize size) {
  GstMemory *parent = mem->parent ? mem->parent : mem;
  if (size == -1) size = static_cast<gssize>(mem->size) - offset;
  auto *m = g_new0(PinnedMemory, 1);
  gst_memory_init(GST_MEMORY_CAST(m),
                  static_cast<GstMemoryFlags>(GST_MINI_OBJECT_FLAGS(parent) |
                                              GST_MINI_OBJECT_FLAG_LOCK_READONLY),
                  mem->allocator, parent, mem->maxsize, mem->align, mem->offset + offset, size);
  m->data = reinterpret_cast<PinnedMemory *>(mem)->data;
  return GST_MEMORY_CAST(m);
}

void gst_cv_pinned_allocator_class_init(GstCvPinnedAllocatorClass *klass) {
  GST_ALLOCATOR_CLASS(klass)->alloc = pinned_alloc;
  GST_ALLOCATOR_CLASS(klass)->free = pinned_free;
}

void gst_cv_pinned_allocator_init(GstCvPinnedAllocator *self) {
  GstAllocator *alloc = GST_ALLOCATOR_CAST(self);
  alloc->mem_type = PINNED_MEMORY_TYPE;
  alloc->mem_map = pinned_map;
  alloc->mem_unmap = pinned_unmap;
  alloc->mem_share = pinned_share;
}

GstAllocator *pinned_allocator() {
  static GstAllocator *allocator = [] {
    auto *a = GST_ALLOCATOR_CAST(g_object_new(gst_cv_pinned_allocator_get_type(), nullptr));
    gst_object_ref_sink(a);
    GST_OBJECT_FLAG_SET(a, GST_OBJECT_FLAG_MAY_BE_LEAKED);
    return a;
  }();
  return allocator;
}

}  // namespace

gboolean gst_cv_propose_pinned_memory(GstQuery *query) {
  GstCaps *caps = nullptr;
  gst_query_parse_allocation(query, &caps, nullptr);
  GstVideoInfo info;
  if (!caps || !gst_video_info_from_caps(&info, caps)) return FALSE;
  GstCapsFeatures *features = gst_caps_get_features(caps, 0);
  if (features && !gst_caps_features_is_equal(features, GST_CAPS_FEATURES_MEMORY_SYSTEM_MEMORY))
    return FALSE;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    return FALSE;
  }
  GstBufferPool *pool = gst_video_buffer_pool_new();
  GstStructure *config = gst_buffer_pool_get_config(pool);
  gst_buffer_pool_config_set_params(config, caps, static_cast<guint>(info.size), 0, 0);
  gst_buffer_pool_config_set_allocator(config, pinned_allocator(), nullptr);
  gst_buffer_pool_config_add_option(config, GST_BUFFER_POOL_OPTION_VIDEO_META);
  if (!gst_buffer_pool_set_config(pool, config)) {
    gst_object_unref(pool);
    return FALSE;
  }
  gst_query_add_allocation_pool(query, pool, static_cast<guint>(info.size), 0, 0);
  gst_object_unref(pool);
  gst_query_add_allocation_param(query, pinned_allocator(), nullptr);
  if (!gst_query_find_allocation_meta(query, GST_VIDEO_META_API_TYPE, nullptr))
    gst_query_add_allocation_meta(query, GST_VIDEO_META_API_TYPE, nullptr);
  return TRUE;
}

gboolean gst_cv_buffer_is_pinned(GstBuffer *buffer) {
  const guint n = gst_buffer_n_memory(buffer);
  for (guint i = 0; i < n; i++)
    if (!gst_memory_is_type(gst_buffer_peek_memory(buffer, i), PINNED_MEMORY_TYPE)) return FALSE;
  return n > 0;
}

#else

gboolean gst_cv_propose_pinned_memory(GstQuery *) { return FALSE; }
gboolean gst_cv_buffer_is_pinned(GstBuffer *) { return FALSE; }

#endif
