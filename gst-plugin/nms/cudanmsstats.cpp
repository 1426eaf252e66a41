#include "cudanmsstats.h"

#include <algorithm>
#include <cmath>

GST_DEBUG_CATEGORY_EXTERN(gst_cuda_nms_debug);
#define GST_CAT_DEFAULT gst_cuda_nms_debug

/* At most one over-capacity warning in this many microseconds. */
#define CAPACITY_WARNING_PERIOD_US (10 * G_USEC_PER_SEC)
/* The latency percentiles of a stats message are taken over at most this many frames. */
#define LATENCY_WINDOW 4096

namespace {

/* Percentile p (0..1) of the latencies, nearest rank. */
double percentile(std::vector<double> &values, double p) {
  if (values.empty()) return 0.0;
  size_t rank = static_cast<size_t>(std::ceil(p * values.size()));
  rank = std::min(std::max<size_t>(rank, 1), values.size()) - 1;
  std::nth_element(values.begin(), values.begin() + rank, values.end());
  return values[rank];
}

}  // namespace

FrameStats::FrameStats() {
  latencies_.reserve(LATENCY_WINDOW);
  scratch_.reserve(LATENCY_WINDOW);
}

void FrameStats::reset() {
  capacity_warned_ = false;
  capacity_frames_ = capacity_dropped_ = 0;
  latencies_.clear();
  latency_next_ = 0;
  interval_frames_ = 0;
  interval_in_ = interval_out_ = 0;
}

void FrameStats::note_over_capacity(GstElement *element, guint max_candidates, size_t dropped) {
  if (dropped == 0) return;
  capacity_frames_++;
  capacity_dropped_ += dropped;
  const gint64 now = g_get_monotonic_time();
  if (capacity_warned_ && now - capacity_warned_at_ < CAPACITY_WARNING_PERIOD_US) {
    GST_DEBUG_OBJECT(element, "%" G_GSIZE_FORMAT " candidates over max-candidates", dropped);
    return;
  }
  GST_ELEMENT_WARNING(
      element, STREAM, FAILED, ("More candidates than max-candidates=%u", max_candidates),
      ("%" G_GUINT64_FORMAT " frame(s) had more candidates than max-candidates=%u; the "
       "lowest-scoring %" G_GUINT64_FORMAT " were not processed (counted in the result meta). "
       "Raise max-candidates or score-threshold. At most one such warning every %d s.",
       capacity_frames_, max_candidates, capacity_dropped_,
       static_cast<int>(CAPACITY_WARNING_PERIOD_US / G_USEC_PER_SEC)));
  capacity_warned_ = true;
  capacity_warned_at_ = now;
  capacity_frames_ = capacity_dropped_ = 0;
}

void FrameStats::note_frame(GstElement *element, guint interval, const cudanms::Counts &counts,
                            double latency_us, guint64 frames, const gchar *backend) {
  if (interval == 0) return;
  if (latencies_.size() < LATENCY_WINDOW) {
    latencies_.push_back(latency_us);
  } else {
    latencies_[latency_next_] = latency_us;
  }
  latency_next_ = (latency_next_ + 1) % LATENCY_WINDOW;
  interval_frames_++;
  interval_in_ += counts.in;
  interval_out_ += counts.kept;
  if (interval_frames_ < interval) return;

  scratch_.assign(latencies_.begin(), latencies_.end());
  const double p50 = percentile(scratch_, 0.50);
  const double p99 = percentile(scratch_, 0.99);
  GstStructure *st = gst_structure_new(
      "cudanms-stats", "frames", G_TYPE_UINT64, frames, "interval-frames", G_TYPE_UINT,
      interval_frames_, "candidates-in", G_TYPE_UINT64, interval_in_, "detections-out",
      G_TYPE_UINT64, interval_out_, "latency-p50-us", G_TYPE_DOUBLE, p50, "latency-p99-us",
      G_TYPE_DOUBLE, p99, "backend", G_TYPE_STRING, backend, NULL);
  GST_DEBUG_OBJECT(element, "stats: %" GST_PTR_FORMAT, st);
  gst_element_post_message(element, gst_message_new_element(GST_OBJECT(element), st));
  latencies_.clear();
  latency_next_ = 0;
  interval_frames_ = 0;
  interval_in_ = interval_out_ = 0;
}
