/* cudanms-rtsp-server: serves a video file (or any URI) as H.264 over RTSP, so that the camera
 * pipeline can be tried without a camera. Prints the stream's URL on stdout when it is ready;
 * with --port 0 the system picks a free port. Runs until interrupted. --size scales the frames
 * (a camera that comes back at another resolution); --count-file keeps the number of frames
 * served so far in a file, exact even after SIGKILL (what the chaos soak compares with);
 * --loop sends an H.264 file's own frames over and over, without decoding or encoding them: a
 * camera that never ends, many of them for the price of none. --cameras N serves N such cameras
 * at MOUNT1 ... MOUNTN; --clients-file keeps how many clients play each mount now and the most
 * that ever did at once (a fleet's test: a camera is never run by two hosts). */
#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <gst/app/gstappsink.h>
#include <gst/gst.h>
#include <gst/rtsp-server/rtsp-server.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static gint count_fd = -1;
static guint64 frames_served = 0;

/* --clients-file: for each mount, the clients whose media is prepared now and the most ever. */
static gchar *clients_file = NULL;
static GHashTable *clients_now = NULL, *clients_most = NULL; /* mount -> count */
static GMutex clients_lock;

static void write_clients(void) {
  GString *text = g_string_new("");
  GList *mounts = g_hash_table_get_keys(clients_most);
  mounts = g_list_sort(mounts, (GCompareFunc)g_strcmp0);
  for (GList *m = mounts; m; m = m->next)
    g_string_append_printf(text, "%s %d %d\n", (const gchar *)m->data,
                           GPOINTER_TO_INT(g_hash_table_lookup(clients_now, m->data)),
                           GPOINTER_TO_INT(g_hash_table_lookup(clients_most, m->data)));
  g_list_free(mounts);
  if (!g_file_set_contents(clients_file, text->str, (gssize)text->len, NULL))
    g_printerr("cudanms-rtsp-server: cannot write %s\n", clients_file);
  g_string_free(text, TRUE);
}

static void count_client(const gchar *mount, gint change) {
  g_mutex_lock(&clients_lock);
  const gint now = GPOINTER_TO_INT(g_hash_table_lookup(clients_now, mount)) + change;
  g_hash_table_insert(clients_now, g_strdup(mount), GINT_TO_POINTER(now));
  if (now > GPOINTER_TO_INT(g_hash_table_lookup(clients_most, mount)) ||
      !g_hash_table_contains(clients_most, mount))
    g_hash_table_insert(clients_most, g_strdup(mount), GINT_TO_POINTER(now));
  write_clients();
  g_mutex_unlock(&clients_lock);
}

static void on_media_unprepared(GstRTSPMedia *media, gpointer mount) {
  if (g_object_get_data(G_OBJECT(media), "cudanms-counted")) {
    g_object_set_data(G_OBJECT(media), "cudanms-counted", NULL);
    count_client(mount, -1);
  }
}

/* Each client's media (the factories are not shared): one client of the mount until it is
 * unprepared, which a TEARDOWN or a closed connection does. */
static void on_client_media(GstRTSPMediaFactory *factory, GstRTSPMedia *media, gpointer mount) {
  (void)factory;
  g_object_set_data(G_OBJECT(media), "cudanms-counted", GINT_TO_POINTER(1));
  count_client(mount, +1);
  g_signal_connect(media, "unprepared", G_CALLBACK(on_media_unprepared), mount);
}

/* On each client's streaming thread: one encoded frame into the payloader. */
static GstPadProbeReturn count_frame(GstPad *pad, GstPadProbeInfo *info, gpointer data) {
  (void)pad;
  (void)info;
  (void)data;
  static GMutex lock;
  g_mutex_lock(&lock);
  char text[24];
  const int n = g_snprintf(text, sizeof text, "%20" G_GUINT64_FORMAT "\n", ++frames_served);
  if (pwrite(count_fd, text, (size_t)n, 0) != n)
    g_printerr("cudanms-rtsp-server: cannot write the frame count\n");
  g_mutex_unlock(&lock);
  return GST_PAD_PROBE_OK;
}

