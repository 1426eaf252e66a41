// A self-signed certificate for 127.0.0.1 and its private key, made by Debian's openssl for a
// test's own HTTPS endpoints.
#pragma once

#include <glib.h>

#include <string>

namespace cudanms::testing {

// CERT and KEY (PEM) at `certificate` and `key`; false (and why on stderr) without openssl.
inline bool make_certificate(const std::string &certificate, const std::string &key) {
  const gchar *argv[] = {"openssl",
                         "req",
                         "-x509",
                         "-newkey",
                         "ec",
                         "-pkeyopt",
                         "ec_paramgen_curve:prime256v1",
                         "-nodes",
                         "-days",
                         "1",
                         "-subj",
                         "/CN=127.0.0.1",
                         "-addext",
                         "subjectAltName=IP:127.0.0.1",
                         "-keyout",
                         key.c_str(),
                         "-out",
                         certificate.c_str(),
                         nullptr};
  gint status = 0;
  gchar *err = nullptr;
  const bool ran =
      g_spawn_sync(nullptr, const_cast<gchar **>(argv), nullptr,
                   static_cast<GSpawnFlags>(G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL),
                   nullptr, nullptr, nullptr, &err, &status, nullptr);
  const bool made = ran && g_spawn_check_wait_status(status, nullptr);
  if (!made) g_printerr("openssl req: %s\n", err ? err : "did not run");
  g_free(err);
  return made;
}

}  // namespace cudanms::testing
