// cudanms-dnn-bench: the DNN detector's chain (BlazeFace or NanoDet) on the GPU, stage by stage,
// for batches of frames of several cameras: pre-processing (frame to letterboxed input tensor), the
// network (TorchScript, LibTorch), decoding (outputs to candidates) and NMS (cudanms, one batched
// call, where cudanms backend=auto runs it: on the CPU when no frame has more than 64 candidates).
// Each stage is timed alone (the stream synchronised around it, p50 over the runs), then the
// whole chain with no synchronisation inside (p50/p99 host-visible latency per batch, frames/s).
// Frames are 1080p NV12 already in GPU memory (the NVDEC case), and the same frames in host
// memory, uploaded by the chain: pinned (what dnndetect proposes upstream) and pageable. Before
// timing, the batch's candidates and kept boxes are checked against the same frames run one by one
// on the CPU (LibTorch's CPU backend, cudanms's CPU NMS).
//   cudanms-dnn-bench --model MODEL.pt [--decoder blazeface|nanodet] [--precision tf32|fp32|fp16]
//                     [--layout nchw|nhwc] [--frames RAW.bgr] [--batches 1,8,32,64] [--runs N]
//                     [--no-cuda-graphs]
// The network column is its bare forward rate: the TorchScript alone on a batch already in the
// input tensor, synchronised (in float16 with --precision fp16, whose boxes are then compared
// with the CPU's float32 ones and only reported).
// --frames: raw 1920x1080 BGR frames, one after another (e.g. Megamind written by the GPU host's
// OpenCV); else frames of random blocks. Prints a Markdown table; --json writes the rows.
#include <cuda_runtime.h>
#include <glib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench_version.h"
#include "cudanms/dnn.h"
#include "cudanms/nms.h"
#include "dnndetector.h"