static void on_media_configure(GstRTSPMediaFactory *factory, GstRTSPMedia *media, gpointer data) {
  (void)factory;
  (void)data;
  GstElement *bin = gst_rtsp_media_get_element(media);
  GstElement *pay = gst_bin_get_by_name(GST_BIN(bin), "pay0");
  GstPad *sink = gst_element_get_static_pad(pay, "sink");
  gst_pad_add_probe(sink, GST_PAD_PROBE_TYPE_BUFFER, count_frame, NULL, NULL);
  gst_object_unref(sink);
  gst_object_unref(pay);
  gst_object_unref(bin);
}

/* --loop: the file's H.264 access units, read once with their times from the first one's, and
 * the frame duration. Meant for clips without B-frames, as cameras send. */
static GPtrArray *clip_units = NULL;
static GstCaps *clip_caps = NULL;
static GstClockTime clip_frame = GST_SECOND / 25;

static gboolean load_clip(const gchar *uri) {
  gchar *desc = g_strdup_printf(
      "urisourcebin uri=\"%s\" ! parsebin ! h264parse ! "
      "video/x-h264,stream-format=byte-stream,alignment=au ! appsink name=units sync=false",
      uri);
  GstElement *pipeline = gst_parse_launch(desc, NULL);
  g_free(desc);
  if (!pipeline) return FALSE;
  GstElement *sink = gst_bin_get_by_name(GST_BIN(pipeline), "units");
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  clip_units = g_ptr_array_new_with_free_func((GDestroyNotify)gst_buffer_unref);
  GstClockTime first = GST_CLOCK_TIME_NONE;
  GstSample *sample;
  while ((sample = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), 10 * GST_SECOND))) {
    GstBuffer *unit = gst_sample_get_buffer(sample);
    /* The loop starts on a keyframe: what comes before the first one is dropped. */
    if (clip_units->len > 0 || !GST_BUFFER_FLAG_IS_SET(unit, GST_BUFFER_FLAG_DELTA_UNIT)) {
      GstBuffer *copy = gst_buffer_copy_deep(unit);
      const GstClockTime dts = GST_BUFFER_DTS_OR_PTS(unit);
      if (clip_units->len == 0) first = dts;
      /* Times from the first unit's; without them, one frame after another. */
      GST_BUFFER_DTS(copy) = GST_CLOCK_TIME_IS_VALID(dts) && GST_CLOCK_TIME_IS_VALID(first)
                                 ? dts - first
                                 : GST_CLOCK_TIME_NONE;
      GST_BUFFER_PTS(copy) = GST_BUFFER_PTS_IS_VALID(unit) && GST_CLOCK_TIME_IS_VALID(first) &&
                                     GST_BUFFER_PTS(unit) >= first
                                 ? GST_BUFFER_PTS(unit) - first
                                 : GST_BUFFER_DTS(copy);
      g_ptr_array_add(clip_units, copy);
    }
    if (!clip_caps) {
      clip_caps = gst_caps_copy(gst_sample_get_caps(sample));
      gint num = 0, den = 1;
      GstStructure *s = gst_caps_get_structure(clip_caps, 0);
      if (gst_structure_get_fraction(s, "framerate", &num, &den) && num > 0 && den > 0)
        clip_frame = gst_util_uint64_scale(GST_SECOND, den, num);
    }
    gst_sample_unref(sample);
  }
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(sink);
  gst_object_unref(pipeline);
  return clip_units->len > 0;
}

typedef struct {
  guint64 next;
} ClipClient;

