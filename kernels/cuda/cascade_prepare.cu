// The cascade's frame preparation (cascade_stages.h): every level of a batch resized from its
// frame as OpenCV resizes it (INTER_LINEAR_EXACT), then its integral, squared integral and
// tilted integral, as cv::integral computes them.
#include "cuda/cascade_stages.h"

namespace cudanms::cascade::detail {
namespace {

__global__ void resize_levels(const FrameSlot *frames, const DeviceLevel *levels,
                              const AxisTap *x_taps, const AxisTap *y_taps, int stride,
                              uint8_t *resized) {
  const DeviceLevel level = levels[blockIdx.z];
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= level.width || y >= level.height) return;
  const FrameSlot &frame = frames[level.frame];
  resized[level.origin + static_cast<int64_t>(y) * stride + x] =
      resize_pixel(frame.pixels, frame.stride, x_taps[level.x_taps + x], y_taps[level.y_taps + y]);
}

// One step of a warp-wide running sum over 32 consecutive elements: the lane's inclusive sum plus
// what came before (*carry), which then moves on past the 32.
__device__ uint32_t running_sum(uint32_t v, int lane, uint32_t *carry) {
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const uint32_t n = __shfl_up_sync(kFullMask, v, d);
    if (lane >= d) v += n;
  }
  v += *carry;
  *carry = __shfl_sync(kFullMask, v, 31);
  return v;
}

// One warp per image row of every level: the row's running sums (and of squares) into row y + 1,
// columns 1..width, of the integral planes. The column pass finishes them.
__global__ void integral_rows(const DeviceLevel *levels, int level_count, int total_rows,
                              const uint8_t *resized, int stride, int32_t *sum, int32_t *sqsum) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= total_rows) return;
  const DeviceLevel level = levels[find_level(levels, level_count, &DeviceLevel::first_row, row)];
  const int y = row - level.first_row;
  const uint8_t *src = resized + level.origin + static_cast<int64_t>(y) * stride;
  const int64_t out = level.origin + static_cast<int64_t>(y + 1) * stride + 1;
  uint32_t carry = 0, carry_sq = 0;
  for (int x0 = 0; x0 < level.width; x0 += 32) {
    const int x = x0 + lane;
    const uint32_t v = x < level.width ? src[x] : 0;
    const uint32_t s = running_sum(v, lane, &carry);
    if (x < level.width) sum[out + x] = static_cast<int32_t>(s);
    if (sqsum) {
      const uint32_t q = running_sum(v * v, lane, &carry_sq);
      if (x < level.width) sqsum[out + x] = static_cast<int32_t>(q);
    }
  }
}

// The column pass: a block per 32 adjacent integral columns of one level (blockIdx.z), its warps
// one above the other down bands of kBandRows rows. Each lane sums kRowsPerLane rows of its
// column in registers, the warps' totals are added up in shared memory: every load and store is
// a warp's 32 adjacent columns (coalesced), each value read and written once. (A warp per column
// read 32 rows of one column per load: 32 sectors for 128 useful bytes.)
constexpr int kColumnTile = 32;
constexpr int kColumnWarps = 16;
constexpr int kRowsPerLane = 8;
constexpr int kBandRows = kColumnWarps * kRowsPerLane;

__global__ void __launch_bounds__(kColumnTile *kColumnWarps)
    integral_columns(const DeviceLevel *levels, int stride, int32_t *sum, int32_t *sqsum) {
  __shared__ uint32_t totals[2][kColumnWarps][kColumnTile + 1];  // +1: no bank conflicts
  const DeviceLevel level = levels[blockIdx.z];
  if (static_cast<int>(blockIdx.x) * kColumnTile >= level.width) return;  // the whole block
  const int lane = threadIdx.x, warp = threadIdx.y;
  const int x = blockIdx.x * kColumnTile + lane;
  const bool column_inside = x < level.width;
  const int64_t top = level.origin + stride + 1 + x;  // integral row 1 of column x + 1
  uint32_t carry = 0, carry_sq = 0;                   // the bands above
  for (int band = 0; band < level.height; band += kBandRows) {
    const int y0 = band + warp * kRowsPerLane;
    uint32_t s[kRowsPerLane], q[kRowsPerLane];
    uint32_t run = 0, run_sq = 0;
#pragma unroll
    for (int k = 0; k < kRowsPerLane; ++k) {
      const bool inside = column_inside && y0 + k < level.height;
      const int64_t p = top + static_cast<int64_t>(y0 + k) * stride;
      run += inside ? static_cast<uint32_t>(sum[p]) : 0u;
      s[k] = run;
      if (sqsum) {
        run_sq += inside ? static_cast<uint32_t>(sqsum[p]) : 0u;
        q[k] = run_sq;
      }
    }
    totals[0][warp][lane] = run;
    totals[1][warp][lane] = run_sq;
    __syncthreads();
    uint32_t above = carry, above_sq = carry_sq;
    for (int w = 0; w < kColumnWarps; ++w) {
      if (w == warp) above = carry, above_sq = carry_sq;  // what the warps above this one add
      carry += totals[0][w][lane];
      carry_sq += totals[1][w][lane];
    }
    __syncthreads();  // the totals are read before the next band writes them
#pragma unroll
    for (int k = 0; k < kRowsPerLane; ++k) {
      if (!column_inside || y0 + k >= level.height) continue;
      const int64_t p = top + static_cast<int64_t>(y0 + k) * stride;
      sum[p] = static_cast<int32_t>(s[k] + above);
      if (sqsum) sqsum[p] = static_cast<int32_t>(q[k] + above_sq);
    }
  }
}

