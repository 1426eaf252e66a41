/* dnndetect's frames handed to the network and not yet out, in arrival order (frames-in-flight
 * above 1): each leaves once its candidates are attached, the oldest at the latest once
 * frames-in-flight frames are held, so that the element's next frame joins the next batch while
 * this one's runs. The element says how a frame is finished (its batch waited for, its
 * candidates attached); this keeps the order, the hand-outs and what GStreamer asks of an
 * element that holds frames: drained before serialized events, dropped on a flush, counted in
 * the latency and in upstream's pools. */
#pragma once

#include <cudanms/dnn.h>
#include <gst/base/gstbasetransform.h>
#include <gst/video/video.h>

#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "dnnbatchgroup.h"
#include "gstcudanmsdetector.h"

/* A frame handed to the network, until its candidates are attached. */
struct DnnFrame {
  GstBuffer *buffer = nullptr; /* owned once held */
  DnnJob job;
  cudanms::dnn::Candidates host;                  /* job.host */
  std::shared_ptr<cudanms::DeviceCandidates> out; /* job.device_out's buffer */
  /* Where it went, until waited for (then its status is kept); a frame that came finished
   * (e.g. on the CPU fallback) went nowhere. */
  DnnBatchGroup::Member *network = nullptr;
  DnnBatchGroup::Ticket ticket;
  bool submitted = false;
  cudanms::Status status;
  int gpu_id = 0;
  /* A frame in host memory mapped again for as long as its batch may read it (the base maps it
   * for the call only). */
  GstVideoFrame mapped;
  bool is_mapped = false;

  DnnFrame() = default;
  DnnFrame(const DnnFrame &) = delete;
  DnnFrame &operator=(const DnnFrame &) = delete;
  ~DnnFrame();
  /* Its batch's status, waited for once; the frame unmapped. */
  const cudanms::Status &wait();
  /* Waited for and emptied for the next frame; its candidates' vectors keep their room. */
  void reuse();
};

class DnnFramesInFlight {
 public:
  /* Waits for the frame's batch and attaches its candidates to its buffer. */
  using Finish = std::function<GstCudaNmsDetection(DnnFrame *frame)>;
  DnnFramesInFlight(GstBaseTransform *element, Finish finish)
      : element_(element), finish_(std::move(finish)) {}
  ~DnnFramesInFlight() { drop(); }

  /* An empty frame for detect(): one that left before, else a new one (no allocation a frame
   * once the element runs). */
  std::unique_ptr<DnnFrame> take();
  /* A frame done with (its buffer handed out or not owned), kept for take(). */
  void recycle(std::unique_ptr<DnnFrame> frame);
  /* detect()'s frame, handed to the network; its buffer comes with the next hold(). */
  void submitted(std::unique_ptr<DnnFrame> frame);
  /* generate_output()'s: the base's frame (nullptr: none) held behind the others; *out the
   * oldest one where it may leave (else nullptr). A frame that fails is an error (posted). */
  GstFlowReturn hold(GstBuffer *fresh, guint limit, GstBuffer **out);
  /* Every frame pushed downstream in order (before a serialized event); the rest dropped after
   * a push fails. */
  GstFlowReturn drain();
  /* Every frame's batch waited for (it reads their jobs), the frames let go, not pushed. */
  void drop();
  /* Every frame's batch waited for, the frames kept: before their network goes. */
  void wait_all();
  bool empty() const { return frames_.empty(); }

 private:
  GstFlowReturn release_oldest(GstBuffer **out);

  GstBaseTransform *element_;
  Finish finish_;
  std::deque<std::unique_ptr<DnnFrame>> frames_;
  std::vector<std::unique_ptr<DnnFrame>> spare_; /* take()'s */
  bool submitted_ = false;                       /* the newest frame waits for its buffer */
};

/* How much later frames-in-flight frames let a frame of `info`'s rate leave; 0 at an unknown
 * rate. */
GstClockTime dnn_held_latency(guint frames_in_flight, const GstVideoInfo &info);
/* Upstream's pools in the ALLOCATION query hold the frames-in-flight - 1 buffers held here
 * more. */
void dnn_reserve_held_buffers(GstQuery *query, guint frames_in_flight);
