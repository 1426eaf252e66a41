// Params::class_groups (cudanms/nms.h, rule 4) as NMS applies it: each candidate's class id
// replaced by its group's, so that every backend's per-class comparison does the rest.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "cudanms/nms.h"

namespace cudanms::detail {

// (class, group id) pairs sorted by class, the group id being the group's smallest class: no
// class outside the group has it, so grouped and ungrouped ids never meet.
using ClassGroupTable = std::vector<std::pair<int32_t, int32_t>>;
ClassGroupTable class_group_table(const std::vector<std::vector<int32_t>> &groups);

// Whether params ask for grouping that changes what candidates with class ids compare.
inline bool groups_classes(const Params &params) {
  return !params.class_agnostic && !params.class_groups.empty();
}

// out[i] = the group id of class_ids[i], or class_ids[i] when its class is in no group.
void group_classes(const ClassGroupTable &table, const int32_t *class_ids, size_t count,
                   std::vector<int32_t> *out);

}  // namespace cudanms::detail