/* A client's appsrc asks for more: the next frame of the loop, timed at the clip's rate. */
static void on_need_unit(GstElement *src, guint length, gpointer data) {
  (void)length;
  ClipClient *client = data;
  const guint index = client->next % clip_units->len;
  GstBuffer *unit = gst_buffer_copy(g_ptr_array_index(clip_units, index));
  /* Each pass of the loop one clip later; units without times one frame after another. */
  const GstClockTime pass = (client->next / clip_units->len) * clip_units->len * clip_frame;
  if (GST_BUFFER_DTS_IS_VALID(unit)) {
    GST_BUFFER_DTS(unit) += pass;
    GST_BUFFER_PTS(unit) += pass;
  } else {
    GST_BUFFER_PTS(unit) = GST_BUFFER_DTS(unit) = client->next * clip_frame;
  }
  GST_BUFFER_DURATION(unit) = clip_frame;
  client->next++;
  GstFlowReturn flow;
  g_signal_emit_by_name(src, "push-buffer", unit, &flow);
  gst_buffer_unref(unit);
}

static void on_clip_media_configure(GstRTSPMediaFactory *factory, GstRTSPMedia *media,
                                    gpointer data) {
  (void)factory;
  (void)data;
  GstElement *bin = gst_rtsp_media_get_element(media);
  GstElement *src = gst_bin_get_by_name(GST_BIN(bin), "src");
  ClipClient *client = g_new0(ClipClient, 1);
  g_object_set_data_full(G_OBJECT(media), "cudanms-clip-client", client, g_free);
  g_object_set(src, "caps", clip_caps, "format", GST_FORMAT_TIME, NULL);
  g_signal_connect(src, "need-data", G_CALLBACK(on_need_unit), client);
  gst_object_unref(src);
  gst_object_unref(bin);
}

static gboolean on_signal(gpointer loop) {
  g_main_loop_quit((GMainLoop *)loop);
  return G_SOURCE_REMOVE;
}

