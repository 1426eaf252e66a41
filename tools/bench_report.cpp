#include "bench_report.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "bench_peers.h"
#include "bench_version.h"

namespace cudanms::tools {
namespace {

std::string format_us(double us, bool present) {
  if (!present) return "-";
  char text[32];
  std::snprintf(text, sizeof text, us < 100 ? "%.1f" : "%.0f", us);
  return text;
}

std::string agreement(const Cell &cell) {
  std::string text = cell.differing == 0
                         ? "yes"
                         : (cell.backend == "opencv" ? "" : "NO ") +
                               std::to_string(cell.differing) + "/" + std::to_string(cell.checked);
  if (cell.on_cpu > 0) text += " (" + std::to_string(cell.on_cpu) + " on CPU)";
  return text;
}

std::string json_string(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", value);
  return text;
}

std::string json_latency(const Latency &l) {
  std::ostringstream out;
  out << "{\"runs\": " << l.runs << ", \"p50_us\": " << json_number(l.p50)
      << ", \"p99_us\": " << json_number(l.p99) << ", \"min_us\": " << json_number(l.min)
      << ", \"mean_us\": " << json_number(l.mean) << "}";
  return out.str();
}

std::string json_params(const Workload &w) {
  std::ostringstream out;
  out << "\"config\": " << json_string(w.config) << ", \"data\": " << json_string(to_string(w.data))
      << ", \"n\": " << w.n << ", \"classes\": " << w.classes
      << ", \"method\": " << json_string(cudanms::to_string(w.params.method))
      << ", \"overlap\": " << json_string(cudanms::to_string(w.params.overlap))
      << ", \"threshold\": " << w.params.threshold
      << ", \"class_agnostic\": " << (w.params.class_agnostic ? "true" : "false");
  if (w.data == Data::kFile) out << ", \"input\": " << json_string(w.input);
  if (w.batch > 0) out << ", \"frames_per_call\": " << w.batch;
  if (w.streams > 0) out << ", \"streams\": " << w.streams;
  return out.str();
}

}  // namespace

void print_header() {
  std::printf("%7s  %-18s %-7s %9s %9s %9s %6s  %-7s %s\n", "N", "config", "backend", "p50 us",
              "p99 us", "GPU us", "kept", "agrees", "target");
}

void print_row(const Workload &w, const Cell &cell) {
  if (!cell.error.empty()) {
    std::printf("%7zu  %-18s %-7s error: %s\n", w.n, w.config.c_str(), cell.backend.c_str(),
                cell.error.c_str());
    return;
  }
  std::string target = cell.target;
  if (!target.empty()) {
    target += cell.target_met < 0 ? " n/a" : cell.target_met ? " met" : " MISSED";
  }
  if (cell.frames_per_second > 0) {
    target = std::to_string(std::lround(cell.frames_per_second)) + " frames/s in all";
  }
  std::printf("%7zu  %-18s %-7s %9s %9s %9s %6zu  %-7s %s\n", w.n, w.config.c_str(),
              cell.backend.c_str(), format_us(cell.host.p50, true).c_str(),
              format_us(cell.host.p99, true).c_str(),
              format_us(cell.device.p50, cell.device.runs > 0).c_str(), w.reference[0].size(),
              agreement(cell).c_str(), target.c_str());
}

std::string to_json(const BenchOptions &options, const Metadata &meta,
                    const std::vector<Workload> &workloads,
                    const std::vector<std::vector<Cell>> &cells) {
  std::ostringstream out;
  out << "{\n  \"tool\": \"cudanms-tool bench\",\n  \"version\": "
      << json_string(CUDANMS_BENCH_VERSION) << ",\n  \"date\": " << json_string(meta.date)
      << ",\n  \"seed\": " << options.seed
      << ",\n  \"gpu\": " << (meta.gpu.empty() ? "null" : json_string(meta.gpu))
      << ",\n  \"cuda_note\": " << json_string(meta.cuda_note)
      << ",\n  \"cpu\": " << json_string(meta.cpu)
      << ",\n  \"opencv\": " << (opencv_version().empty() ? "null" : json_string(opencv_version()))
      << ",\n  \"repeat\": " << options.repeat
      << ",\n  \"max_seconds\": " << json_number(options.max_seconds)
      << ",\n  \"sets\": " << options.sets << ",\n  \"results\": [";
  const char *separator = "\n";
  for (size_t i = 0; i < workloads.size(); ++i) {
    for (const Cell &cell : cells[i]) {
      out << separator << "    {" << json_params(workloads[i])
          << ", \"backend\": " << json_string(cell.backend);
      separator = ",\n";
      if (!cell.call.empty()) out << ", \"call\": " << json_string(cell.call);
      if (!cell.error.empty()) {
        out << ", \"error\": " << json_string(cell.error) << "}";
        continue;
      }
      out << ", \"host\": " << json_latency(cell.host);
      if (cell.frames_per_second > 0) {
        out << ", \"frames_per_second\": " << json_number(cell.frames_per_second);
      }
      if (cell.device.runs > 0) out << ", \"device\": " << json_latency(cell.device);
      out << ", \"kept\": " << workloads[i].reference[0].size() << ", \"checked\": " << cell.checked
          << ", \"differing\": " << cell.differing << ", \"computed_on_cpu\": " << cell.on_cpu;
      if (!cell.target.empty()) {
        out << ", \"target\": " << json_string(cell.target) << ", \"target_met\": "
            << (cell.target_met < 0 ? "null"
                : cell.target_met   ? "true"
                                    : "false");
        if (cell.target_met >= 0) out << ", \"target_us\": " << json_number(cell.target_value);
      }
      out << "}";
    }
  }
  out << "\n  ]";
  if (!meta.dump_dir.empty()) {
    out << ",\n  \"dump_dir\": " << json_string(meta.dump_dir) << ",\n  \"datasets\": [";
    separator = "\n";
    for (const Workload &w : workloads) {
      for (size_t k = 0; w.single_frames() && k < w.sets.size(); ++k) {
        const std::string stem = w.config + "-n" + std::to_string(w.n) + "-set" + std::to_string(k);
        out << separator << "    {" << json_params(w) << ", \"set\": " << k
            << ", \"file\": " << json_string(stem + ".csv")
            << ", \"kept_file\": " << json_string(stem + ".kept")
            << ", \"kept\": " << w.reference[k].size() << "}";
        separator = ",\n";
      }
    }
    out << "\n  ]";
  }
  out << "\n}\n";
  return out.str();
}

Status write_file(const std::string &path, const std::string &text) {
  std::FILE *file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return Status::Error(path + ": cannot create: " + std::strerror(errno));
  bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  written = std::fclose(file) == 0 && written;
  if (!written) return Status::Error(path + ": cannot write: " + std::strerror(errno));
  return Status::Ok();
}

Status dump(const std::string &dir, const Workload &w) {
  for (size_t k = 0; k < w.sets.size(); ++k) {
    const std::string stem =
        dir + "/" + w.config + "-n" + std::to_string(w.n) + "-set" + std::to_string(k);
    std::string text;
    Status status = format_candidates(w.sets[k], FileFormat::kCsv, &text);
    if (status.ok()) status = write_file(stem + ".csv", text);
    if (!status.ok()) return status;
    text.clear();
    for (uint32_t i : w.reference[k]) text += std::to_string(i) + "\n";
    status = write_file(stem + ".kept", text);
    if (!status.ok()) return status;
  }
  return Status::Ok();
}

}  // namespace cudanms::tools