// The tilted integral of one level on the grid rotated by 45 degrees (see tilted_integral in
// common/cascade_geometry.h): scatter, sums along v downwards, along u, gather.
__global__ void tilted_scatter(const uint8_t *resized, int64_t origin, int stride, int width,
                               int height, int n, uint32_t *grid) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y;
  if (x >= width) return;
  grid[static_cast<int64_t>(x + y) * n + (x - y + height - 1)] =
      resized[origin + static_cast<int64_t>(y) * stride + x];
}

__global__ void tilted_suffix_rows(int n, uint32_t *grid) {
  const int u = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (u >= n) return;
  uint32_t *row = grid + static_cast<int64_t>(u) * n;
  uint32_t carry = 0;
  for (int v0 = n - 1; v0 >= 0; v0 -= 32) {
    const int v = v0 - lane;  // lane 0 takes the rightmost element of the chunk
    const uint32_t s = running_sum(v >= 0 ? row[v] : 0, lane, &carry);
    if (v >= 0) row[v] = s;
  }
}

__global__ void tilted_prefix_columns(int n, uint32_t *grid) {
  const int v = blockIdx.x * blockDim.x + threadIdx.x;
  if (v >= n) return;
  uint32_t acc = grid[v];
  for (int u = 1; u < n; ++u) {
    const int64_t p = static_cast<int64_t>(u) * n + v;
    acc += grid[p];
    grid[p] = acc;
  }
}

__global__ void tilted_gather(const uint32_t *grid, int n, int width, int height, int64_t origin,
                              int stride, int32_t *tilted) {
  const int X = blockIdx.x * blockDim.x + threadIdx.x;
  const int Y = blockIdx.y;
  if (X > width) return;
  const int u = X + Y - 2;
  const int v = X - Y + height - 1;
  uint32_t value = 0;
  if (u >= 0 && v < n) value = grid[static_cast<int64_t>(min(u, n - 1)) * n + max(v, 0)];
  tilted[origin + static_cast<int64_t>(Y) * stride + X] = static_cast<int32_t>(value);
}

}  // namespace

cudaError_t resize_levels_async(const FrameSlot *frames, const DeviceLevel *levels, int level_count,
                                int widest_width, int widest_height, const AxisTap *x_taps,
                                const AxisTap *y_taps, int stride, uint8_t *resized,
                                cudaStream_t stream) {
  const dim3 block(32, 8);
  const dim3 grid((widest_width + 31) / 32, (widest_height + 7) / 8, level_count);
  resize_levels<<<grid, block, 0, stream>>>(frames, levels, x_taps, y_taps, stride, resized);
  return cudaGetLastError();
}

cudaError_t integrals_async(const DeviceLevel *levels, int level_count, int total_rows,
                            int widest_width, const uint8_t *resized, int stride, int32_t *sum,
                            int32_t *sqsum, cudaStream_t stream) {
  integral_rows<<<blocks_for(total_rows, kWarpsPerBlock), kThreads, 0, stream>>>(
      levels, level_count, total_rows, resized, stride, sum, sqsum);
  cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return error;
  integral_columns<<<dim3((widest_width + kColumnTile - 1) / kColumnTile, 1, level_count),
                     dim3(kColumnTile, kColumnWarps), 0, stream>>>(levels, stride, sum, sqsum);
  return cudaGetLastError();
}

cudaError_t tilted_integral_async(const uint8_t *resized, int64_t origin, int stride, int width,
                                  int height, uint32_t *grid, int32_t *tilted,
                                  cudaStream_t stream) {
  const int n = width + height - 1;
  cudaError_t error =
      cudaMemsetAsync(grid, 0, static_cast<size_t>(n) * n * sizeof(uint32_t), stream);
  if (error != cudaSuccess) return error;
  tilted_scatter<<<dim3((width + 127) / 128, height), 128, 0, stream>>>(resized, origin, stride,
                                                                        width, height, n, grid);
  if ((error = cudaGetLastError()) != cudaSuccess) return error;
  tilted_suffix_rows<<<blocks_for(n, kWarpsPerBlock), kThreads, 0, stream>>>(n, grid);
  if ((error = cudaGetLastError()) != cudaSuccess) return error;
  tilted_prefix_columns<<<blocks_for(n, 128), 128, 0, stream>>>(n, grid);
  if ((error = cudaGetLastError()) != cudaSuccess) return error;
  tilted_gather<<<dim3((width + 1 + 127) / 128, height + 1), 128, 0, stream>>>(
      grid, n, width, height, origin, stride, tilted);
  return cudaGetLastError();
}

}  // namespace cudanms::cascade::detail
