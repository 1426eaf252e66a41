// The host's HTTP endpoint over HTTPS, against clients of the test's own on 127.0.0.1: a client
// that trusts its certificate reads it, one that does not is refused, plain HTTP gets no answer;
// a certificate that cannot be used is the reason listen() fails.
#include <glib/gstdio.h>
#include <gtest/gtest.h>
#include <libsoup/soup.h>

#include <atomic>
#include <string>
#include <thread>

#include "metrics.h"
#include "pipelines/script_support.h"
#include "support/certificate.h"

namespace cudanms::service {
namespace {

using cudanms::testing::make_certificate;
using cudanms::testing::TempDir;

// Answers every GET with "fine".
struct FineOwner : MetricsServer::Owner {
  void serve(const std::string &, MetricsServer::Respond respond) override {
    respond({200, "text/plain", "fine"});
  }
  void change(const std::string &, const std::string &, const std::string &,
              MetricsServer::Respond respond) override {
    respond({405, "text/plain", ""});
  }
};

// GET `url` from a thread of its own while this one runs the server's main context: the status
// (0: no answer) and the body, or the error in *error.
guint get(const std::string &url, GTlsDatabase *trusted, std::string *body, std::string *error,
          const char *range = nullptr, std::string *content_range = nullptr) {
  std::atomic<bool> done{false};
  guint status = 0;
  std::thread client([&] {
    GMainContext *own = g_main_context_new();
    g_main_context_push_thread_default(own);
    SoupSession *session = soup_session_new_with_options("timeout", 5, nullptr);
    if (trusted) soup_session_set_tls_database(session, trusted);
    SoupMessage *message = soup_message_new("GET", url.c_str());
    if (range)
      soup_message_headers_replace(soup_message_get_request_headers(message), "Range", range);
    GError *why = nullptr;
    GBytes *bytes = soup_session_send_and_read(session, message, nullptr, &why);
    if (bytes) {
      status = soup_message_get_status(message);
      body->assign(static_cast<const char *>(g_bytes_get_data(bytes, nullptr)),
                   g_bytes_get_size(bytes));
      g_bytes_unref(bytes);
      const char *answered =
          soup_message_headers_get_one(soup_message_get_response_headers(message), "Content-Range");
      if (content_range) *content_range = answered ? answered : "";
    } else {
      *error = why->message;
      g_error_free(why);
    }
    g_object_unref(message);
    g_object_unref(session);
    g_main_context_pop_thread_default(own);
    g_main_context_unref(own);
    done = true;
  });
  while (!done) g_main_context_iteration(nullptr, FALSE), g_usleep(1000);
  client.join();
  return status;
}

TEST(MetricsServer, ServesHttpsWithItsCertificate) {
  if (!g_tls_backend_supports_tls(g_tls_backend_get_default()))
    GTEST_SKIP() << "no TLS backend (Debian's glib-networking)";
  TempDir dir;
  const std::string cert = dir.file("cert.pem"), key = dir.file("key.pem");
  if (!make_certificate(cert, key)) GTEST_SKIP() << "no openssl";
  FineOwner owner;
  MetricsServer server(&owner);
  std::string error;
  ASSERT_TRUE(server.listen("127.0.0.1:0", &error, {cert, key})) << error;
  ASSERT_EQ(server.url().rfind("https://127.0.0.1:", 0), 0u) << server.url();

  GError *why = nullptr;
  GTlsDatabase *trusted = g_tls_file_database_new(cert.c_str(), &why);
  ASSERT_NE(trusted, nullptr) << why->message;
  std::string body;
  EXPECT_EQ(get(server.url() + "/metrics", trusted, &body, &error), 200u) << error;
  EXPECT_EQ(body, "fine");
  // A client that does not trust it (the system's certificates only): refused.
  error.clear();
  EXPECT_EQ(get(server.url() + "/metrics", nullptr, &body, &error), 0u);
  EXPECT_FALSE(error.empty());
  // Plain HTTP to the HTTPS port: no answer.
  error.clear();
  const std::string plain = "http://" + server.url().substr(std::string("https://").size());
  EXPECT_NE(get(plain + "/metrics", nullptr, &body, &error), 200u);
  g_object_unref(trusted);

  // A key that is not the certificate's: listen() fails, saying so, without the key's content.
  MetricsServer wrong(&owner);
  EXPECT_FALSE(wrong.listen("127.0.0.1:0", &error, {cert, cert}));
  EXPECT_NE(error.find("cannot serve HTTPS with " + cert), std::string::npos) << error;
  EXPECT_EQ(wrong.url(), "");
}

TEST(MetricsServer, PlainHttpWithoutACertificate) {
  FineOwner owner;
  MetricsServer server(&owner);
  std::string error, body;
  ASSERT_TRUE(server.listen("127.0.0.1:0", &error)) << error;
  ASSERT_EQ(server.url().rfind("http://127.0.0.1:", 0), 0u) << server.url();
  EXPECT_EQ(get(server.url() + "/health", nullptr, &body, &error), 200u) << error;
}

// Answers every GET with the file `path` (an event's clip, as events_api answers).
struct FileOwner : MetricsServer::Owner {
  std::string path;
  void serve(const std::string &, MetricsServer::Respond respond) override {
    respond({200, "video/mp4", "", path});
  }
  void change(const std::string &, const std::string &, const std::string &,
              MetricsServer::Respond respond) override {
    respond({405, "text/plain", ""});
  }
};

// A file's reply: whole without a Range, the part one Range asks for (read alone), 416 past its
// end, several ranges answered too, 404 once the file is gone.
TEST(MetricsServer, AFileIsAnsweredWholeOrByItsRange) {
  TempDir dir;
  FileOwner owner;
  owner.path = dir.file("clip.mp4");
  ASSERT_TRUE(g_file_set_contents(owner.path.c_str(), "0123456789", -1, nullptr));
  MetricsServer server(&owner);
  std::string error, body, range;
  ASSERT_TRUE(server.listen("127.0.0.1:0", &error)) << error;
  const std::string url = server.url() + "/api/events/1/clip";
  EXPECT_EQ(get(url, nullptr, &body, &error), 200u) << error;
  EXPECT_EQ(body, "0123456789");
  EXPECT_EQ(get(url, nullptr, &body, &error, "bytes=2-5", &range), 206u) << error;
  EXPECT_EQ(body, "2345");
  EXPECT_EQ(range, "bytes 2-5/10");
  EXPECT_EQ(get(url, nullptr, &body, &error, "bytes=7-", &range), 206u) << error;
  EXPECT_EQ(body, "789");
  EXPECT_EQ(get(url, nullptr, &body, &error, "bytes=20-30", &range), 416u) << error;
  EXPECT_EQ(range, "bytes */10");
  EXPECT_EQ(get(url, nullptr, &body, &error, "bytes=0-1,4-5"), 206u) << error;
  EXPECT_NE(body.find("01"), std::string::npos) << body;
  EXPECT_NE(body.find("45"), std::string::npos) << body;
  g_remove(owner.path.c_str());
  EXPECT_EQ(get(url, nullptr, &body, &error), 404u) << error;
}

}  // namespace
}  // namespace cudanms::service
