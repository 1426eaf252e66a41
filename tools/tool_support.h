// What every cudanms-tool subcommand shares: exit statuses, messages, GOption parsing and
// writing its output whole.
#pragma once

#include <glib.h>

#include <string>
#include <vector>

#include "cudanms/nms.h"

namespace cudanms::tools {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;   // the input was fine, but running or writing failed
constexpr int kExitBadInput = 2;  // bad usage or a bad input file: nothing was written

constexpr char kProgram[] = "cudanms-tool";

constexpr char kExitStatusHelp[] =
    "Exit status: 0 done; 1 the backend or writing the output failed; 2 bad usage or a bad\n"
    "input file, reported on stderr as FILE:LINE: what is wrong, with nothing written.";

// "cudanms-tool SUBCOMMAND: message" on stderr.
void report(const char *subcommand, const std::string &message);

// Parses argv against entries; false after reporting a usage error. --help exits here.
bool parse_options(const char *subcommand, const char *required_options, const char *summary,
                   const char *description, const GOptionEntry *entries, int argc, char **argv);

// The whole text in one go: to a file only once everything before it has succeeded, and a file
// that could not be completed is removed rather than left half written. "" is stdout.
Status write_text(const std::string &path, const std::string &text);

// "300,1000,3000" into sizes of 1 to kMaxCount; false for anything else (a trailing comma, 0). The
// empty string is the empty list.
bool parse_sizes(const char *text, std::vector<size_t> *sizes);

}  // namespace cudanms::tools
