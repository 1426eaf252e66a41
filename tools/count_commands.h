// cudanms-tool's counting subcommands: count (a MOT tracks file's line crossings, counted by the
// library's Counter as boxcount counts them) and count-eval (those counts scored against the
// ground truth's, count_eval.h). argv[0] is the subcommand's name; each returns the process's exit
// status.
#pragma once

namespace cudanms::tools {

int run_count(int argc, char **argv);
int run_count_eval(int argc, char **argv);

}  // namespace cudanms::tools
