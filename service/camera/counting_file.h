// A camera's counts kept in a file while it runs in a worker (supervisor.h), so that a worker
// that dies does not take them along: its restart, or another worker the camera moves to, goes on
// from the file. The crossings and the lines' counts are saved at each change, before the frame's
// JSON line is written; the tracker's ids are saved kReservedIds ahead (an id block), so that ids
// given out after the last save are never given again, at the cost of a gap.
#pragma once

#include <map>
#include <string>

#include "outputs.h"

namespace cudanms::service {

constexpr guint64 kReservedIds = 100;

// `state` as JSON (all but the zones' occupancy, which starts again, and, without
// `undelivered`, the events not yet delivered), with the camera's lines as their shapes
// (CameraConfig::line_shapes): what the counts file and a fleet's state key hold.
std::string counting_json(const CountingState &state,
                          const std::map<std::string, std::string> &line_shapes,
                          bool undelivered = true);
// Reads counting_json's text; false when it is not such a document.
bool parse_counting(const std::string &text, CountingState *state,
                    std::map<std::string, std::string> *line_shapes);

// Writes counting_json to `path`, atomically; false with the reason.
bool save_counting(const std::string &path, const CountingState &state,
                   const std::map<std::string, std::string> &line_shapes, std::string *error);
// Reads what save_counting wrote; false when there is no such file or it is not one.
bool load_counting(const std::string &path, CountingState *state,
                   std::map<std::string, std::string> *line_shapes);

}  // namespace cudanms::service
