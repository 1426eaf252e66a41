// dnn::CudaStage: a DNN element's stream, input tensor and staging, in one CUDA context.
#include <algorithm>
#include <cstring>
#include <string>

#include "cuda_device.h"
#include "cudanms/dnn.h"

namespace cudanms::dnn {
namespace {

using detail::DeviceArray;
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

class Stage final : public CudaStage {
 public:
  ~Stage() override {
    DeviceBinding::Scope scope(binding_.context());
    buffers_.reset();
    if (stream_) cudaStreamDestroy(stream_);
  }
  Status open(int device) {
    Status status = binding_.open(device);
    if (!status.ok()) return status;
    CUDANMS_ENTER(binding_);
    CUDANMS_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    return Status::Ok();
  }
  void *stream() const override { return stream_; }
  void *context() const override { return binding_.context(); }
  const std::string &device_name() const override { return binding_.name(); }
  Status synchronize() override {
    CUDANMS_ENTER(binding_);
    CUDANMS_CUDA_TRY(cudaStreamSynchronize(stream_));
    return Status::Ok();
  }

  Status preprocess(const Image *images, const bool *on_device, int count, const InputSpec &spec,
                    float **d_input) override {
    CUDANMS_ENTER(binding_);
    if (count < 1 || count > kMaxBatch) return Status::Error("a batch holds 1 to 64 frames");
    Status status = buffers_->input.reserve(static_cast<size_t>(count) * 3 * spec.width * spec.height);
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

  Status decode(const Outputs &outputs, const Letterbox *letterboxes,
                DeviceCandidates *const *targets, const DecodeParams *params,
                Candidates *const *host) override {
    CUDANMS_ENTER(binding_);
    if (outputs.batch < 1 || outputs.batch > kMaxBatch) return Status::Error("a batch holds 1 to 64 frames");
    const int per = outputs.points_per_candidate();
    const size_t frame_points = static_cast<size_t>(outputs.anchors) * 2 * per;
    float *d_points[kMaxBatch] = {};
    if (per > 0) {
      Status status = buffers_->points.reserve(outputs.batch * frame_points);
      if (!status.ok()) return status;
      for (int i = 0; i < outputs.batch; i++) d_points[i] = buffers_->points.get() + i * frame_points;
    }
    Status status = decode_cuda(outputs, letterboxes, targets, d_points, params, stream_);
    if (!status.ok() || !host) return status;
    return download(outputs, targets, d_points, host);
  }

 private:
  // The candidates of the frames with host[i] into them: their counts in one synchronisation,
  // then exactly what they hold in another, through pinned memory (per-frame copies to pageable
  // memory would each wait for the stream).
  Status download(const Outputs &outputs, DeviceCandidates *const *targets,
                  float *const *d_points, Candidates *const *host) {
    const int per = outputs.points_per_candidate();
    const size_t floats_per = 4 + 1 + 1 + 2 * static_cast<size_t>(per);  // box, score, class, points
    Status status = buffers_->counts.reserve(outputs.batch);
    if (!status.ok()) return status;
    int wanted = 0;
    for (int i = 0; i < outputs.batch; i++) {
      if (!host[i]) continue;
      CUDANMS_CUDA_TRY(cudaMemcpyAsync(buffers_->counts.get() + i, targets[i]->count(),
                                       sizeof(uint32_t), cudaMemcpyDeviceToHost, stream_));
      wanted++;
    }
    if (wanted == 0) return Status::Ok();
    CUDANMS_CUDA_TRY(cudaStreamSynchronize(stream_));
    size_t total = 0;
    for (int i = 0; i < outputs.batch; i++) {
      if (!host[i]) continue;
      const uint32_t n = buffers_->counts.get()[i];
      if (n > targets[i]->capacity()) return Status::Error("decoded more candidates than the buffer holds");
      total += n;
    }
    status = buffers_->host.reserve(std::max<size_t>(1, total * floats_per));
    if (!status.ok()) return status;
    float *at = buffers_->host.get();
    auto copy = [&](float *to, const void *from, size_t n) -> Status {
      if (n > 0) CUDANMS_CUDA_TRY(cudaMemcpyAsync(to, from, n * sizeof(float), cudaMemcpyDeviceToHost, stream_));
      return Status::Ok();
    };
    for (int i = 0; i < outputs.batch; i++) {
      if (!host[i]) continue;
      const size_t n = buffers_->counts.get()[i];
      status = copy(at, targets[i]->boxes(), 4 * n);
      if (status.ok()) status = copy(at + 4 * n, targets[i]->scores(), n);
      if (status.ok()) status = copy(at + 5 * n, targets[i]->class_ids(), n);
      if (status.ok()) status = copy(at + 6 * n, d_points[i], 2 * per * n);
      if (!status.ok()) return status;
      at += floats_per * n;
    }
    CUDANMS_CUDA_TRY(cudaStreamSynchronize(stream_));
    at = buffers_->host.get();
    for (int i = 0; i < outputs.batch; i++) {
      if (!host[i]) continue;
      const size_t n = buffers_->counts.get()[i];
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
    return Status::Ok();
  }

  DeviceBinding binding_;
  cudaStream_t stream_ = nullptr;
  // Freed in the destructor, inside the binding's scope.
  struct Buffers {
    DeviceArray<float> input;
    DeviceArray<uint8_t> staging;
    DeviceArray<float> points;
    MappedArray<uint32_t> counts;  // per frame, then
    MappedArray<float> host;       // the frames' candidates, one after another
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
