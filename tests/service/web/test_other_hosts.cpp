// A fleet host's questions to the other hosts for its page, against HTTP servers of the test's
// own on 127.0.0.1: one round a second, whatever the number of pages asking.
#include <gtest/gtest.h>
#include <libsoup/soup.h>

#include <map>
#include <string>
#include <vector>

#include "other_hosts.h"

using cudanms::service::HostCameras;
using cudanms::service::OtherHostsCameras;

namespace {

// A host's endpoint: counts its /api/host/cameras requests; `answers` false: 500.
struct FakeHost {
  SoupServer *server = soup_server_new(nullptr, nullptr);
  int asked = 0;
  bool answers = true;
  std::string url;
  explicit FakeHost(const std::string &body) : body_(body) {
    soup_server_add_handler(
        server, "/api/host/cameras",
        [](SoupServer *, SoupServerMessage *message, const char *, GHashTable *, gpointer data) {
          auto *self = static_cast<FakeHost *>(data);
          self->asked++;
          if (!self->answers) {
            soup_server_message_set_status(message, 500, nullptr);
            return;
          }
          soup_server_message_set_status(message, 200, nullptr);
          soup_server_message_set_response(message, "application/json", SOUP_MEMORY_COPY,
                                           self->body_.data(), self->body_.size());
        },
        this, nullptr);
    GError *error = nullptr;
    EXPECT_TRUE(soup_server_listen_local(server, 0, SOUP_SERVER_LISTEN_IPV4_ONLY, &error));
    GSList *uris = soup_server_get_uris(server);
    gchar *text = g_uri_to_string(static_cast<GUri *>(uris->data));
    url = text;
    if (!url.empty() && url.back() == '/') url.pop_back();
    g_free(text);
    g_slist_free_full(uris, reinterpret_cast<GDestroyNotify>(g_uri_unref));
  }
  ~FakeHost() { g_object_unref(server); }

 private:
  std::string body_;
};

// Spins the main loop until `done` or 5 s.
template <typename Done>
void spin_until(Done done) {
  const gint64 until = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
  while (!done() && g_get_monotonic_time() < until) g_main_context_iteration(nullptr, FALSE);
}

}  // namespace

TEST(OtherHostsCameras, OneRoundServesEveryPageAskingWithinASecond) {
  FakeHost a("{\"a\":1}"), b("{\"b\":2}");
  const std::map<std::string, std::string> hosts = {{"host-a", a.url}, {"host-b", b.url}};
  SoupSession *session = soup_session_new_with_options("timeout", 2, nullptr);
  OtherHostsCameras others(300 * 1000);  // kept 0.3 s here
  std::vector<std::vector<HostCameras>> got;
  auto keep = [&](const std::vector<HostCameras> &answers) { got.push_back(answers); };
  for (int page = 0; page < 3; page++) others.get(session, hosts, keep);  // three pages at once
  spin_until([&] { return got.size() == 3; });
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(a.asked, 1);
  EXPECT_EQ(b.asked, 1);
  EXPECT_TRUE(others.gone().empty());
  for (const auto &answers : got) {
    ASSERT_EQ(answers.size(), 2u);
    std::map<std::string, std::string> by_url;
    for (const HostCameras &h : answers) by_url[h.url] = h.body;
    EXPECT_EQ(by_url[a.url], "{\"a\":1}");
    EXPECT_EQ(by_url[b.url], "{\"b\":2}");
  }

  others.get(session, hosts, keep);  // within the 0.3 s: the same answers, at once
  EXPECT_EQ(got.size(), 4u);
  EXPECT_EQ(a.asked, 1);

  g_usleep(350 * 1000);  // older than that: asked again; a host that fails is left out
  b.answers = false;
  others.get(session, hosts, keep);
  spin_until([&] { return got.size() == 5; });
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(a.asked, 2);
  EXPECT_EQ(b.asked, 2);
  ASSERT_EQ(got.back().size(), 1u);
  EXPECT_EQ(got.back()[0].url, a.url);
  // Its last answer kept: its cameras' last events stay on the page.
  ASSERT_EQ(others.gone().size(), 1u);
  EXPECT_EQ(others.gone()[0].url, b.url);
  EXPECT_EQ(others.gone()[0].body, "{\"b\":2}");
  g_object_unref(session);
}

TEST(OtherHostsCameras, NoOtherHostAnswersAtOnceWithNone) {
  SoupSession *session = soup_session_new();
  OtherHostsCameras others;
  bool answered = false;
  others.get(session, {}, [&](const std::vector<HostCameras> &answers) {
    answered = true;
    EXPECT_TRUE(answers.empty());
  });
  EXPECT_TRUE(answered);
  g_object_unref(session);
}

TEST(OtherHostsCameras, ARoundEndingAfterItsOwnerAnswersNobody) {
  FakeHost a("{}");
  SoupSession *session = soup_session_new_with_options("timeout", 2, nullptr);
  bool answered = false;
  {
    OtherHostsCameras others;
    others.get(session, {{"host-a", a.url}},
               [&](const std::vector<HostCameras> &) { answered = true; });
  }
  spin_until([&] { return a.asked == 1; });
  for (int i = 0; i < 100; i++) g_main_context_iteration(nullptr, FALSE);
  EXPECT_EQ(a.asked, 1);
  EXPECT_FALSE(answered);
  g_object_unref(session);
}
