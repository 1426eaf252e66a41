/* The cudanms element's output: the kept boxes as one GstCudaNmsResultMeta and as one
 * GstVideoRegionOfInterestMeta each, for every ROI-aware element downstream. */
#pragma once

#include <gst/cudanms/cudanmsmeta.h>
#include <gst/gst.h>

#include "cudanms/nms.h"
#include "cudanmsintake.h"
#include "cudanmslabels.h"

/* Removes the buffer's result metas (of an earlier cudanms). */
void gst_cuda_nms_remove_result_metas(GstBuffer *buffer);
/* Removes the candidates the element consumed: candidates metas and ROI metas. */
void gst_cuda_nms_remove_candidate_metas(GstBuffer *buffer);

/* The result meta of a frame: kept boxes copied out of @view (which may point into a candidates
 * meta about to be removed), or out of @result where it carries values (soft, weighted), their
 * points, labels, the counts, @latency_ns and @backend. */
GstCudaNmsResultMeta *gst_cuda_nms_add_result_meta(GstBuffer *buffer,
                                                   const cudanms::CandidatesView &view,
                                                   const cudanms::Result &result,
                                                   const CandidateIntake &intake,
                                                   const ClassLabels &labels, gint64 latency_ns,
                                                   const gchar *backend);

/* One ROI meta per kept box: roi_type its label, a "detection" structure with confidence,
 * label_id, label and (with a known frame size) the normalized x_min, y_min, x_max, y_max. */
void gst_cuda_nms_add_roi_metas(GstBuffer *buffer, const GstCudaNmsResultMeta *result, int width,
                                int height);
