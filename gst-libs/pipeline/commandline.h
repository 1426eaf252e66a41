/* A GStreamer application's command line: its own options and GStreamer's (--gst-debug, ...). */
#pragma once

#include <gst/gst.h>

#include <string>

/* What --help shows besides the options: the parameters after them ("[URL...] - what it does"),
 * a paragraph above the options and one below (either may be null). */
struct CommandLineHelp {
  const char *parameters;
  const char *summary = nullptr;
  const char *description = nullptr;
};

/* Parses argc/argv against `entries` and GStreamer's option group, the parsed arguments taken
 * out: false with the reason in *error. */
bool gst_cv_parse_command_line(const CommandLineHelp &help, const GOptionEntry *entries, int *argc,
                               char ***argv, std::string *error);
