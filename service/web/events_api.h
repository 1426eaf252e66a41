// GET /api/events: a page of the host's events' history (event_history.h), newest first.
//   ?camera=NAME&kind=line-crossed&label=person&since=TIME&until=TIME&limit=N&before=SEQ
// TIME: ISO 8601 with its zone (2026-12-06T03:00:00Z) or seconds since 1970; limit 1 to 1000
// (default 100); before: the "seq" of the last event of the page before (the answer's
// "next_before"). A parameter that is not one of these, or not of its form: 400 with the reason;
// a camera neither configured nor in the history: 404; a host without a history: 404.
// GET /api/events/hourly?camera=NAME&since=TIME&until=TIME: each line's crossings per hour (UTC),
// {"hours": [{"hour", "camera", "line", "in", "out"}]}, oldest first (the page's chart).
// GET /api/events/SEQ/snapshot: the event's picture (JPEG; each event's "snapshot" gives this
// URL, null where it has none); 404 with the reason where it has none or its file is gone.
// GET /api/events/SEQ/clip: the event's clip (MP4, Range requests answered: a browser seeks);
// 503 while it is still being recorded, 404 with the reason where it has none or it is gone.
#pragma once

#include <functional>
#include <string>

#include "event_history.h"
#include "metrics.h"

namespace cudanms::service {

// `path`: /api/events with its query as MetricsServer gives it; `known_camera`: whether the host
// has a camera of that name.
Reply events_reply(EventHistory *history, const std::string &path,
                   const std::function<bool(const std::string &)> &known_camera);
// Whether `path` asks for /api/events.
bool is_events_path(const std::string &path);
// The host on whose disk is the picture or clip `path` asks for (/api/events/SEQ/snapshot,
// /api/events/SEQ/clip) when it is another than `here` (a fleet's shared history); "" otherwise.
std::string event_file_elsewhere(EventHistory *history, const std::string &path,
                                 const std::string &here);

}  // namespace cudanms::service