namespace {

namespace dnn = cudanms::dnn;
using Clock = std::chrono::steady_clock;
constexpr int kWidth = 1920, kHeight = 1080;
// cudanms backend=auto runs frames of at most this many candidates on its CPU twin.
constexpr size_t kCpuFrameCandidates = 64;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

// BGR to NV12 with BT.601 limited range (what a decoder of a typical camera gives).
std::vector<uint8_t> nv12_of_bgr(const uint8_t *bgr) {
  std::vector<uint8_t> out(kWidth * kHeight * 3 / 2);
  uint8_t *uv = out.data() + kWidth * kHeight;
  for (int y = 0; y < kHeight; y++) {
    for (int x = 0; x < kWidth; x++) {
      const uint8_t *p = bgr + 3 * (static_cast<size_t>(y) * kWidth + x);
      const float b = p[0], g = p[1], r = p[2];
      out[y * kWidth + x] =
          static_cast<uint8_t>(std::lround(16 + 0.257f * r + 0.504f * g + 0.098f * b));
      if (y % 2 == 0 && x % 2 == 0) {
        uv[(y / 2) * kWidth + x] =
            static_cast<uint8_t>(std::lround(128 - 0.148f * r - 0.291f * g + 0.439f * b));
        uv[(y / 2) * kWidth + x + 1] =
            static_cast<uint8_t>(std::lround(128 + 0.439f * r - 0.368f * g - 0.071f * b));
      }
    }
  }
  return out;
}

std::vector<std::vector<uint8_t>> load_frames(const char *path, int count) {
  std::vector<std::vector<uint8_t>> frames;
  std::vector<uint8_t> bgr(static_cast<size_t>(kWidth) * kHeight * 3);
  if (path) {
    std::ifstream in(path, std::ios::binary);
    while (static_cast<int>(frames.size()) < count &&
           in.read(reinterpret_cast<char *>(bgr.data()), bgr.size()))
      frames.push_back(nv12_of_bgr(bgr.data()));
    if (frames.empty()) g_printerr("warning: no frame in %s: random frames\n", path);
  }
  std::mt19937 rng(7);
  while (static_cast<int>(frames.size()) < count) {  // random 32x32 blocks
    for (int by = 0; by < kHeight; by += 32)
      for (int bx = 0; bx < kWidth; bx += 32) {
        const uint8_t c[3] = {static_cast<uint8_t>(rng()), static_cast<uint8_t>(rng()),
                              static_cast<uint8_t>(rng())};
        for (int y = by; y < std::min(kHeight, by + 32); y++)
          for (int x = bx; x < std::min(kWidth, bx + 32); x++)
            for (int k = 0; k < 3; k++) bgr[3 * (static_cast<size_t>(y) * kWidth + x) + k] = c[k];
      }
    frames.push_back(nv12_of_bgr(bgr.data()));
  }
  // Where there are fewer frames than cameras, cameras repeat them.
  for (size_t i = 0; frames.size() < static_cast<size_t>(count); i++) frames.push_back(frames[i]);
  return frames;
}

dnn::Image nv12_image(const uint8_t *data) {
  dnn::Image image;
  image.format = dnn::PixelFormat::kNV12;
  image.width = kWidth, image.height = kHeight;
  image.planes[0] = data, image.strides[0] = kWidth;
  image.planes[1] = data + kWidth * kHeight, image.strides[1] = kWidth;
  return image;
}

#define CHECK(what)                                               \
  do {                                                            \
    const cudanms::Status s_ = (what);                            \
    if (!s_.ok()) {                                               \
      g_printerr("error: %s: %s\n", #what, s_.message().c_str()); \
      return false;                                               \
    }                                                             \
  } while (0)

// Where a row's frames are: GPU memory (NVDEC's case), host memory that is pinned (what dnndetect
// proposes upstream), or ordinary pageable host memory.
enum class Memory { kGpu, kPinned, kPageable };
const char *memory_name(Memory m) {
  return m == Memory::kGpu      ? "GPU memory"
         : m == Memory::kPinned ? "pinned host memory"
                                : "host memory";
}

struct Row {
  int batch = 0;
  Memory memory = Memory::kGpu;
  double preprocess = 0, network = 0, decode = 0, nms = 0;  // p50 ms per batch, each alone
  double cuda_nms = 0;                  // the same NMS on cudanms's CUDA backend, p50 ms per batch
  double chain_p50 = 0, chain_p99 = 0;  // ms per batch, no sync inside
  double candidates = 0, kept = 0;      // per frame
  size_t disagreements = 0;
};

struct Bench {
  cudanms::Params nms_params;
  float threshold = 0.5f;
  std::unique_ptr<DnnDetector> gpu, cpu;  // the dnndetect element's own network
  std::unique_ptr<cudanms::Context> nms, cpu_nms;

  // One batch through the chain; with stage_ms, each stage synchronised and timed into it.
  bool chain(const std::vector<dnn::Image> &images, bool on_device,
             std::vector<dnn::Candidates> *found, std::vector<cudanms::Result> *kept,
             double stage_ms[4]) {
    const int n = static_cast<int>(images.size());
    found->resize(n);
    std::vector<DnnJob> jobs(n);
    DnnJob *batch[dnn::kMaxBatch];
    for (int i = 0; i < n; i++) {
      jobs[i].image = images[i];
      jobs[i].on_device = on_device;
      jobs[i].params.score_threshold = threshold;
      jobs[i].host = &(*found)[i];
      batch[i] = &jobs[i];
    }
    DnnStageTimes times;
    CHECK(gpu->run(batch, n, stage_ms ? &times : nullptr));
    const Clock::time_point t = Clock::now();
    std::vector<cudanms::Frame> frames;
    bool small = true;  // cudanms backend=auto's choice: the CPU for frames of a few candidates
    for (const dnn::Candidates &c : *found) {
      frames.push_back({c.view(), nms_params});
      small = small && c.size() <= kCpuFrameCandidates;
    }
    CHECK((small ? cpu_nms : nms)->run(frames, kept));
    if (stage_ms) {
      stage_ms[0] = times.preprocess_ms, stage_ms[1] = times.network_ms;
      stage_ms[2] = times.decode_ms, stage_ms[3] = ms_since(t);
    }
    return true;
  }

  // The same frames one by one on the CPU: the reference.
  bool reference(const std::vector<std::vector<uint8_t>> &frames, int n,
                 std::vector<dnn::Candidates> *found, std::vector<cudanms::Result> *kept) {
    found->assign(n, dnn::Candidates());
    kept->assign(n, cudanms::Result());
    for (int i = 0; i < n; i++) {
      DnnJob job;
      job.image = nv12_image(frames[i].data());
      job.params.score_threshold = threshold;
      job.host = &(*found)[i];
      DnnJob *one[] = {&job};
      CHECK(cpu->run(one, 1));
      CHECK(cpu_nms->run((*found)[i].view(), nms_params, &(*kept)[i]));
    }
    return true;
  }
};

// Kept boxes of two runs agree: the same count, each box within 0.5 px (the GPU's and the CPU's
// networks sum in other orders).
size_t disagreements(const std::vector<cudanms::Result> &a, const std::vector<cudanms::Result> &b) {
  size_t bad = 0;
  for (size_t i = 0; i < a.size(); i++) {
    if (a[i].kept_boxes.size() != b[i].kept_boxes.size()) {
      bad++;
      continue;
    }
    for (size_t k = 0; k < a[i].kept_boxes.size(); k++) {
      if (std::fabs(a[i].kept_boxes[k] - b[i].kept_boxes[k]) > 0.5f) {
        bad++;
        break;
      }
    }
  }
  return bad;
}

}  // namespace

int main(int argc, char **argv) {
  gchar *model_path = nullptr, *frames_path = nullptr, *batches_text = nullptr,
        *json_path = nullptr;
  gchar *decoder = nullptr, *layout = nullptr, *precision = nullptr;
  gint runs = 100, device = 0;
  gdouble threshold = -1;
  gboolean cuda_graphs = TRUE;
  GOptionEntry entries[] = {
      {"model", 0, 0, G_OPTION_ARG_FILENAME, &model_path,
       "TorchScript: BlazeFace (tools/blazeface-to-torchscript.py) or NanoDet "
       "(tools/nanodet-to-torchscript.py)",
       "FILE"},
      {"decoder", 0, 0, G_OPTION_ARG_STRING, &decoder,
       "blazeface (default; weighted NMS at IoU 0.3) or nanodet (greedy per class at 0.6, 100 "
       "boxes)",
       "NAME"},
      {"threshold", 0, 0, G_OPTION_ARG_DOUBLE, &threshold,
       "Score threshold (default 0.5 for BlazeFace, 0.35 for NanoDet)", "T"},
      {"precision", 0, 0, G_OPTION_ARG_STRING, &precision,
       "tf32 (default), fp32 or fp16: dnndetect's precision", "NAME"},
      {"layout", 0, 0, G_OPTION_ARG_STRING, &layout,
       "The network's tensors NCHW or NHWC (channels-last); default the element's choice for the "
       "decoder",
       "nchw|nhwc"},
      {"frames", 0, 0, G_OPTION_ARG_FILENAME, &frames_path, "Raw 1920x1080 BGR frames", "FILE"},
      {"batches", 0, 0, G_OPTION_ARG_STRING, &batches_text, "Batch sizes (default 1,8,32,64)",
       "LIST"},
      {"runs", 0, 0, G_OPTION_ARG_INT, &runs, "Timed runs per row (default 100)", "N"},
      {"device", 0, 0, G_OPTION_ARG_INT, &device, "CUDA device (default 0)", "N"},
      {"json", 0, 0, G_OPTION_ARG_FILENAME, &json_path, "Write the rows as JSON", "FILE"},
      {"no-cuda-graphs", 0, G_OPTION_FLAG_REVERSE, G_OPTION_ARG_NONE, &cuda_graphs,
       "Launch the network's operators one by one (dnndetect cuda-graphs=false)", nullptr},
      {nullptr, 0, 0, G_OPTION_ARG_NONE, nullptr, nullptr, nullptr}};
  GOptionContext *options =
      g_option_context_new("- the DNN detector's chain on the GPU, per stage");
  g_option_context_add_main_entries(options, entries, nullptr);
  GError *error = nullptr;
  if (!g_option_context_parse(options, &argc, &argv, &error) || !model_path || runs < 1) {
    g_printerr("%s\n", error ? error->message : "--model is needed, --runs at least 1");
    return 2;
  }
  g_option_context_free(options);
  std::vector<int> batches;
  gchar **items = g_strsplit(batches_text ? batches_text : "1,8,32,64", ",", -1);
  for (gchar **it = items; *it; it++) {
    const int b = atoi(*it);
    if (b < 1 || b > dnn::kMaxBatch) {
      g_printerr("error: a batch holds 1 to %d frames, not \"%s\"\n", dnn::kMaxBatch, *it);
      return 2;
    }
    batches.push_back(b);
  }
  g_strfreev(items);
  if (batches.empty()) {
    g_printerr("error: --batches names no batch\n");
    return 2;
  }
  const int most = *std::max_element(batches.begin(), batches.end());

  const std::string head_name = decoder ? decoder : "blazeface";
  if (head_name != "blazeface" && head_name != "nanodet") {
    g_printerr("error: --decoder is blazeface or nanodet, not \"%s\"\n", head_name.c_str());
    return 2;
  }
  const bool nanodet = head_name == "nanodet";
  const std::string precision_name = precision ? precision : "tf32";
  if (precision_name != "tf32" && precision_name != "fp32" && precision_name != "fp16") {
    g_printerr("error: --precision is tf32, fp32 or fp16, not \"%s\"\n", precision_name.c_str());
    return 2;
  }
  const bool fp16 = precision_name == "fp16";
  const std::string layout_name = layout ? layout : "";
  if (!layout_name.empty() && layout_name != "nchw" && layout_name != "nhwc") {
    g_printerr("error: --layout is nchw or nhwc, not \"%s\"\n", layout_name.c_str());
    return 2;
  }
  Bench bench;
  DnnDetectorConfig config;
  config.model_path = model_path;
  config.head = nanodet ? dnn::Head::kNanoDet : dnn::Head::kBlazeFace;
  config.spec = dnn::model_input(config.head);
  bench.threshold = threshold >= 0 ? static_cast<float>(threshold) : nanodet ? 0.35f : 0.5f;
  bench.nms_params.method = nanodet ? cudanms::Method::kGreedy : cudanms::Method::kWeighted;
  bench.nms_params.threshold = nanodet ? 0.6f : 0.3f;
  bench.nms_params.max_detections = nanodet ? 100 : 0;
  std::string why, detail;
  config.device = device;
  config.cuda_graphs = cuda_graphs;
  config.half_precision = fp16;
  config.tf32 = precision_name == "tf32";
  if (!layout_name.empty()) config.channels_last = layout_name == "nhwc";
  const bool channels_last = config.uses_channels_last();
  bench.gpu = DnnDetector::open(config, &why, &detail);
  config.device = -1;
  config.half_precision = false;
  if (bench.gpu) bench.cpu = DnnDetector::open(config, &why, &detail);
  if (!bench.gpu || !bench.cpu) {
    g_printerr("error: model %s %s: %s\n", model_path, why.c_str(), detail.c_str());
    return 1;
  }
  cudanms::Status status;
  cudanms::ContextOptions nms_options;
  nms_options.backend = cudanms::Backend::kCuda;
  nms_options.device = device;
  bench.nms = cudanms::Context::create(nms_options, &status);
  if (bench.nms) bench.cpu_nms = cudanms::Context::create(cudanms::ContextOptions(), &status);
  if (!bench.nms || !bench.cpu_nms) {
    g_printerr("error: %s\n", status.message().c_str());
    return 1;
  }

  const std::vector<std::vector<uint8_t>> frames = load_frames(frames_path, most);
  std::vector<uint8_t *> d_frames(most), pinned_frames(most);
  for (int i = 0; i < most; i++) {
    if (cudaMalloc(&d_frames[i], frames[i].size()) != cudaSuccess ||
        cudaMemcpy(d_frames[i], frames[i].data(), frames[i].size(), cudaMemcpyHostToDevice) !=
            cudaSuccess ||
        cudaHostAlloc(&pinned_frames[i], frames[i].size(), cudaHostAllocPortable) != cudaSuccess) {
      g_printerr("error: cannot preload the frames\n");
      return 1;
    }
    std::copy(frames[i].begin(), frames[i].end(), pinned_frames[i]);
  }
  std::vector<dnn::Candidates> reference_found;
  std::vector<cudanms::Result> reference_kept;
  if (!bench.reference(frames, most, &reference_found, &reference_kept)) return 1;

  std::vector<Row> rows;
  for (int batch : batches) {
    for (const Memory memory : {Memory::kGpu, Memory::kPinned, Memory::kPageable}) {
      std::vector<dnn::Image> images;
      for (int i = 0; i < batch; i++)
        images.push_back(nv12_image(memory == Memory::kGpu      ? d_frames[i]
                                    : memory == Memory::kPinned ? pinned_frames[i]
                                                                : frames[i].data()));
      const bool on_device = memory == Memory::kGpu;
      Row row;
      row.batch = batch, row.memory = memory;
      std::vector<dnn::Candidates> found;
      std::vector<cudanms::Result> kept;
      if (!bench.chain(images, on_device, &found, &kept, nullptr)) return 1;
      row.disagreements = disagreements(
          kept,
          std::vector<cudanms::Result>(reference_kept.begin(), reference_kept.begin() + batch));
      for (int i = 0; i < batch; i++)
        row.candidates += found[i].size(), row.kept += kept[i].kept.size();
      row.candidates /= batch, row.kept /= batch;
      std::vector<double> stages[4], whole;
      for (int r = 0; r < runs; r++) {
        double ms[4];
        if (!bench.chain(images, on_device, &found, &kept, ms)) return 1;
        for (int k = 0; k < 4; k++) stages[k].push_back(ms[k]);
      }
      std::vector<double> cuda_nms;
      std::vector<cudanms::Frame> nms_frames;
      for (const dnn::Candidates &c : found) nms_frames.push_back({c.view(), bench.nms_params});
      for (int r = 0; r < runs; r++) {
        const Clock::time_point t0 = Clock::now();
        if (!bench.nms->run(nms_frames, &kept).ok()) return 1;
        cuda_nms.push_back(ms_since(t0));
      }
      row.cuda_nms = percentile(cuda_nms, 0.5);
      for (int r = 0; r < runs; r++) {
        const Clock::time_point t0 = Clock::now();
        if (!bench.chain(images, on_device, &found, &kept, nullptr)) return 1;
        whole.push_back(ms_since(t0));
      }
      row.preprocess = percentile(stages[0], 0.5), row.network = percentile(stages[1], 0.5);
      row.decode = percentile(stages[2], 0.5), row.nms = percentile(stages[3], 0.5);
      row.chain_p50 = percentile(whole, 0.5), row.chain_p99 = percentile(whole, 0.99);
      rows.push_back(row);
    }
  }

  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, device);
  int driver = 0;
  cudaDriverGetVersion(&driver);
  std::printf(
      "DNN chain: %s (TorchScript, LibTorch, %s), 1920x1080 NV12 frames (%s), score >= %.2f, %s "
      "(cudanms backend=auto); network %s, %s; %s, driver %d, cudanms %s; p50 of %d runs\n\n",
      nanodet ? "NanoDet-g 416x416" : "BlazeFace front 128x128", precision_name.c_str(),
      frames_path ? frames_path : "random blocks", bench.threshold,
      nanodet ? "greedy NMS per class IoU 0.6, 100 boxes" : "weighted NMS IoU 0.3",
      cuda_graphs ? "replayed as CUDA graphs" : "launched operator by operator",
      channels_last ? "channels-last (NHWC)" : "NCHW", prop.name, driver,
      CUDANMS_BENCH_VERSION, runs);
  std::printf(
      "| batch | frames in | pre-processing (ms) | network (ms) | network alone (frames/s) | "
      "decoding (ms) | NMS (ms) | NMS on the CUDA backend (ms) | chain p50 / p99 (ms) | frames/s | "
      "ms per frame | pre+dec+NMS share | candidates / kept per frame | vs CPU |\n");
  std::printf("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  size_t bad = 0;
  for (const Row &r : rows) {
    const double stages = r.preprocess + r.network + r.decode + r.nms;
    std::printf(
        "| %d | %s | %.3f | %.3f | %.0f | %.3f | %.3f | %.3f | %.3f / %.3f | %.0f | %.3f | %.0f%% "
        "| %.1f / %.1f | %s |\n",
        r.batch, memory_name(r.memory), r.preprocess, r.network, 1000.0 * r.batch / r.network,
        r.decode, r.nms, r.cuda_nms, r.chain_p50, r.chain_p99, 1000.0 * r.batch / r.chain_p50,
        r.chain_p50 / r.batch, 100.0 * (stages - r.network) / stages, r.candidates, r.kept,
        r.disagreements ? (std::to_string(r.disagreements) + " frames differ").c_str()
                        : "same kept");
    if (!fp16) bad += r.disagreements; /* float16's boxes are reported, not required */
  }
  if (json_path) {
    std::ofstream out(json_path);
    out << "{\"gpu\": \"" << prop.name << "\", \"driver\": " << driver << ", \"version\": \""
        << CUDANMS_BENCH_VERSION << "\", \"rows\": [";
    for (size_t i = 0; i < rows.size(); i++) {
      const Row &r = rows[i];
      out << (i ? ", " : "") << "{\"batch\": " << r.batch << ", \"frames_in\": \""
          << memory_name(r.memory) << "\""
          << ", \"preprocess_ms\": " << r.preprocess << ", \"network_ms\": " << r.network
          << ", \"decode_ms\": " << r.decode << ", \"nms_ms\": " << r.nms
          << ", \"cuda_nms_ms\": " << r.cuda_nms << ", \"chain_p50_ms\": " << r.chain_p50
          << ", \"chain_p99_ms\": " << r.chain_p99 << ", \"disagreements\": " << r.disagreements
          << "}";
    }
    out << "]}\n";
  }
  for (uint8_t *d : d_frames) cudaFree(d);
  g_free(model_path), g_free(frames_path), g_free(batches_text), g_free(json_path), g_free(decoder);
  g_free(layout), g_free(precision);
  return bad ? 1 : 0;
}
