// A self-signed certificate for 127.0.0.1 and its private key, made by Debian's openssl for a
// test's own HTTPS endpoints.
#pragma once

#include <glib.h>

#include <string>
#include <vector>

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

// A site's certificates in `dir`: a CA, and a certificate it signed for 127.0.0.1 with its key,
// good for a server and as a client (etcd asks its clients for one: --client-cert-auth).
struct SiteCertificates {
  std::string ca, certificate, key;
};

inline bool run_openssl(const std::vector<std::string> &args) {
  std::vector<const gchar *> argv = {"openssl"};
  for (const std::string &a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  gint status = 0;
  gchar *err = nullptr;
  const bool ran =
      g_spawn_sync(nullptr, const_cast<gchar **>(argv.data()), nullptr,
                   static_cast<GSpawnFlags>(G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL),
                   nullptr, nullptr, nullptr, &err, &status, nullptr);
  const bool done = ran && g_spawn_check_wait_status(status, nullptr);
  if (!done) g_printerr("openssl %s: %s\n", args[0].c_str(), err ? err : "did not run");
  g_free(err);
  return done;
}

inline bool make_site_certificates(const std::string &dir, SiteCertificates *out) {
  out->ca = dir + "/ca.pem";
  out->certificate = dir + "/host.pem";
  out->key = dir + "/host-key.pem";
  const std::string ca_key = dir + "/ca-key.pem", request = dir + "/host.csr",
                    extensions = dir + "/host.ext";
  const std::string ext = "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n";
  return g_file_set_contents(extensions.c_str(), ext.c_str(), -1, nullptr) &&
         run_openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                      "-nodes", "-days", "1", "-subj", "/CN=cudanms test site CA", "-keyout",
                      ca_key, "-out", out->ca}) &&
         run_openssl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                      "-subj", "/CN=127.0.0.1", "-keyout", out->key, "-out", request}) &&
         run_openssl({"x509", "-req", "-in", request, "-CA", out->ca, "-CAkey", ca_key,
                      "-CAcreateserial", "-days", "1", "-extfile", extensions, "-out",
                      out->certificate});
}

}  // namespace cudanms::testing
