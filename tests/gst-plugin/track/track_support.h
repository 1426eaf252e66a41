// Shared by the tracking plugin's tests: its elements (and cudanms, jsonmetawriter) registered
// statically, frames of people walking, and the ids and counts read back from the metas.
#pragma once

#include <gst/check/gstharness.h>
#include <gst/cudanms/cudanmsmeta.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gstboxcount.h"
#include "gstboxtrack.h"
#include "gstcudanms.h"
#include "gstjsonmetawriter.h"
#include "keptboxes.h"

namespace cudanms::testing {

inline void init_track_elements_once() {
  static const bool done = [] {
    gst_init(nullptr, nullptr);
    return GST_ELEMENT_REGISTER(cudanms, nullptr) && GST_ELEMENT_REGISTER(boxtrack, nullptr) &&
           GST_ELEMENT_REGISTER(boxcount, nullptr) && GST_ELEMENT_REGISTER(jsonmetawriter, nullptr);
  }();
  ASSERT_TRUE(done);
}

constexpr char kCaps[] = "video/x-raw,format=GRAY8,width=640,height=480,framerate=25/1";
constexpr GstClockTime kFrame = GST_SECOND / 25;

// A person's box: 40 x 100 px standing on (x, y).
struct Person {
  float x, y;
  float score = 0.9f;
};

// A frame's candidates meta with the people's boxes (no memory: no element here maps it).
inline GstBuffer *frame_of(const std::vector<Person> &people, GstClockTime pts) {
  GstBuffer *buf = gst_buffer_new();
  GST_BUFFER_PTS(buf) = pts;
  GST_BUFFER_DURATION(buf) = kFrame;
  GstCudaNmsCandidatesMeta *c =
      gst_buffer_add_cuda_nms_candidates_meta(buf, static_cast<guint>(people.size()));
  for (const Person &p : people)
    gst_cuda_nms_candidates_meta_append(c, p.x - 20, p.y - 100, p.x + 20, p.y, p.score, 0);
  return buf;
}

// The result meta's track ids, in its order.
inline std::vector<guint64> result_ids(GstBuffer *buf) {
  const GstCudaNmsResultMeta *r = gst_buffer_get_cuda_nms_result_meta(buf);
  if (!r || !r->track_ids) return std::vector<guint64>(r ? r->n_kept : 0, 0);
  return std::vector<guint64>(r->track_ids, r->track_ids + r->n_kept);
}

// The "object_id" ids of the buffer's ROI metas, in the order they were added.
inline std::vector<guint64> roi_ids(GstBuffer *buf) {
  std::vector<GstMeta *> metas;
  gpointer state = nullptr;
  while (GstMeta *m = gst_buffer_iterate_meta_filtered(buf, &state,
                                                       GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE))
    metas.push_back(m);
  std::sort(metas.begin(), metas.end(),
            [](GstMeta *a, GstMeta *b) { return gst_meta_get_seqnum(a) < gst_meta_get_seqnum(b); });
  std::vector<guint64> ids;
  for (GstMeta *m : metas)
    ids.push_back(gst_cv_roi_track_id(reinterpret_cast<GstVideoRegionOfInterestMeta *>(m)));
  return ids;
}

// The first element message of `name` on the harness's bus, or null.
inline GstStructure *element_message(GstBus *bus, const char *name) {
  while (GstMessage *m = gst_bus_pop(bus)) {
    if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_ELEMENT &&
        gst_structure_has_name(gst_message_get_structure(m), name)) {
      GstStructure *s = gst_structure_copy(gst_message_get_structure(m));
      gst_message_unref(m);
      return s;
    }
    gst_message_unref(m);
  }
  return nullptr;
}

}  // namespace cudanms::testing
