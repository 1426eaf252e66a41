/* A stream's annotated picture every so often, for people to look at (the camera service's
 * operator page; cudanms-streams --snapshots, which measures what it costs): off a tee, a branch
 * whose first pad lets one frame an interval through and drops the others, then a queue of one
 * frame that drops older ones, so that drawing (boxoverlay: boxes, tracks, lines and counts) and
 * encoding (JPEG, at most 640 pixels wide) never hold the stream back. Frames in GPU memory
 * (NVDEC's, kept there by the CUDA chain) are downloaded on the branch: the picture's only. */
#pragma once

#include <gst/gst.h>

#include <functional>
#include <string>

/* The branch's gst-launch description from the tee named @tee: "TEE. ! queue name=NAME-intake
 * ... ! fakesink name=NAME". */
std::string gst_cv_snapshot_branch(const std::string &tee, const std::string &name);

/* Paces the branch @name of @bin (built from gst_cv_snapshot_branch()): a frame each
 * @interval_s goes on, while @wanted says so (always without it); @picture gets each JPEG on the
 * branch's streaming thread. False when @bin has no such branch. A picture costs the GPU's
 * streams more than its share of the CPU: its frame's download waits on the device (measured
 * in docs/service.md), hence none while nobody looks. */
bool gst_cv_snapshot_attach(GstElement *bin, const std::string &name, double interval_s,
                            std::function<void(GstBuffer *jpeg)> picture,
                            std::function<bool()> wanted = nullptr);
