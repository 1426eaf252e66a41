// The arithmetic of one cascade window and of one resized pixel, compiled by both compilers:
// the CPU twin and the CUDA kernels run this same code, so they return the same bits, and both
// follow OpenCV 4.6's cascadedetect.cpp and resize.cpp operation for operation.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "cudanms/cascade.h"

#ifdef __CUDACC__
#define CASCADE_HD __host__ __device__ __forceinline__
#else
#define CASCADE_HD inline
#endif

namespace cudanms::cascade::detail {

// One tap of the bilinear resize along an axis: out = in[offset] * w0 + in[offset + 1] * w1, in
// 8-bit fixed point (w0 + w1 = 256). Border taps copy the edge pixel (w1 = 0).
struct AxisTap {
  int32_t offset;
  uint16_t w0, w1;
};

// A Haar feature with its rectangles as offsets from a window's top-left integral element, for
// one row stride; tilted ones index the tilted integral. 16-byte aligned for load_record.
struct alignas(16) HaarOffsets {
  int32_t ofs[3][4];
  float weight[3];
  int32_t tilted;
};

// An LBP feature: the 16 integral offsets of its 3x3 grid of blocks.
struct alignas(16) LbpOffsets {
  int32_t ofs[16];
};

// The model's stages, trees and nodes as they are: the kernels read Model's arrays uploaded as
// they stand.
using StageView = Model::Stage;
using TreeView = Model::Tree;
using NodeView = Model::Node;

// The model and the feature offsets for the current stride, wherever they live.
struct CascadeView {
  const StageView *stages;
  const TreeView *trees;
  const NodeView *nodes;
  const float *leaves;
  const int32_t *subsets;  // LBP: 8 words per node
  const HaarOffsets *haar;
  const LbpOffsets *lbp;
  int32_t stage_count;
  int32_t is_lbp;
  int32_t exact_stage_sums;  // stage_sums_exact(): a stage's leaves may be added in any order
  int32_t norm_ofs[4];       // the inner window (1, 1, w - 2, h - 2) of Haar variance normalisation
  double norm_area;
};

template <typename T>
CASCADE_HD T load(const T *p) {
#ifdef __CUDA_ARCH__
  return __ldg(p);
#else
  return *p;
#endif
}

// A table's record in as few loads as its size allows: one 16-byte load a 16 bytes on the GPU,
// whose tables are aligned (cudaMalloc). Field by field, a 64-byte feature cost 16 loads: in
// segment 1, where every lane reads the same record, 16 issued instructions (the segment is
// bound by its instructions); in the later segments, where the lanes read different trees, 16
// requests of as many cache lines each (they are bound by L1 requests).
template <typename T>
CASCADE_HD T load_record(const T *p) {
#ifdef __CUDA_ARCH__
  if constexpr (sizeof(T) % 16 == 0) {
    int4 words[sizeof(T) / 16];
    for (size_t i = 0; i < sizeof(T) / 16; ++i)
      words[i] = __ldg(reinterpret_cast<const int4 *>(p) + i);
    T record;
    memcpy(&record, words, sizeof(T));
    return record;
  } else if constexpr (sizeof(T) == 8) {
    const int2 word = __ldg(reinterpret_cast<const int2 *>(p));
    T record;
    memcpy(&record, &word, sizeof(T));
    return record;
  }
#endif
  return *p;
}

// A window's element in an integral plane, as a pointer the compiler keeps: left to itself it
// folds the window's 64-bit index into every feature offset, four instructions a corner where
// this pointer plus the offset is one.
CASCADE_HD const int32_t *window_in(const int32_t *plane, int64_t at) {
  const int32_t *p = plane + at;
#ifdef __CUDA_ARCH__
  asm("" : "+l"(p));
#endif
  return p;
}

// 32-bit integral sums wrap as OpenCV's CV_32S arithmetic does; unsigned arithmetic makes that
// defined behaviour.
CASCADE_HD uint32_t rect_sum_u(const int32_t *p, int32_t o0, int32_t o1, int32_t o2, int32_t o3) {
  return static_cast<uint32_t>(load(p + o0)) - static_cast<uint32_t>(load(p + o1)) -
         static_cast<uint32_t>(load(p + o2)) + static_cast<uint32_t>(load(p + o3));
}
CASCADE_HD int32_t rect_sum(const int32_t *p, const int32_t (&o)[4]) {
  return static_cast<int32_t>(rect_sum_u(p, o[0], o[1], o[2], o[3]));
}

// HaarEvaluator::setWindow: the variance normalisation factor of a window, and whether the
// window is evaluated at all (false for flat windows, whose standard deviation is at most 10).
CASCADE_HD bool haar_window_norm(const CascadeView &c, const int32_t *sum, const int32_t *sqsum,
                                 float *norm_factor) {
  const int32_t valsum = rect_sum(sum, c.norm_ofs);
  const uint32_t valsqsum =
      rect_sum_u(sqsum, c.norm_ofs[0], c.norm_ofs[1], c.norm_ofs[2], c.norm_ofs[3]);
  const double area = c.norm_area;
  double nf = area * static_cast<double>(valsqsum) -
              static_cast<double>(valsum) * static_cast<double>(valsum);
  if (nf > 0.) {
    nf = sqrt(nf);
    *norm_factor = static_cast<float>(1. / nf);
    return area * static_cast<double>(*norm_factor) < 1e-1;
  }
  *norm_factor = 1.f;
  return false;
}

// HaarEvaluator::OptFeature::calc times the window's normalisation factor, in float.
CASCADE_HD float haar_feature(const HaarOffsets &f, const int32_t *sum, const int32_t *tilted,
                              float norm_factor) {
  const int32_t *p = f.tilted ? tilted : sum;
  float value = f.weight[0] * static_cast<float>(rect_sum(p, f.ofs[0])) +
                f.weight[1] * static_cast<float>(rect_sum(p, f.ofs[1]));
  if (f.weight[2] != 0.0f) value += f.weight[2] * static_cast<float>(rect_sum(p, f.ofs[2]));
  return value * norm_factor;
}

// LBPEvaluator::OptFeature::calc: the 8-bit code of the centre block against its neighbours.
CASCADE_HD int lbp_feature(const LbpOffsets &f, const int32_t *p) {
  const int32_t *o = f.ofs;
  const int32_t c = static_cast<int32_t>(rect_sum_u(p, o[5], o[6], o[9], o[10]));
  auto at_least = [&](int a, int b, int d, int e) {
    return static_cast<int32_t>(rect_sum_u(p, o[a], o[b], o[d], o[e])) >= c;
  };
  return (at_least(0, 1, 4, 5) ? 128 : 0) | (at_least(1, 2, 5, 6) ? 64 : 0) |
         (at_least(2, 3, 6, 7) ? 32 : 0) | (at_least(6, 7, 10, 11) ? 16 : 0) |
         (at_least(10, 11, 14, 15) ? 8 : 0) | (at_least(9, 10, 13, 14) ? 4 : 0) |
         (at_least(8, 9, 12, 13) ? 2 : 0) | (at_least(4, 5, 8, 9) ? 1 : 0);
}

// One weak classifier of predictOrdered / predictCategorical: walks the tree to its leaf.
CASCADE_HD float tree_leaf(const CascadeView &c, const TreeView tree, const int32_t *sum,
                           const int32_t *tilted, float norm_factor) {
  int idx = 0;
  do {
    const NodeView node = load_record(c.nodes + tree.first_node + idx);
    if (c.is_lbp) {
      const int code = lbp_feature(load_record(c.lbp + node.feature), sum);
      const int32_t word = load(c.subsets + (tree.first_node + idx) * 8 + (code >> 5));
      idx = (word & (1 << (code & 31))) ? node.left : node.right;
    } else {
      const float value =
          haar_feature(load_record(c.haar + node.feature), sum, tilted, norm_factor);
      idx =
          static_cast<double>(value) < static_cast<double>(node.threshold) ? node.left : node.right;
    }
  } while (idx > 0);
  return load(c.leaves + tree.first_leaf - idx);
}

// predictOrdered / predictCategorical over stages [first, end): the index of the stage the
// window fails, or end when it passes them all; *weight is the sum of the last stage run. A
// stage's leaves are summed in double in tree order, as OpenCV does.
CASCADE_HD int run_stages(const CascadeView &c, const int32_t *sum, const int32_t *tilted,
                          float norm_factor, int first, int end, double *weight) {
  double stage_sum = 0;
  for (int si = first; si < end; ++si) {
    const StageView stage = c.stages[si];
    stage_sum = 0;
    for (int t = 0; t < stage.trees; ++t) {
      stage_sum += static_cast<double>(
          tree_leaf(c, load_record(c.trees + stage.first_tree + t), sum, tilted, norm_factor));
    }
    if (stage_sum < static_cast<double>(stage.threshold)) {
      *weight = stage_sum;
      return si;
    }
  }
  *weight = stage_sum;
  return end;
}

// One pixel of resize_bitExact<uchar, interpolationLinear>: the horizontal pass in 8.8 fixed
// point, the vertical one in 16.16, rounded half up.
CASCADE_HD uint8_t resize_pixel(const uint8_t *src, size_t stride, AxisTap tx, AxisTap ty) {
  auto horizontal = [&](int row) {
    const uint8_t *r = src + static_cast<size_t>(row) * stride + tx.offset;
    uint32_t v = static_cast<uint32_t>(r[0]) * tx.w0;
    if (tx.w1 != 0) v += static_cast<uint32_t>(r[1]) * tx.w1;
    return v;
  };
  uint32_t v = horizontal(ty.offset) * ty.w0;
  if (ty.w1 != 0) v += horizontal(ty.offset + 1) * ty.w1;
  return static_cast<uint8_t>((v + 32768u) >> 16);
}

}  // namespace cudanms::cascade::detail
