/* The cudanms element's intake: a frame's candidates (and their points), gathered from its
 * candidates metas and region-of-interest metas and clipped to the frame, as the view the NMS
 * library reads. */
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <string>
#include <vector>

#include "cudanms/nms.h"

class CandidateIntake {
 public:
  /* The frame size boxes are clipped to; 0 x 0: unknown, no clipping. */
  void set_frame_size(int width, int height);

  /* The frame's candidates in device memory, for NMS in place: when they are its only source (one
   * candidates meta holding device candidates of @cuda_context, not mapped, no ROI metas). */
  bool device_view(GstBuffer *buffer, void *cuda_context, cudanms::DeviceCandidatesView *view);

  /* Brings device candidates to the host (gst_cuda_nms_candidates_meta_map), as gather() needs;
   * false when a download failed, with *error saying why. */
  bool map_all(GstBuffer *buffer, std::string *error);

  /* The frame's candidates, numbered (which matters only between equal scores) in the order their
   * metas were added: those of the candidates metas, then the ROI metas. The view points straight
   * at the meta's arrays when one candidates meta is the only source and nothing needs clipping;
   * otherwise at this object's arrays. Valid until the next call or until the metas go. */
  cudanms::CandidatesView gather(GstBuffer *buffer);

  /* The roi_type of the ROI meta candidate `index` of the last gather() came from; 0 when it came
   * from a candidates meta. */
  GQuark roi_type(size_t index) const;

 private:
  /* Candidate k of the gathered arrays from a ROI meta: its box, its confidence (1 without) and
   * its class (the detection's label id, else the roi_type's class). */
  void set_roi(const GstVideoRegionOfInterestMeta *roi, size_t k);
  int width_ = 0;
  int height_ = 0;
  bool from_rois_ = false;
  /* Reused per frame. */
  std::vector<float> boxes_;
  std::vector<float> scores_;
  std::vector<int32_t> class_ids_;
  std::vector<float> points_;
  std::vector<GQuark> roi_types_;
  std::vector<GstMeta *> packed_metas_;
  std::vector<GstMeta *> roi_metas_;
};
