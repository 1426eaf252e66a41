// Runs the built cudanms-tool (CUDANMS_TOOL) in a child process, as a user would: its exit
// status, stdout and stderr.
#pragma once

#include <glib.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "support/file_size_limit.h"

namespace cudanms::testing {

struct Outcome {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs a program (its path, then its arguments); with `stdout_to`, its stdout goes to that file
// (through sh), not to the test; with `file_size_limit`, no file it writes may grow past that
// many bytes.
inline Outcome run_program(const std::vector<std::string> &command,
                           const char *stdout_to = nullptr, rlim_t file_size_limit = 0) {
  std::vector<char *> argv;
  if (stdout_to) {
    for (const char *word : {"/bin/sh", "-c", "exec \"$0\" \"$@\" >\"$CUDANMS_STDOUT\""})
      argv.push_back(const_cast<char *>(word));
    g_setenv("CUDANMS_STDOUT", stdout_to, TRUE);
  }
  for (const std::string &arg : command) argv.push_back(const_cast<char *>(arg.c_str()));
  argv.push_back(nullptr);
  g_autofree char *out = nullptr;
  g_autofree char *err = nullptr;
  int wait_status = 0;
  GError *error = nullptr;
  Outcome outcome;
  if (!g_spawn_sync(nullptr, argv.data(), nullptr, G_SPAWN_DEFAULT,
                    file_size_limit ? limit_file_size : nullptr, &file_size_limit, &out, &err,
                    &wait_status, &error)) {
    ADD_FAILURE() << "cannot run " << argv[0] << ": " << error->message;
    g_error_free(error);
    return outcome;
  }
  outcome.exit_code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
  outcome.out = out;
  outcome.err = err;
  return outcome;
}

// Runs the tool (CUDANMS_TOOL) with `args`, as run_program.
inline Outcome run_tool(const std::vector<std::string> &args, const char *stdout_to = nullptr,
                        rlim_t file_size_limit = 0) {
  const char *tool = std::getenv("CUDANMS_TOOL");
  std::vector<std::string> command = {tool ? tool : ""};
  command.insert(command.end(), args.begin(), args.end());
  return run_program(command, stdout_to, file_size_limit);
}

}  // namespace cudanms::testing
