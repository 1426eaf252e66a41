#include "streams_workers.h"

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include <algorithm>
#include <cstdio>
#include <memory>

namespace {

// One worker's summary (its --json), as cudanms-streams writes it.
struct Summary {
  unsigned gpu = 0;
  double streams = 0, frames = 0, total_fps = 0, second_half_fps = 0, min_fps = 0, max_fps = 0,
         memory_mib = 0;
  double detector_p50_us = 0, nms_p50_us = 0, chain_p50_us = 0;
  bool read = false;
};

Summary read_summary(const std::string &path, unsigned gpu) {
  Summary s;
  s.gpu = gpu;
  JsonParser *parser = json_parser_new();
  if (json_parser_load_from_file(parser, path.c_str(), nullptr)) {
    JsonObject *o = json_node_get_object(json_parser_get_root(parser));
    auto number = [o](const char *name) {
      return json_object_has_member(o, name) ? json_object_get_double_member(o, name) : 0.0;
    };
    s.streams = number("streams");
    s.frames = number("frames");
    s.total_fps = number("total_fps");
    s.second_half_fps = number("second_half_fps");
    s.min_fps = number("min_stream_fps");
    s.max_fps = number("max_stream_fps");
    s.memory_mib = number("gpu_memory_mib");
    s.detector_p50_us = number("detector_p50_us");
    s.nms_p50_us = number("nms_p50_us");
    s.chain_p50_us = number("chain_p50_us");
    s.read = true;
  }
  g_object_unref(parser);
  return s;
}

// Each worker waited for; the highest exit status (a worker killed by a signal: 1).
int wait_for(const std::vector<GSubprocess *> &workers, const std::vector<unsigned> &gpus) {
  int status = 0;
  for (size_t j = 0; j < workers.size(); ++j) {
    GSubprocess *worker = workers[j];
    g_subprocess_wait(worker, nullptr, nullptr);
    const int exit = g_subprocess_get_if_exited(worker) ? g_subprocess_get_exit_status(worker) : 1;
    if (g_subprocess_get_if_signaled(worker))
      g_printerr("GPU %u's worker was killed by signal %d (%s)\n", gpus[j],
                 g_subprocess_get_term_sig(worker), g_strsignal(g_subprocess_get_term_sig(worker)));
    else if (exit != 0)
      g_printerr("GPU %u's worker exited with status %d\n", gpus[j], exit);
    status = std::max(status, exit);
  }
  return status;
}

// The workers' summaries added up: their streams run side by side over the same time.
Summary add_up(const std::vector<Summary> &per_gpu) {
  Summary all;
  all.min_fps = per_gpu.empty() ? 0 : 1e300;
  for (const Summary &s : per_gpu) {
    all.streams += s.streams;
    all.frames += s.frames;
    all.total_fps += s.total_fps;
    all.second_half_fps += s.second_half_fps;
    all.min_fps = std::min(all.min_fps, s.min_fps);
    all.max_fps = std::max(all.max_fps, s.max_fps);
    all.memory_mib += s.memory_mib;
  }
  return all;
}

void print_summary(const Summary &all, const std::vector<Summary> &per_gpu) {
  g_print("workers: a process per GPU, %zu GPUs\n", per_gpu.size());
  g_print("streams %.0f  frames %.0f  total %.1f fps  per stream %.1f..%.1f fps\n", all.streams,
          all.frames, all.total_fps, all.min_fps, all.max_fps);
  g_print("second half of the run: %.1f fps\n", all.second_half_fps);
  g_print("GPU memory %.0f MiB (%.1f MiB per stream)\n", all.memory_mib,
          all.streams > 0 ? all.memory_mib / all.streams : 0);
  for (const Summary &s : per_gpu)
    g_print(
        "GPU %u: %.0f streams  %.1f fps  detector p50 %.0f us  cudanms p50 %.0f us  memory "
        "%.0f MiB\n",
        s.gpu, s.streams, s.total_fps, s.detector_p50_us, s.nms_p50_us, s.memory_mib);
}

void write_summary(const char *json, const Summary &all, const std::vector<Summary> &per_gpu) {
  if (FILE *f = fopen(json, "w")) {
    fprintf(f,
            "{\"workers\": \"per-gpu\", \"streams\": %.0f, \"frames\": %.0f, \"total_fps\": "
            "%.10g, \"second_half_fps\": %.10g, \"min_stream_fps\": %.10g, "
            "\"max_stream_fps\": %.10g, \"gpu_memory_mib\": %.10g, \"per_gpu\": [",
            all.streams, all.frames, all.total_fps, all.second_half_fps, all.min_fps, all.max_fps,
            all.memory_mib);
    for (size_t j = 0; j < per_gpu.size(); ++j) {
      const Summary &s = per_gpu[j];
      fprintf(f,
              "%s{\"gpu\": %u, \"streams\": %.0f, \"frames\": %.0f, \"fps\": %.10g, "
              "\"detector_p50_us\": %.10g, \"nms_p50_us\": %.10g, \"chain_p50_us\": %.10g, "
              "\"gpu_memory_mib\": %.10g}",
              j ? ", " : "", s.gpu, s.streams, s.frames, s.total_fps, s.detector_p50_us,
              s.nms_p50_us, s.chain_p50_us, s.memory_mib);
    }
    fprintf(f, "]}\n");
    fclose(f);
  } else {
    g_printerr("cannot write %s\n", json);
  }
}

}  // namespace

