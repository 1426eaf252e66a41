/* The lines' running counts as a GstStructure, the form of boxcount's "counts" property: one
 * field a line, a structure "line" with guint64 fields "in" and "out" and a structure "labels",
 * one field a label, each a "line" of its own. boxcount reads and writes it; the camera service
 * writes it to resume a camera's counts. */
#pragma once

#include <cudanms/count.h>
#include <gst/gst.h>

/* A new structure "counts" (free it with gst_structure_free). */
GstStructure *gst_cuda_nms_counts_structure(const cudanms::LineTallies &counts);
/* The counts of @structure's lines; fields that are not lines are left out, and a missing "in",
 * "out" or "labels" is zero (none). */
cudanms::LineTallies gst_cuda_nms_counts_from_structure(const GstStructure *structure);
