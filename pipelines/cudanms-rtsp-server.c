/* cudanms-rtsp-server: serves a video file (or any URI) as H.264 over RTSP, so that the camera
 * pipeline can be tried without a camera. Prints the stream's URL on stdout when it is ready;
 * with --port 0 the system picks a free port. Runs until interrupted. */
#include <glib-unix.h>
#include <gst/gst.h>
#include <gst/rtsp-server/rtsp-server.h>
#include <signal.h>
#include <stdio.h>

static gboolean on_signal(gpointer loop) {
  g_main_loop_quit((GMainLoop *)loop);
  return G_SOURCE_REMOVE;
}

int main(int argc, char **argv) {
  gint port = 8554;
  gchar *mount = NULL;
  gchar *address = NULL;
  gint bitrate = 2000;
  GOptionEntry entries[] = {
      {"port", 'p', 0, G_OPTION_ARG_INT, &port, "TCP port (0: any free port; default 8554)",
       "PORT"},
      {"address", 'a', 0, G_OPTION_ARG_STRING, &address, "Address to listen on (default 0.0.0.0)",
       "ADDR"},
      {"mount", 'm', 0, G_OPTION_ARG_STRING, &mount, "Mount point (default /stream)", "PATH"},
      {"bitrate", 'b', 0, G_OPTION_ARG_INT, &bitrate, "H.264 bitrate in kbit/s (default 2000)",
       "KBPS"},
      {NULL, 0, 0, G_OPTION_ARG_NONE, NULL, NULL, NULL}};
  GOptionContext *context = g_option_context_new("FILE-OR-URI");
  g_option_context_set_summary(context,
                               "Serves a video file over RTSP (H.264, one fresh stream from the "
                               "start of the file for each client) and prints its URL.");
  g_option_context_add_main_entries(context, entries, NULL);
  g_option_context_add_group(context, gst_init_get_option_group());
  GError *error = NULL;
  if (!g_option_context_parse(context, &argc, &argv, &error) || argc != 2 || port < 0 ||
      port > 65535) {
    g_printerr("cudanms-rtsp-server: %s\nusage: cudanms-rtsp-server [--port N] FILE-OR-URI\n",
               error ? error->message : "one file or URI is needed");
    return 2;
  }
  g_option_context_free(context);
  if (!mount) mount = g_strdup("/stream");
  if (!address) address = g_strdup("0.0.0.0");

  gchar *uri = gst_uri_is_valid(argv[1]) ? g_strdup(argv[1]) : gst_filename_to_uri(argv[1], &error);
  if (!uri) {
    g_printerr("cudanms-rtsp-server: %s: %s\n", argv[1], error->message);
    return 2;
  }
  if (g_str_has_prefix(uri, "file:")) {
    gchar *path = g_filename_from_uri(uri, NULL, NULL);
    const gboolean exists = path && g_file_test(path, G_FILE_TEST_IS_REGULAR);
    g_free(path);
    if (!exists) {
      g_printerr("cudanms-rtsp-server: no such file: %s\n", argv[1]);
      return 2;
    }
  }

  GstRTSPServer *server = gst_rtsp_server_new();
  gchar *service = g_strdup_printf("%d", port);
  gst_rtsp_server_set_service(server, service);
  gst_rtsp_server_set_address(server, address);
  g_free(service);

  GstRTSPMediaFactory *factory = gst_rtsp_media_factory_new();
  gchar *launch = g_strdup_printf(
      "( uridecodebin uri=\"%s\" caps=\"video/x-raw(ANY)\" expose-all-streams=false ! videoconvert "
      "! "
      "x264enc tune=zerolatency speed-preset=ultrafast bitrate=%d key-int-max=30 ! "
      "video/x-h264,profile=constrained-baseline ! rtph264pay name=pay0 pt=96 config-interval=1 )",
      uri, bitrate);
  gst_rtsp_media_factory_set_launch(factory, launch);
  gst_rtsp_media_factory_set_shared(factory, FALSE);
  GstRTSPMountPoints *mounts = gst_rtsp_server_get_mount_points(server);
  gst_rtsp_mount_points_add_factory(mounts, mount, factory);
  g_object_unref(mounts);

  if (gst_rtsp_server_attach(server, NULL) == 0) {
    g_printerr("cudanms-rtsp-server: could not listen on %s:%d\n", address, port);
    return 1;
  }
  const int bound = gst_rtsp_server_get_bound_port(server);
  const gchar *host = g_str_equal(address, "0.0.0.0") ? "127.0.0.1" : address;
  printf("rtsp://%s:%d%s\n", host, bound, mount);
  fflush(stdout);
  g_printerr("cudanms-rtsp-server: serving %s (Ctrl-C to stop)\n", uri);

  GMainLoop *loop = g_main_loop_new(NULL, FALSE);
  g_unix_signal_add(SIGINT, on_signal, loop);
  g_unix_signal_add(SIGTERM, on_signal, loop);
  g_main_loop_run(loop);

  g_main_loop_unref(loop);
  g_object_unref(server);
  g_free(launch);
  g_free(uri);
  g_free(mount);
  g_free(address);
  return 0;
}