int run_streams_per_gpu(const std::vector<std::string> &argv, const std::vector<unsigned> &gpus,
                        const char *json) {
  gchar *dir = g_dir_make_tmp("cudanms-streams-XXXXXX", nullptr);
  if (!dir) {
    g_printerr("--workers per-gpu: cannot make a temporary directory\n");
    return 1;
  }
  gchar *self = g_file_read_link("/proc/self/exe", nullptr);
  std::vector<GSubprocess *> workers;
  std::vector<std::string> summaries;
  int status = 0;
  for (size_t j = 0; j < gpus.size(); ++j) {
    summaries.push_back(std::string(dir) + "/gpu" + std::to_string(gpus[j]) + ".json");
    std::vector<const gchar *> args = {self};
    for (size_t a = 1; a < argv.size(); ++a) args.push_back(argv[a].c_str());
    // Last, so that they win over the user's: this worker's share, its summary, no progress
    // lines (one process a GPU would interleave them).
    const std::string worker_of = std::to_string(j);
    for (const gchar *extra :
         {"--worker-of", worker_of.c_str(), "--json", summaries.back().c_str(), "--progress", "0"})
      args.push_back(extra);
    args.push_back(nullptr);
    GError *error = nullptr;
    // Their summaries come back through --json: their stdout would repeat them.
    GSubprocess *worker = g_subprocess_newv(args.data(), G_SUBPROCESS_FLAGS_STDOUT_SILENCE, &error);
    if (!worker) {
      g_printerr("--workers per-gpu: cannot start GPU %u's worker: %s\n", gpus[j], error->message);
      g_clear_error(&error);
      status = 1;
      break;
    }
    workers.push_back(worker);
  }
  status = std::max(status, wait_for(workers, gpus));
  for (GSubprocess *worker : workers) g_object_unref(worker);
  g_free(self);

  std::vector<Summary> per_gpu;
  for (size_t j = 0; j < workers.size(); ++j) {
    per_gpu.push_back(read_summary(summaries[j], gpus[j]));
    if (!per_gpu.back().read) status = std::max(status, 1);
  }
  const Summary all = add_up(per_gpu);
  if (status == 0) print_summary(all, per_gpu);
  if (status == 0 && json) write_summary(json, all, per_gpu);
  for (const std::string &path : summaries) g_unlink(path.c_str());
  g_rmdir(dir);
  g_free(dir);
  return status;
}
