/* A stream's annotated picture every so often, for people to look at (the camera service's
 * operator page; cudanms-streams --snapshots, which measures what it costs), or one of each frame
 * with counting events (the service's events' pictures): off a tee, a branch
 * whose first pad lets one frame an interval through and drops the others, then a queue of one
 * frame that drops older ones, so that drawing (boxoverlay: boxes, tracks, lines and counts) and
 * encoding (JPEG, at most 640 pixels wide) never hold the stream back. Frames in GPU memory
 * (NVDEC's, kept there by the CUDA chain) are downloaded on the branch: the picture's only. */
#pragma once

#include <gst/gst.h>

#include <functional>
#include <string>

/* The branch's gst-launch description from the tee named @tee: "TEE. ! queue name=NAME-intake
 * ... ! fakesink name=NAME". @events: a branch for gst_cv_event_snapshot_attach(), whose
 * pictures show whom each frame's counting events happened to (boxoverlay highlight-events). */
std::string gst_cv_snapshot_branch(const std::string &tee, const std::string &name,
                                   bool events = false);

/* Paces the branch @name of @bin (built from gst_cv_snapshot_branch()): a frame each
 * @interval_s goes on, while @wanted says so (always without it); @picture gets each JPEG on the
 * branch's streaming thread. False when @bin has no such branch. A picture costs the GPU's
 * streams more than its share of the CPU: its frame's download waits on the device (measured
 * in docs/service.md), hence none while nobody looks. */
bool gst_cv_snapshot_attach(GstElement *bin, const std::string &name, double interval_s,
                            std::function<void(GstBuffer *jpeg)> picture,
                            std::function<bool()> wanted = nullptr);

/* Lets through the branch @name of @bin (gst_cv_snapshot_branch(..., true)) exactly the frames
 * with counting events (boxcount's #GstCudaNmsCountsMeta), each a picture for @picture, its PTS
 * the frame's. A few event frames wait while one is drawn and encoded; past them the oldest is
 * dropped (a burst of events the CPU cannot picture all). */
bool gst_cv_event_snapshot_attach(GstElement *bin, const std::string &name,
                                  std::function<void(GstBuffer *jpeg)> picture);
