#include "devicecandidates.h"

#include <gst/cudanms/cudanmsmeta.h>

GST_DEBUG_CATEGORY_STATIC(gst_cv_device_candidates_debug);
#define GST_CAT_DEFAULT gst_cv_device_candidates_debug

namespace {

using Held = std::shared_ptr<cudanms::DeviceCandidates>;

gboolean download(gpointer user_data, guint *n, gfloat **boxes, gfloat **scores, gint32 **class_ids,
                  gchar **error) {
  cudanms::HostCandidates host;
  const cudanms::Status status = (*static_cast<Held *>(user_data))->download(&host);
  if (!status.ok()) {
    *error = g_strdup(status.message().c_str());
    return FALSE;
  }
  *n = static_cast<guint>(host.scores.size());
  *boxes = static_cast<gfloat *>(g_memdup2(host.boxes.data(), host.boxes.size() * sizeof(gfloat)));
  *scores = static_cast<gfloat *>(g_memdup2(host.scores.data(), *n * sizeof(gfloat)));
  *class_ids = static_cast<gint32 *>(g_memdup2(host.class_ids.data(), *n * sizeof(gint32)));
  return TRUE;
}

void release(gpointer user_data) { delete static_cast<Held *>(user_data); }

}  // namespace

gboolean gst_cv_attach_device_candidates(GstBuffer *buffer, Held candidates, gint device) {
  GstCudaNmsCandidatesMeta *existing = gst_buffer_get_cuda_nms_candidates_meta(buffer);
  if (existing && (existing->n > 0 || existing->device)) return FALSE;
  GstCudaNmsCandidatesMeta *meta = gst_buffer_add_cuda_nms_candidates_meta(buffer, 0);
  if (!meta) return FALSE;
  GstCudaNmsDeviceCandidates *dc = gst_cuda_nms_device_candidates_new();
  dc->device = device;
  dc->cuda_context = candidates->context();
  dc->boxes = candidates->boxes();
  dc->scores = candidates->scores();
  dc->class_ids = candidates->class_ids();
  dc->count = candidates->count();
  dc->capacity = static_cast<guint>(candidates->capacity());
  dc->ready_event = candidates->ready();
  dc->host_count = candidates->host_count();
  dc->download = download;
  dc->user_data = new Held(std::move(candidates));
  dc->release = release;
  return gst_cuda_nms_candidates_meta_set_device(meta, dc);
}

/* Buffers in flight per element at most: the pool's memory bound. */
#define DEVICE_CANDIDATES_BUFFERS 8

std::shared_ptr<cudanms::DeviceCandidates> GstCvDeviceCandidatesPool::acquire(GstElement *element,
                                                                              gint device,
                                                                              size_t capacity) {
  GST_DEBUG_CATEGORY_INIT(gst_cv_device_candidates_debug, "cvdevicecandidates", 0,
                          "Device candidates of the detectors");
  cudanms::Status status;
  if (!pool_ || pool_->capacity() < capacity) {
    cudanms::DeviceCandidatesPoolOptions options;
    options.device = device;
    options.capacity = capacity;
    options.max_buffers = DEVICE_CANDIDATES_BUFFERS;
    pool_ = cudanms::DeviceCandidatesPool::create(options, &status);
    if (!pool_) {
      GST_WARNING_OBJECT(element, "no device candidates pool: %s", status.message().c_str());
      return nullptr;
    }
    GST_INFO_OBJECT(element,
                    "device candidates: up to %d buffers of %zu candidates, %.1f MiB at most",
                    DEVICE_CANDIDATES_BUFFERS, capacity,
                    DEVICE_CANDIDATES_BUFFERS * (capacity * 24.0 + 4) / (1 << 20));
  }
  std::shared_ptr<cudanms::DeviceCandidates> buffer = pool_->acquire(&status);
  if (!buffer && !warned_full_) {
    GST_WARNING_OBJECT(element,
                       "all %d device candidates buffers are downstream%s%s: this frame's "
                       "candidates go in host memory",
                       DEVICE_CANDIDATES_BUFFERS, status.ok() ? "" : ": ",
                       status.message().c_str());
    warned_full_ = true;
  }
  return buffer;
}

void GstCvDeviceCandidatesPool::reset() {
  pool_.reset();
  warned_full_ = false;
}
