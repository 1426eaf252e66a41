#include "dnnframesinflight.h"

DnnFrame::~DnnFrame() {
  wait();
  if (buffer) gst_buffer_unref(buffer);
}

const cudanms::Status &DnnFrame::wait() {
  if (network) status = network->wait(ticket);
  network = nullptr;
  ticket.reset();
  if (is_mapped) gst_video_frame_unmap(&mapped), is_mapped = false;
  return status;
}

void DnnFrame::reuse() {
  wait();
  if (buffer) gst_buffer_unref(buffer), buffer = nullptr;
  job = DnnJob();
  host.clear();
  out.reset();
  submitted = false;
  status = cudanms::Status();
  gpu_id = 0;
}

std::unique_ptr<DnnFrame> DnnFramesInFlight::take() {
  if (spare_.empty()) return std::make_unique<DnnFrame>();
  std::unique_ptr<DnnFrame> frame = std::move(spare_.back());
  spare_.pop_back();
  return frame;
}

void DnnFramesInFlight::recycle(std::unique_ptr<DnnFrame> frame) {
  frame->reuse();
  spare_.push_back(std::move(frame));
}

void DnnFramesInFlight::submitted(std::unique_ptr<DnnFrame> frame) {
  frames_.push_back(std::move(frame));
  submitted_ = true;
}

GstFlowReturn DnnFramesInFlight::release_oldest(GstBuffer **out) {
  std::unique_ptr<DnnFrame> frame = std::move(frames_.front());
  frames_.pop_front();
  if (frame->submitted) {
    const GstCudaNmsDetection detection = finish_(frame.get());
    if (detection.outcome() != GstCudaNmsDetection::Outcome::kDone) {
      /* The GPU's failure too: the frame has gone by, no CPU can run it again. */
      GST_ELEMENT_ERROR(
          element_, STREAM, FAILED,
          ("%s", detection.summary().empty() ? "Detection failed" : detection.summary().c_str()),
          ("%s", detection.detail().c_str()));
      return GST_FLOW_ERROR;
    }
  }
  *out = frame->buffer;
  frame->buffer = nullptr;
  recycle(std::move(frame));
  return GST_FLOW_OK;
}

GstFlowReturn DnnFramesInFlight::hold(GstBuffer *fresh, guint limit, GstBuffer **out) {
  *out = nullptr;
  if (fresh && submitted_) {
    frames_.back()->buffer = fresh;
  } else if (fresh && frames_.empty()) {
    *out = fresh;
    return GST_FLOW_OK;
  } else if (fresh) { /* finished when it came (e.g. on the CPU fallback): after those ahead */
    frames_.push_back(take());
    frames_.back()->buffer = fresh;
  }
  submitted_ = false;
  if (frames_.empty()) return GST_FLOW_OK;
  const DnnFrame &oldest = *frames_.front();
  if (frames_.size() < limit && oldest.network && !oldest.network->done(oldest.ticket))
    return GST_FLOW_OK;
  return release_oldest(out);
}

GstFlowReturn DnnFramesInFlight::drain() {
  GstFlowReturn ret = GST_FLOW_OK;
  while (ret == GST_FLOW_OK && !frames_.empty()) {
    GstBuffer *out = nullptr;
    ret = release_oldest(&out);
    if (ret == GST_FLOW_OK) ret = gst_pad_push(GST_BASE_TRANSFORM_SRC_PAD(element_), out);
  }
  drop();
  return ret;
}

void DnnFramesInFlight::wait_all() {
  for (std::unique_ptr<DnnFrame> &frame : frames_) frame->wait();
}

void DnnFramesInFlight::drop() {
  frames_.clear(); /* ~DnnFrame waits */
  submitted_ = false;
}

GstClockTime dnn_held_latency(guint frames_in_flight, const GstVideoInfo &info) {
  if (frames_in_flight < 2 || info.fps_n <= 0 || info.fps_d <= 0) return 0;
  return gst_util_uint64_scale_int(GST_SECOND, info.fps_d, info.fps_n) * (frames_in_flight - 1);
}

void dnn_reserve_held_buffers(GstQuery *query, guint frames_in_flight) {
  for (guint i = 0; frames_in_flight > 1 && i < gst_query_get_n_allocation_pools(query); i++) {
    GstBufferPool *pool;
    guint size, min, max;
    gst_query_parse_nth_allocation_pool(query, i, &pool, &size, &min, &max);
    min += frames_in_flight - 1;
    if (max != 0 && max < min) max = min;
    gst_query_set_nth_allocation_pool(query, i, pool, size, min, max);
    if (pool) gst_object_unref(pool);
  }
}
