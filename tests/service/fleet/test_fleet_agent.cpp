// A fleet host's agent without etcd: where it tells the others its endpoint is (advertised_url).
#include <gio/gio.h>
#include <gtest/gtest.h>

#include "fleet_agent.h"

namespace cudanms::service {
namespace {

// A host listening on every network would be dialled by the others at 0.0.0.0, i.e. themselves:
// it gives its machine's name instead; an address the others can dial stays; advertise-url wins.
TEST(AdvertisedUrl, AnyAddressIsTheMachinesNameAndAdvertiseUrlWins) {
  const std::string host = g_get_host_name();
  EXPECT_EQ(advertised_url("", "http://0.0.0.0:9358"), "http://" + host + ":9358");
  EXPECT_EQ(advertised_url("", "https://[::]:443"), "https://" + host + ":443");
  EXPECT_EQ(advertised_url("", "http://127.0.0.1:41234"), "http://127.0.0.1:41234");
  EXPECT_EQ(advertised_url("", "https://10.0.0.7:9358"), "https://10.0.0.7:9358");
  EXPECT_EQ(advertised_url("https://gate.site.lan:8443", "http://0.0.0.0:9358"),
            "https://gate.site.lan:8443");
  EXPECT_EQ(advertised_url("", ""), "");  // no endpoint: none to tell
}

}  // namespace
}  // namespace cudanms::service
