// dnn::CudaStage: a DNN element's stream, input tensor and staging, in one CUDA context.
#include <algorithm>
#include <cstring>
#include <string>

#include "cuda_device.h"
#include "cudanms/dnn.h"
#include "host_wait.h"

namespace cudanms::dnn {
namespace {

using detail::DeviceArray;
using detail::kBlockingEventFlags;
using detail::DeviceBinding;
using detail::MappedArray;

int planes_of(PixelFormat format) {
  return format == PixelFormat::kI420 ? 3 : format == PixelFormat::kNV12 ? 2 : 1;
}

// Bytes per row and rows of plane p of a frame, as the kernels read them.
void plane_extent(const Image &image, int p, size_t *row_bytes, int *rows) {
  const int chroma_w = (image.width + 1) / 2, chroma_h = (image.height + 1) / 2;
  switch (image.format) {
    case PixelFormat::kRGB:
    case PixelFormat::kBGR:
      *row_bytes = 3 * static_cast<size_t>(image.width), *rows = image.height;
      return;
    case PixelFormat::kRGBx:
    case PixelFormat::kBGRx:
      *row_bytes = 4 * static_cast<size_t>(image.width), *rows = image.height;
      return;
    case PixelFormat::kI420:
      *row_bytes = p == 0 ? image.width : chroma_w, *rows = p == 0 ? image.height : chroma_h;
      return;
    default:  // kNV12
      *row_bytes = p == 0 ? image.width : 2 * static_cast<size_t>(chroma_w);
      *rows = p == 0 ? image.height : chroma_h;
      return;
  }
}

// The frames whose candidates go to the host (counts[i] set), and where they are.
struct Packing {
  const float4 *boxes[kMaxBatch];
  const float *scores[kMaxBatch];
  const int32_t *class_ids[kMaxBatch];
  const uint32_t *counts[kMaxBatch];  // nullptr: the frame's candidates stay on the device
  uint32_t capacity[kMaxBatch];
  const float *points[kMaxBatch];  // point_floats per candidate, or nullptr
  int point_floats;
};

// A block per frame: its candidates into the mapped `out` after the frames before it, as the
// host reads them (boxes 4n, scores n, class ids n as their bits, points), its count into
// counts[frame]. A count past the capacity goes out as it is, with capacity candidates.
__global__ void pack_candidates(const Packing p, uint32_t *counts, float *out) {
  const int frame = blockIdx.x;
  if (!p.counts[frame]) return;
  const size_t floats_per = 6 + static_cast<size_t>(p.point_floats);
  size_t offset = 0;
  for (int i = 0; i < frame; i++)
    if (p.counts[i]) offset += min(*p.counts[i], p.capacity[i]) * floats_per;
  const uint32_t count = *p.counts[frame];
  const uint32_t n = min(count, p.capacity[frame]);
  if (threadIdx.x == 0) counts[frame] = count;
  float *o = out + offset;
  for (uint32_t k = threadIdx.x; k < n; k += blockDim.x) {
    const float4 b = p.boxes[frame][k];
    o[4 * k] = b.x, o[4 * k + 1] = b.y, o[4 * k + 2] = b.z, o[4 * k + 3] = b.w;
    o[4 * n + k] = p.scores[frame][k];
    o[5 * n + k] = __int_as_float(p.class_ids[frame][k]);
  }
  if (!p.points[frame]) return;
  for (size_t k = threadIdx.x; k < static_cast<size_t>(n) * p.point_floats; k += blockDim.x)
    o[6 * n + k] = p.points[frame][k];
}

class Stage final : public CudaStage {
 public:
  ~Stage() override {
    DeviceBinding::Scope scope(binding_.context());
    buffers_.reset();
    if (copied_) cudaEventDestroy(copied_);
    if (done_) cudaEventDestroy(done_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  Status open(int device) {
    Status status = binding_.open(device);
    if (!status.ok()) return status;
    CUDANMS_ENTER(binding_);
    CUDANMS_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    // The host waits on these (host_wait.h).
    CUDANMS_CUDA_TRY(cudaEventCreateWithFlags(&copied_, kBlockingEventFlags));
    CUDANMS_CUDA_TRY(cudaEventCreateWithFlags(&done_, kBlockingEventFlags));
    return Status::Ok();
  }
  void *stream() const override { return stream_; }
  void *context() const override { return binding_.context(); }
  const std::string &device_name() const override { return binding_.name(); }
  Status synchronize() override {
    CUDANMS_ENTER(binding_);
    CUDANMS_CUDA_TRY(waits_.stream(stream_, done_));
    return Status::Ok();
  }

  Status preprocess(const Image *images, const bool *on_device, int count, const InputSpec &spec,
                    float **d_input) override {
    CUDANMS_ENTER(binding_);
    if (count < 1 || count > kMaxBatch) return Status::Error("a batch holds 1 to 64 frames");
    Status status =
        buffers_->input.reserve(static_cast<size_t>(count) * 3 * spec.width * spec.height);
    if (!status.ok()) return status;
    Image device_images[kMaxBatch];
    std::copy(images, images + count, device_images);
    status = upload(device_images, on_device, count);
    if (!status.ok()) return status;
    status = preprocess_cuda(device_images, count, spec, buffers_->input.get(), stream_);
    if (!status.ok()) return status;
    *d_input = buffers_->input.get();
    return Status::Ok();
  }

  Status frames_copied() override {
    CUDANMS_ENTER(binding_);
    CUDANMS_CUDA_TRY(waits_.event(copied_));
    return Status::Ok();
  }

  Status decode(const Outputs &outputs, const Letterbox *letterboxes,
                DeviceCandidates *const *targets, const DecodeParams *params,
                Candidates *const *host) override {
    CUDANMS_ENTER(binding_);
    if (outputs.batch < 1 || outputs.batch > kMaxBatch)
      return Status::Error("a batch holds 1 to 64 frames");
    const int per = outputs.points_per_candidate();
    const size_t frame_points = static_cast<size_t>(outputs.anchors) * 2 * per;
    float *d_points[kMaxBatch] = {};
    if (per > 0) {
      Status status = buffers_->points.reserve(outputs.batch * frame_points);
      if (!status.ok()) return status;
      for (int i = 0; i < outputs.batch; i++)
        d_points[i] = buffers_->points.get() + i * frame_points;
    }
    Status status = buffers_->chunk_counts.reserve(decode_workspace(outputs));
    if (!status.ok()) return status;
    status = decode_cuda(outputs, letterboxes, targets, d_points, params,
                         buffers_->chunk_counts.get(), stream_);
    if (!status.ok()) return status;
    // Sealed where an element reads them in place; those downloaded here need no seal.
    DeviceCandidates *in_place[kMaxBatch];
    int n_in_place = 0;
    for (int i = 0; i < outputs.batch; i++)
      if (!host || !host[i]) in_place[n_in_place++] = targets[i];
    status = seal_all(in_place, n_in_place, stream_);
    if (!status.ok() || !host) return status;
    return download(outputs, targets, d_points, host);
  }

 private:
  // The candidates of the frames with host[i] into them: one kernel packs every such frame's
  // candidates and count into host-mapped memory, then one synchronisation (a copy of each
  // frame's count and four of its arrays, ~260 calls a batch of 64, took longer than the GPU
  // work of the whole chain).
  Status download(const Outputs &outputs, DeviceCandidates *const *targets, float *const *d_points,
                  Candidates *const *host) {
    const int per = outputs.points_per_candidate();
    const size_t floats_per =
        4 + 1 + 1 + 2 * static_cast<size_t>(per);  // box, score, class, points
    Packing packing{};
    packing.point_floats = 2 * per;
    size_t room = 0;
    for (int i = 0; i < outputs.batch; i++) {
      if (!host[i]) continue;
      packing.boxes[i] = reinterpret_cast<const float4 *>(targets[i]->boxes());
      packing.scores[i] = targets[i]->scores();
      packing.class_ids[i] = targets[i]->class_ids();
      packing.counts[i] = targets[i]->count();
      packing.capacity[i] = static_cast<uint32_t>(targets[i]->capacity());
      packing.points[i] = d_points[i];
      room += targets[i]->capacity() * floats_per;
    }
    if (room == 0) return Status::Ok();
    Status status = buffers_->counts.reserve(kMaxBatch);
    if (status.ok()) status = buffers_->host.reserve(room);
    if (!status.ok()) return status;
    pack_candidates<<<outputs.batch, 256, 0, stream_>>>(packing, buffers_->counts.device(),
                                                        buffers_->host.device());
    CUDANMS_CUDA_TRY(cudaGetLastError());
    CUDANMS_CUDA_TRY(waits_.stream(stream_, done_));
    const float *at = buffers_->host.get();
    for (int i = 0; i < outputs.batch; i++) {
      if (!host[i]) continue;
      const size_t n = buffers_->counts.get()[i];
      if (n > targets[i]->capacity())
        return Status::Error("decoded more candidates than the buffer holds");
      Candidates &c = *host[i];
      c.clear();
      c.points_per_candidate = per;
      c.boxes.assign(at, at + 4 * n);
      c.scores.assign(at + 4 * n, at + 5 * n);
      c.class_ids.resize(n);
      std::memcpy(c.class_ids.data(), at + 5 * n, n * sizeof(int32_t));
      c.points.assign(at + 6 * n, at + 6 * n + 2 * per * n);
      at += floats_per * n;
    }
    return Status::Ok();
  }

  // Frames in host memory into the staging buffer, their planes packed; those images then point
  // there.
  Status upload(Image *images, const bool *on_device, int count) {
    size_t total = 0;
    for (int i = 0; i < count; i++) {
      if (on_device[i]) continue;
      for (int p = 0; p < planes_of(images[i].format); p++) {
        size_t row_bytes;
        int rows;
        plane_extent(images[i], p, &row_bytes, &rows);
        total += (row_bytes + 255) / 256 * 256 * rows;
      }
    }
    if (total == 0) return Status::Ok();
    Status status = buffers_->staging.reserve(total);
    if (!status.ok()) return status;
    size_t at = 0;
    for (int i = 0; i < count; i++) {
      if (on_device[i]) continue;
      Image &image = images[i];
      for (int p = 0; p < planes_of(image.format); p++) {
        size_t row_bytes;
        int rows;
        plane_extent(image, p, &row_bytes, &rows);
        const size_t pitch = (row_bytes + 255) / 256 * 256;
        CUDANMS_CUDA_TRY(cudaMemcpy2DAsync(buffers_->staging.get() + at, pitch, image.planes[p],
                                           image.strides[p], row_bytes, rows,
                                           cudaMemcpyHostToDevice, stream_));
        image.planes[p] = buffers_->staging.get() + at;
        image.strides[p] = static_cast<int>(pitch);
        at += pitch * rows;
      }
    }
    CUDANMS_CUDA_TRY(cudaEventRecord(copied_, stream_));
    return Status::Ok();
  }

  DeviceBinding binding_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t copied_ = nullptr;  // after the last upload of host frames
  cudaEvent_t done_ = nullptr;    // the host's waits for the stream
  detail::HostWait waits_;
  // Freed in the destructor, inside the binding's scope.
  struct Buffers {
    DeviceArray<float> input;
    DeviceArray<uint8_t> staging;
    DeviceArray<float> points;
    DeviceArray<uint32_t> chunk_counts;  // decode_cuda's workspace
    MappedArray<uint32_t> counts;  // per frame, then
    MappedArray<float> host;       // the frames' candidates, one after another (pack_candidates)
  };
  std::unique_ptr<Buffers> buffers_ = std::make_unique<Buffers>();
};

}  // namespace

std::unique_ptr<CudaStage> CudaStage::create(int device, Status *status) {
  auto stage = std::make_unique<Stage>();
  *status = stage->open(device);
  if (!status->ok()) return nullptr;
  return stage;
}

}  // namespace cudanms::dnn
