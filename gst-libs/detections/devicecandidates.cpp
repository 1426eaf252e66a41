#include "devicecandidates.h"

#include <gst/cudanms/cudanmsmeta.h>

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
  dc->download = download;
  dc->user_data = new Held(std::move(candidates));
  dc->release = release;
  return gst_cuda_nms_candidates_meta_set_device(meta, dc);
}
