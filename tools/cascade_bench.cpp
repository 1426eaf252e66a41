// cudanms-cascade-bench: the cascade detector against OpenCV's CascadeClassifier on one frame,
// p50/p99 host-visible latency per backend, the CUDA time with the frame already on the GPU,
// the CUDA segment splits, and frames of several cameras batched into one set of launches.
// Every backend's windows are checked against OpenCV's first.
//   cudanms-cascade-bench [--frame FRAME.pgm] [--cascade NAME]... [--repeat N] [--json FILE]
#include <glib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/objdetect.hpp>
#include <string>
#include <vector>

#ifdef CUDANMS_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "bench_version.h"
#include "cascade_frames.h"
#include "cudanms/cascade.h"

namespace {

using namespace cudanms;
using cascade::Detector;
using cascade::DetectorOptions;
using cascade::DetectStats;
using cascade::Window;
using Clock = std::chrono::steady_clock;

struct Timing {
  double p50 = 0, p99 = 0;
};

Timing percentiles(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))];
  };
  return {at(0.5), at(0.99)};
}

template <typename Run>
Timing time_runs(int repeat, Run run) {
  run();  // warm-up: allocation, caches
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    const auto t0 = Clock::now();
    run();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return percentiles(ms);
}

bool same_rects(const std::vector<cv::Rect> &ref, const std::vector<Window> &ours) {
  std::vector<std::tuple<int, int, int, int>> a, b;
  for (const auto &r : ref) a.emplace_back(r.x, r.y, r.width, r.height);
  for (const auto &w : ours) b.emplace_back(w.x, w.y, w.width, w.height);
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b;
}

std::string split_name(const std::vector<int> &split) {
  if (split.empty()) return "1-end (one launch)";
  std::string s;
  int first = 1;
  for (const int start : split) {
    s += std::to_string(first) + "-" + std::to_string(start) + ", ";
    first = start + 1;
  }
  return s + std::to_string(first) + "-end";
}

#ifdef CUDANMS_HAVE_CUDA
// Batches of n copies of the frame in GPU memory into device candidates, as an application
// running many cameras on one thread would (Detector::detect over frames): host-visible ms per
// frame, from detect() to the last frame's candidates ready, for the batch in one set of
// launches and for the same frames one after another on the same detector. Each copy's count
// must be the frame's windows.
struct BatchTimes {
  Timing batched, one_by_one;
  bool agrees = true;
};

BatchTimes time_batches(Detector *cuda, const cv::Mat &gray, const cascade::DetectParams &params,
                        size_t windows, int n, int repeat) {
  BatchTimes times;
  const size_t bytes = gray.total();
  uint8_t *pixels = nullptr;
  if (cudaMalloc(&pixels, bytes * n) != cudaSuccess) return times;
  for (int i = 0; i < n; ++i)
    cudaMemcpy(pixels + i * bytes, gray.data, bytes, cudaMemcpyHostToDevice);
  Status status;
  DeviceCandidatesPoolOptions pool_options;
  pool_options.capacity = cuda->max_windows(gray.cols, gray.rows, params);
  pool_options.max_buffers = static_cast<size_t>(n);
  auto pool = DeviceCandidatesPool::create(pool_options, &status);
  std::vector<std::shared_ptr<DeviceCandidates>> outs;
  std::vector<cascade::DeviceFrame> frames;
  for (int i = 0; pool && i < n; ++i) {
    outs.push_back(pool->acquire(&status));
    if (!outs.back()) break;
    cascade::DeviceFrame frame;
    frame.image = {pixels + i * bytes, gray.cols, gray.rows, static_cast<size_t>(gray.cols), true};
    frame.out = outs.back().get();
    frames.push_back(frame);
  }
  const auto wait_all = [&] {
    for (const auto &out : outs) cudaEventSynchronize(static_cast<cudaEvent_t>(out->ready()));
  };
  if (static_cast<int>(frames.size()) == n) {
    times.batched = time_runs(repeat, [&] {
      times.agrees &= cuda->detect(frames, params).ok();
      wait_all();
    });
    times.one_by_one = time_runs(repeat, [&] {
      for (const cascade::DeviceFrame &f : frames)
        times.agrees &= cuda->detect(f.image, params, f.output, f.out).ok();
      wait_all();
    });
    times.batched.p50 /= n, times.batched.p99 /= n;
    times.one_by_one.p50 /= n, times.one_by_one.p99 /= n;
    cuda->detect(frames, params);
    for (const auto &out : outs) {
      uint32_t count = 0;
      times.agrees &= device_count(out->view(), &count).ok() && count == windows;
    }
  } else {
    times.agrees = false;
  }
  cudaFree(pixels);
  return times;
}
#endif

}  // namespace

