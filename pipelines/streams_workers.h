// cudanms-streams --workers per-gpu: a process per GPU instead of every GPU's streams in one.
// The parent runs this program again once per GPU of --gpus with the same options and
// --worker-of J (the J-th GPU's streams: stream i where i mod G = J, numbered as in one process),
// waits for them, and prints and writes (--json) the summary of them all.
#pragma once

#include <string>
#include <vector>

// Runs the workers; the exit status (the worst of theirs). `argv`: this program's own, unparsed;
// `gpus`: --gpus resolved; `json`: the user's --json or null.
int run_streams_per_gpu(const std::vector<std::string> &argv, const std::vector<unsigned> &gpus,
                        const char *json);
