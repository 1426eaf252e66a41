/* Video buffers in pinned (page-locked) host memory, for the element a CUDA detector proposes
 * upstream: a decoder or converter then writes frames straight into memory the GPU copies at
 * the bus's full rate, asynchronously (from ordinary pageable memory the driver first copies
 * each plane into its own pinned buffer, on the calling thread). */
#pragma once

#include <gst/gst.h>

G_BEGIN_DECLS

/* Adds to the ALLOCATION query @query (raw video in system memory) a video buffer pool of pinned
 * memory and its allocator, with video meta: a source or decoder then writes its frames there
 * (the allocator too, as base classes set the query's first allocator on the pool they take).
 * FALSE without CUDA or a GPU, or for other caps: nothing is added. */
gboolean gst_cv_propose_pinned_memory(GstQuery *query);

/* Whether @buffer's memory is all pinned memory of such a pool. */
gboolean gst_cv_buffer_is_pinned(GstBuffer *buffer);

G_END_DECLS
