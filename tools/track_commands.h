// cudanms-tool's tracking subcommands: track (a MOT detection file through the tracker),
// mot-eval (the MOT benchmark's scores of a tracker's output) and track-bench (the tracker's time
// per frame). argv[0] is the subcommand's name; each returns the process's exit status.
#pragma once

namespace cudanms::tools {

int run_track(int argc, char **argv);
int run_mot_eval(int argc, char **argv);
int run_track_bench(int argc, char **argv);

}  // namespace cudanms::tools
