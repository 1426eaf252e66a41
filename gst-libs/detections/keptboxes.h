/* A frame's kept boxes as every element after cudanms reads them: from the frame's
 * GstCudaNmsResultMeta, else from its GstVideoRegionOfInterestMeta (another detector's, in DL
 * Streamer's convention). Each box comes with the ROI meta that stands for it, where there is
 * one, so that a tracker can write its id on both. Track ids travel as the result meta's
 * track_ids and, on each ROI meta, as DL Streamer's gvatrack writes them: a param structure
 * "object_id" with an int field "id" (gva_utils' set_object_id). */
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <map>
#include <string>
#include <vector>

struct KeptBox {
  float x1, y1, x2, y2; /* frame pixels */
  double score = 1.0;
  gint class_id = -1; /* -1: none (an ROI meta without a label_id) */
  std::string label;
  guint members = 0;          /* the candidates it stands for, where NMS counted them; else 0 */
  std::vector<double> points; /* x, y, ...: the result meta's points of the box */
  guint64 track_id = 0;       /* 0: no track */
  GstVideoRegionOfInterestMeta *roi = nullptr; /* the ROI meta for it, or null */
};

/* The kept boxes of @buf, in the result meta's order or the ROI metas'. @labels names the
 * classes detectors announced (for ROI metas with a label_id and no label). An ROI meta stands
 * for a result box when it has the box's rectangle (gst_cv_roi_rect) and its label as roi_type,
 * as cudanms adds them. */
std::vector<KeptBox> gst_cv_kept_boxes(GstBuffer *buf, const std::map<gint, std::string> &labels);

/* The ROI rectangle cudanms gives a box {x1, y1, x2, y2}: its pixels, outward (floor of the
 * start, ceiling of the end), from 0 to G_MAXUINT. */
void gst_cv_roi_rect(const gfloat *box, guint *x, guint *y, guint *w, guint *h);

/* The ROI meta's track id from its "object_id" structure; 0 without one. */
guint64 gst_cv_roi_track_id(GstVideoRegionOfInterestMeta *roi);

/* Sets (or replaces) the ROI meta's "object_id" structure: "id" an int as DL Streamer reads it,
 * or a guint64 past G_MAXINT. */
void gst_cv_roi_set_track_id(GstVideoRegionOfInterestMeta *roi, guint64 id);
