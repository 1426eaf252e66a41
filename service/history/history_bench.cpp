// How many events a second a history takes, sustained: EVENTS events of CAMERAS cameras added as
// fast as the caller can (EventHistory batches them, 512 a transaction), timed until the last
// one is written; then each event delivered again (the fleet's at-least-once: written over).
// Issue 68 asks >= 1 000 events/s on SQLite and on PostgreSQL.
//   cudanms-history-bench WHERE [EVENTS] [CAMERAS]   (WHERE: a file, or postgresql://...)
#include <cstdio>
#include <cstdlib>
#include <string>

#include "event_history.h"

using cudanms::service::EventHistory;
using cudanms::service::HistoryEvent;

namespace {

// The rate of `events` events written, each once more when `again` (ids already there).
double timed(EventHistory &history, long events, int cameras, long first_id, bool *ok) {
  const gint64 start = g_get_monotonic_time();
  for (long i = 0; i < events; i++) {
    HistoryEvent e;
    e.camera = "camera-" + std::to_string(i % cameras);
    e.id = static_cast<guint64>(first_id + i / cameras);
    e.time_us = g_get_real_time();
    e.kind = i % 4 == 0 ? "zone-left" : "line-crossed";
    e.name = "door";
    e.direction = i % 2 ? "in" : "out";
    e.label = "person";
    e.track_id = static_cast<guint64>(i);
    e.host = "bench";
    while (!history.add(e)) g_usleep(1000);  // the queue full: the writer is the bound
  }
  *ok = history.flush(600 * G_USEC_PER_SEC);
  return events / ((g_get_monotonic_time() - start) / 1e6);
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s WHERE [EVENTS] [CAMERAS]\n", argv[0]);
    return 2;
  }
  const long events = argc > 2 ? std::atol(argv[2]) : 100000;
  const int cameras = argc > 3 ? std::atoi(argv[3]) : 32;
  if (events < 1 || cameras < 1) {
    std::fprintf(stderr, "EVENTS and CAMERAS must be at least 1\n");
    return 2;
  }
  std::string error;
  auto history = EventHistory::open(argv[1], &error);
  if (!history) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  const long first_id = g_get_real_time();  // a fresh run's ids, new to the table
  bool fresh_ok = false, again_ok = false;
  const double fresh = timed(*history, events, cameras, first_id, &fresh_ok);
  const double again = timed(*history, events, cameras, first_id, &again_ok);
  const auto stats = history->stats();
  std::printf(
      "%s: %ld events of %d cameras: %.0f events/s new, %.0f events/s delivered again "
      "(written over); %llu written, %llu dropped, %llu batches refused\n",
      cudanms::service::history_name(argv[1]).c_str(), events, cameras, fresh, again,
      static_cast<unsigned long long>(stats.written),
      static_cast<unsigned long long>(stats.dropped),
      static_cast<unsigned long long>(stats.failures));
  return fresh_ok && again_ok && stats.dropped == 0 ? 0 : 1;
}
