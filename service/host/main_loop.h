// Handing work from the service's other threads (teardown, flushing) to its main loop.
#pragma once

#include <glib.h>

#include <functional>
#include <utility>

namespace cudanms::service {

// Runs `task` on the main loop (the default main context), from any thread.
inline void on_main_loop(std::function<void()> task) {
  g_idle_add_full(
      G_PRIORITY_DEFAULT,
      [](gpointer data) -> gboolean {
        (*static_cast<std::function<void()> *>(data))();
        return G_SOURCE_REMOVE;
      },
      new std::function<void()>(std::move(task)),
      [](gpointer data) { delete static_cast<std::function<void()> *>(data); });
}

}  // namespace cudanms::service