int main(int argc, char **argv) {
  gchar *frame_path = nullptr, *json_path = nullptr, *data_dir = nullptr, *windows_path = nullptr;
  gchar **cascades = nullptr;
  gint repeat = 200, cpu_repeat = 10;
  gdouble scale_factor = 1.25;
  gint min_size = 50, max_size = 200;
  const GOptionEntry entries[] = {
      {"frame", 'f', 0, G_OPTION_ARG_FILENAME, &frame_path,
       "The frame (binary PGM); default the 1080p Megamind tile of tools/cascade_frames.h", "FILE"},
      {"cascade", 'c', 0, G_OPTION_ARG_STRING_ARRAY, &cascades,
       "Cascade base name (repeatable; default the alt2 Haar and improved LBP faces)", "NAME"},
      {"data", 'd', 0, G_OPTION_ARG_FILENAME, &data_dir,
       "opencv-data's folder (default /usr/share/opencv4)", "DIR"},
      {"repeat", 'n', 0, G_OPTION_ARG_INT, &repeat, "Timed CUDA runs per row (200)", "N"},
      {"cpu-repeat", 0, 0, G_OPTION_ARG_INT, &cpu_repeat, "Timed CPU runs per row (10)", "N"},
      {"scale-factor", 0, 0, G_OPTION_ARG_DOUBLE, &scale_factor, "Scale factor (1.25)", "F"},
      {"min-size", 0, 0, G_OPTION_ARG_INT, &min_size, "Smallest window side (50)", "PX"},
      {"max-size", 0, 0, G_OPTION_ARG_INT, &max_size, "Largest window side (200)", "PX"},
      {"json", 'j', 0, G_OPTION_ARG_FILENAME, &json_path, "Also write the rows as JSON", "FILE"},
      {"windows", 'w', 0, G_OPTION_ARG_FILENAME, &windows_path,
       "Write the first cascade's raw windows (OpenCV's) as csv x1,y1,x2,y2,score, the "
       "candidates grouping meets (cudanms-tool bench --input FILE)",
       "FILE"},
      {nullptr, 0, 0, G_OPTION_ARG_NONE, nullptr, nullptr, nullptr}};
  GOptionContext *context = g_option_context_new("- time the cascade detector against OpenCV");
  g_option_context_add_main_entries(context, entries, nullptr);
  GError *error = nullptr;
  const gboolean parsed = g_option_context_parse(context, &argc, &argv, &error);
  g_option_context_free(context);
  if (!parsed || repeat < 1 || cpu_repeat < 1) {
    std::fprintf(stderr, "cudanms-cascade-bench: %s\n",
                 error ? error->message : "repeats must be positive");
    return 2;
  }
  // The talk's frame unless told otherwise: six Megamind.avi frames tiled into 1920x1080.
  std::string why;
  const cv::Mat gray =
      frame_path ? tools::read_pgm(frame_path) : tools::cascade_frame("megamind_tile_1080p", &why);
  if (gray.empty()) {
    std::fprintf(stderr, "cudanms-cascade-bench: %s\n",
                 frame_path ? "--frame is not a binary 8-bit PGM" : why.c_str());
    return 2;
  }
  const std::string frame_name = frame_path ? frame_path : "megamind_tile_1080p";
  std::vector<std::string> names;
  for (gchar **c = cascades; c && *c; ++c) names.emplace_back(*c);
  if (names.empty()) names = {"haarcascade_frontalface_alt2", "lbpcascade_frontalface_improved"};
  const std::string data = data_dir ? data_dir : "/usr/share/opencv4";

  cascade::DetectParams params;
  params.scale_factor = scale_factor;
  params.min_width = params.min_height = min_size;
  params.max_width = params.max_height = max_size;
  const cascade::GrayView view{gray.data, gray.cols, gray.rows, gray.step[0]};
  const bool have_cuda = cuda_available(&why);
  int rc = 0;
  std::string json = "{\"version\": \"" CUDANMS_BENCH_VERSION "\", \"rows\": [";
  std::printf(
      "cudanms %s, frame %s (%dx%d), scale factor %.2f, windows %d-%d px, OpenCV %s with "
      "%d threads\n\n",
      CUDANMS_BENCH_VERSION, frame_name.c_str(), gray.cols, gray.rows, scale_factor, min_size,
      max_size, CV_VERSION, cv::getNumThreads());
  std::printf(
      "| cascade | runner | p50 ms | p99 ms | windows evaluated | windows out | agrees |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  // evaluated < 0: not known (OpenCV does not say).
  auto row = [&](const std::string &cascade, const std::string &runner, Timing t, long evaluated,
                 size_t out, bool agrees) {
    const std::string counted = evaluated < 0 ? "-" : std::to_string(evaluated);
    std::printf("| %s | %s | %.3f | %.3f | %s | %zu | %s |\n", cascade.c_str(), runner.c_str(),
                t.p50, t.p99, counted.c_str(), out, agrees ? "yes" : "NO");
    char text[512];
    std::snprintf(text, sizeof text,
                  "%s{\"cascade\": \"%s\", \"runner\": \"%s\", \"p50_ms\": %.4f, \"p99_ms\": %.4f, "
                  "\"evaluated\": %ld, \"out\": %zu, \"agrees\": %s}",
                  json.back() == '[' ? "" : ", ", cascade.c_str(), runner.c_str(), t.p50, t.p99,
                  evaluated, out, agrees ? "true" : "false");
    json += text;
    if (!agrees) rc = 1;
  };

  std::vector<std::string> split_lines;
  for (const std::string &name : names) {
    const std::string lbp_prefix = "lbp";
    const std::string path = data +
                             (name.rfind(lbp_prefix, 0) == 0 ? "/lbpcascades/" : "/haarcascades/") +
                             name + ".xml";
    Status status;
    auto model = cascade::Model::load(path, &status);
    cv::CascadeClassifier reference(path);
    if (!model || reference.empty()) {
      std::fprintf(stderr, "cudanms-cascade-bench: %s\n", status.message().c_str());
      return 2;
    }
    std::vector<cv::Rect> rects;
    std::vector<int> levels;
    std::vector<double> weights;
    auto opencv_run = [&] {
      reference.detectMultiScale(gray, rects, levels, weights, scale_factor, 0, 0,
                                 cv::Size(min_size, min_size), cv::Size(max_size, max_size), true);
    };
    const int threads = cv::getNumThreads();
    // Timed before the row is printed: the row reads what the runs found.
    const Timing all_cores = time_runs(cpu_repeat, opencv_run);
    if (windows_path && name == names.front()) {
      FILE *out = std::fopen(windows_path, "w");
      for (size_t i = 0; out && i < rects.size(); ++i) {
        const cv::Rect &r = rects[i];
        std::fprintf(out, "%d,%d,%d,%d,%.17g\n", r.x, r.y, r.x + r.width, r.y + r.height,
                     weights[i]);
      }
      if (!out || std::fclose(out) != 0) {
        std::fprintf(stderr, "cudanms-cascade-bench: cannot write %s\n", windows_path);
        return 1;
      }
    }
    row(name, "OpenCV " CV_VERSION ", " + std::to_string(threads) + " threads", all_cores, -1,
        rects.size(), true);
    cv::setNumThreads(1);
    const Timing one_core = time_runs(cpu_repeat, opencv_run);
    row(name, "OpenCV " CV_VERSION ", 1 thread", one_core, -1, rects.size(), true);
    cv::setNumThreads(threads);

    std::vector<Window> windows;
    DetectStats stats;
    auto cpu = Detector::create(model, {}, &status);
    const Timing cpu_t =
        time_runs(cpu_repeat, [&] { cpu->detect(view, params, &windows, &stats); });
    row(name, "cudanms cpu twin, " + std::to_string(threads) + " threads", cpu_t,
        stats.windows_evaluated, windows.size(), same_rects(rects, windows));
    if (!have_cuda) continue;
    for (const std::vector<int> &split : std::vector<std::vector<int>>{
             {1, 3, 7}, {}, {1}, {3}, {3, 7}, {1, 3, 7, 12}, {2, 5, 9, 14}}) {
      DetectorOptions options;
      options.backend = Backend::kCuda;
      options.segment_starts = split;
      auto cuda = Detector::create(model, options, &status);
      if (!cuda) {
        std::fprintf(stderr, "cudanms-cascade-bench: %s\n", status.message().c_str());
        return 1;
      }
      const Timing t = time_runs(repeat, [&] { cuda->detect(view, params, &windows, &stats); });
      const bool agrees = same_rects(rects, windows);
      if (split == DetectorOptions{}.segment_starts) {
#ifdef CUDANMS_HAVE_CUDA
        for (const int n : {1, 4, 16, 32, 64}) {
          const BatchTimes b =
              time_batches(cuda.get(), gray, params, windows.size(), n, std::max(repeat / n, 5));
          const std::string frames = std::to_string(n) + " frame" + (n > 1 ? "s" : "");
          row(name, "cudanms cuda, ms per frame, " + frames + " in GPU memory batched", b.batched,
              -1, windows.size(), b.agrees && agrees);
          row(name, "cudanms cuda, ms per frame, " + frames + " in GPU memory one by one",
              b.one_by_one, -1, windows.size(), b.agrees && agrees);
        }
#endif
        row(name, "cudanms cuda, frame in host memory", t,
            static_cast<long>(stats.windows_evaluated), windows.size(), agrees);
        options.time_device = true;
        auto timed = Detector::create(model, options, &status);
        std::vector<double> device, resident;
        timed->detect(view, params, &windows, &stats);
        for (int i = 0; i < repeat; ++i) {
          timed->detect(view, params, &windows, &stats);
          device.push_back(stats.device_time_us / 1000.0);
          resident.push_back(stats.after_upload_us / 1000.0);
        }
        row(name, "cudanms cuda, GPU time, frame already on the GPU", percentiles(resident),
            static_cast<long>(stats.windows_evaluated), windows.size(), same_rects(rects, windows));
        row(name, "cudanms cuda, GPU time incl. upload", percentiles(device),
            static_cast<long>(stats.windows_evaluated), windows.size(), same_rects(rects, windows));
      }
      std::string alive;
      for (const size_t n : stats.alive_after_segment) alive += " " + std::to_string(n);
      char line[256];
      std::snprintf(line, sizeof line, "| %s | %s | %.3f | %.3f |%s | %s |", name.c_str(),
                    split_name(split).c_str(), t.p50, t.p99, alive.c_str(), agrees ? "yes" : "NO");
      split_lines.push_back(line);
      if (!agrees) rc = 1;
    }
  }
  if (!have_cuda) std::printf("\nno CUDA rows: %s\n", why.c_str());
  if (!split_lines.empty()) {
    std::printf("\nCUDA segment splits (stages, 1-based), host-visible:\n\n");
    std::printf("| cascade | segments | p50 ms | p99 ms | alive after each | agrees |\n");
    std::printf("|---|---|---|---|---|---|\n");
    for (const std::string &l : split_lines) std::printf("%s\n", l.c_str());
  }
  json += "]}\n";
  if (json_path) {
    std::ofstream out(json_path);
    out << json;
    if (!out.flush()) {
      std::fprintf(stderr, "cudanms-cascade-bench: cannot write %s\n", json_path);
      return 1;
    }
  }
  return rc;
}
