#include "class_groups.h"

#include <algorithm>

namespace cudanms::detail {

ClassGroupTable class_group_table(const std::vector<std::vector<int32_t>> &groups) {
  ClassGroupTable table;
  for (const auto &group : groups) {
    if (group.empty()) continue;
    const int32_t id = *std::min_element(group.begin(), group.end());
    for (const int32_t c : group) table.emplace_back(c, id);
  }
  std::sort(table.begin(), table.end());
  table.erase(std::unique(table.begin(), table.end()), table.end());
  return table;
}

void group_classes(const ClassGroupTable &table, const int32_t *class_ids, size_t count,
                   std::vector<int32_t> *out) {
  out->resize(count);
  for (size_t i = 0; i < count; ++i) {
    const int32_t c = class_ids[i];
    const auto found =
        std::lower_bound(table.begin(), table.end(), std::pair<int32_t, int32_t>(c, INT32_MIN));
    (*out)[i] = found != table.end() && found->first == c ? found->second : c;
  }
}

}  // namespace cudanms::detail
