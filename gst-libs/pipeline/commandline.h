/* A GStreamer application's command line: its own options and GStreamer's (--gst-debug, ...). */
#pragma once

#include <gst/gst.h>

#include <string>

/* Parses argc/argv against `entries` and GStreamer's option group (the parsed arguments taken
 * out), then frees `context`: false with the reason in *error. */
bool gst_cv_parse_command_line(GOptionContext *context, const GOptionEntry *entries, int *argc,
                               char ***argv, std::string *error);