int main(int argc, char **argv) {
  gint port = 8554;
  gchar *mount = NULL;
  gchar *address = NULL;
  gint bitrate = 2000;
  gchar *size = NULL;
  gchar *count_file = NULL;
  gboolean loop_clip = FALSE;
  gint cameras = 0;
  GOptionEntry entries[] = {
      {"port", 'p', 0, G_OPTION_ARG_INT, &port, "TCP port (0: any free port; default 8554)",
       "PORT"},
      {"address", 'a', 0, G_OPTION_ARG_STRING, &address, "Address to listen on (default 0.0.0.0)",
       "ADDR"},
      {"mount", 'm', 0, G_OPTION_ARG_STRING, &mount, "Mount point (default /stream)", "PATH"},
      {"bitrate", 'b', 0, G_OPTION_ARG_INT, &bitrate, "H.264 bitrate in kbit/s (default 2000)",
       "KBPS"},
      {"size", 's', 0, G_OPTION_ARG_STRING, &size, "Scale the frames to this size", "WxH"},
      {"count-file", 0, 0, G_OPTION_ARG_FILENAME, &count_file,
       "Keep the number of frames served so far (all clients) in this file", "FILE"},
      {"loop", 0, 0, G_OPTION_ARG_NONE, &loop_clip,
       "Send the H.264 file's own frames in a loop (no decoding, no encoding; not with --size)",
       NULL},
      {"cameras", 0, 0, G_OPTION_ARG_INT, &cameras,
       "Serve N cameras, at the mount point with 1 to N after it (default: one, at the mount)",
       "N"},
      {"clients-file", 0, 0, G_OPTION_ARG_FILENAME, &clients_file,
       "Keep in this file each mount's clients now and the most at once: MOUNT NOW MOST a line",
       "FILE"},
      {NULL, 0, 0, G_OPTION_ARG_NONE, NULL, NULL, NULL}};
  GOptionContext *context = g_option_context_new("FILE-OR-URI");
  g_option_context_set_summary(context,
                               "Serves a video file over RTSP (H.264, one fresh stream from the "
                               "start of the file for each client) and prints its URL.");
  g_option_context_add_main_entries(context, entries, NULL);
  g_option_context_add_group(context, gst_init_get_option_group());
  GError *error = NULL;
  if (!g_option_context_parse(context, &argc, &argv, &error) || argc != 2 || port < 0 ||
      port > 65535 || cameras < 0 || cameras > 1000) {
    g_printerr("cudanms-rtsp-server: %s\nusage: cudanms-rtsp-server [--port N] FILE-OR-URI\n",
               error ? error->message : "one file or URI is needed");
    return 2;
  }
  g_option_context_free(context);
  gint width = 0, height = 0;
  if (size && loop_clip) {
    g_printerr("cudanms-rtsp-server: --loop sends the file's frames as they are: no --size\n");
    return 2;
  }
  if (size && (sscanf(size, "%dx%d", &width, &height) != 2 || width <= 0 || height <= 0)) {
    g_printerr("cudanms-rtsp-server: --size must be WxH, not %s\n", size);
    return 2;
  }
  if (count_file) {
    count_fd = open(count_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (count_fd < 0) {
      g_printerr("cudanms-rtsp-server: cannot write %s: %s\n", count_file, g_strerror(errno));
      return 2;
    }
  }
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
  gchar *launch = NULL;
  if (loop_clip) {
    if (!load_clip(uri)) {
      g_printerr("cudanms-rtsp-server: no H.264 frames in %s\n", argv[1]);
      return 2;
    }
    launch =
        g_strdup("( appsrc name=src ! h264parse ! rtph264pay name=pay0 pt=96 config-interval=1 )");
    g_signal_connect(factory, "media-configure", G_CALLBACK(on_clip_media_configure), NULL);
  } else {
    gchar *scale =
        size ? g_strdup_printf("videoscale ! video/x-raw,width=%d,height=%d ! ", width, height)
             : g_strdup("");
    launch = g_strdup_printf(
        "( uridecodebin uri=\"%s\" caps=\"video/x-raw(ANY)\" expose-all-streams=false ! "
        "videoconvert ! %s"
        "x264enc tune=zerolatency speed-preset=ultrafast bitrate=%d key-int-max=30 ! "
        "video/x-h264,profile=constrained-baseline ! rtph264pay name=pay0 pt=96 config-interval=1 "
        ")",
        uri, scale, bitrate);
    g_free(scale);
  }
  if (clients_file) {
    clients_now = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    clients_most = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  }
  GstRTSPMountPoints *mounts = gst_rtsp_server_get_mount_points(server);
  for (gint i = 0; i < MAX(cameras, 1); i++) {
    gchar *path = cameras ? g_strdup_printf("%s%d", mount, i + 1) : g_strdup(mount);
    if (i > 0) {
      factory = gst_rtsp_media_factory_new();
      if (loop_clip)
        g_signal_connect(factory, "media-configure", G_CALLBACK(on_clip_media_configure), NULL);
    }
    gst_rtsp_media_factory_set_launch(factory, launch);
    gst_rtsp_media_factory_set_shared(factory, FALSE);
    if (count_fd >= 0)
      g_signal_connect(factory, "media-configure", G_CALLBACK(on_media_configure), NULL);
    if (clients_file) {
      g_mutex_lock(&clients_lock);
      g_hash_table_insert(clients_now, g_strdup(path), GINT_TO_POINTER(0));
      g_hash_table_insert(clients_most, g_strdup(path), GINT_TO_POINTER(0));
      write_clients();
      g_mutex_unlock(&clients_lock);
      /* The mount's name lives as long as the server. */
      g_signal_connect(factory, "media-configure", G_CALLBACK(on_client_media),
                       (gpointer)g_intern_string(path));
    }
    gst_rtsp_mount_points_add_factory(mounts, path, factory);
    g_free(path);
  }
  g_object_unref(mounts);

  if (gst_rtsp_server_attach(server, NULL) == 0) {
    g_printerr("cudanms-rtsp-server: could not listen on %s:%d\n", address, port);
    return 1;
  }
  const int bound = gst_rtsp_server_get_bound_port(server);
  const gchar *host = g_str_equal(address, "0.0.0.0") ? "127.0.0.1" : address;
  printf("rtsp://%s:%d%s%s\n", host, bound, mount, cameras ? "1" : "");
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
  g_free(size);
  g_free(count_file);
  if (count_fd >= 0) close(count_fd);
  if (clip_units) g_ptr_array_unref(clip_units);
  if (clip_caps) gst_caps_unref(clip_caps);
  return 0;
}
