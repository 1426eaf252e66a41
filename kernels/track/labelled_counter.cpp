#include "cudanms/count.h"

namespace cudanms {

void LabelledCounter::set_lines(const std::vector<CountLine> &lines) {
  std::vector<std::map<std::string, LineCounts>> kept(lines.size());
  const std::vector<CountLine> &before = counter_.lines();
  for (size_t l = 0; l < lines.size(); l++)
    for (size_t b = 0; b < before.size(); b++)
      if (same_line(before[b], lines[l])) kept[l] = std::move(by_label_[b]);
  counter_.set_lines(lines);
  by_label_ = std::move(kept);
  apply_resumed();
}

int32_t LabelledCounter::class_of(const std::string &label) {
  auto [it, fresh] = classes_.try_emplace(label, static_cast<int32_t>(labels_.size()));
  if (fresh) labels_.push_back(label);
  return it->second;
}

void LabelledCounter::update(int64_t frame, const std::vector<CountObservation> &observations,
                             std::vector<CountEvent> *events) {
  const size_t first = events->size();
  counter_.update(frame, observations, events);
  for (size_t i = first; i < events->size(); i++) {
    const CountEvent &e = (*events)[i];
    if (e.kind != CountEventKind::kLineCrossed) continue;
    LineCounts &n = by_label_[e.index][label_of(e.class_id)];
    (e.direction > 0 ? n.in : n.out)++;
  }
}

void LabelledCounter::resume(const LineTallies &counts) {
  for (const auto &[name, tally] : counts) resumed_[name] = tally;
  apply_resumed();
}

void LabelledCounter::apply_resumed() {
  const std::vector<CountLine> &lines = counter_.lines();
  for (size_t l = 0; l < lines.size(); l++) {
    const auto found = resumed_.find(lines[l].name);
    if (found == resumed_.end()) continue;
    counter_.set_line_counts(l, found->second.total);
    by_label_[l] = found->second.by_label;
    resumed_.erase(found);
  }
}

LineTallies LabelledCounter::tallies() const {
  LineTallies out;
  const std::vector<CountLine> &lines = counter_.lines();
  for (size_t l = 0; l < lines.size(); l++)
    out[lines[l].name] = {counter_.line_counts(l), by_label_[l]};
  return out;
}

const std::map<std::string, LineCounts> &LabelledCounter::by_label(size_t line) const {
  return by_label_.at(line);
}

}  // namespace cudanms
