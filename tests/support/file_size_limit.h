// For tests of write errors on any machine: a child process whose files may not grow past a
// limit fails the write that would, with EFBIG ("File too large"), as a full disk fails it with
// ENOSPC. Pass as the child setup of g_spawn_* or GSubprocessLauncher, with a pointer to the
// limit in bytes.
#pragma once

#include <glib.h>
#include <sys/resource.h>

#include <csignal>

namespace cudanms::testing {

inline void limit_file_size(gpointer limit_bytes) {
  const rlim_t limit = *static_cast<rlim_t *>(limit_bytes);
  const struct rlimit r = {limit, limit};
  setrlimit(RLIMIT_FSIZE, &r);
  std::signal(SIGXFSZ, SIG_IGN);  // the failed write, not the signal, is what is tested
}

}  // namespace cudanms::testing
