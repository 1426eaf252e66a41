// The text forms of lines and zones (cudanms/count.h), and the checks that make a line or a zone
// one the counter can use.
#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <set>

#include "count_geometry.h"
#include "cudanms/count.h"

namespace cudanms {
namespace {

constexpr size_t kMaxNameLength = 64;
constexpr size_t kMaxZonePoints = 1000;

std::atomic<uint64_t> texts_parsed{0};  // shape_texts_parsed()

std::string trimmed(const std::string &text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

std::vector<std::string> split(const std::string &text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at; (at = text.find(separator, start)) != std::string::npos; start = at + 1)
    parts.push_back(text.substr(start, at - start));
  parts.push_back(text.substr(start));
  return parts;
}

std::string format_number(double v) {
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, v);
  return ec == std::errc() ? std::string(text, end) : "?";
}

// One "NAME:numbers" entry: its name and numbers, or false with the reason. `kind` is "line"
// or "zone", for the messages.
bool parse_entry(const std::string &entry, const char *kind, bool normalized, std::string *name,
                 std::vector<double> *numbers, std::string *error) {
  const size_t colon = entry.find(':');
  if (colon == std::string::npos) {
    *error = std::string("\"") + entry + "\": a " + kind +
             " is NAME:" + (std::string(kind) == "line" ? "x1,y1,x2,y2" : "x1,y1 x2,y2 x3,y3 ...");
    return false;
  }
  *name = trimmed(entry.substr(0, colon));
  const bool name_ok = !name->empty() && name->size() <= kMaxNameLength &&
                       std::all_of(name->begin(), name->end(), [](char c) {
                         return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                (c >= '0' && c <= '9') || c == '-' || c == '_';
                       });
  if (!name_ok) {
    *error = std::string(kind) + " name \"" + *name + "\": 1 to 64 letters, digits, - and _";
    return false;
  }
  numbers->clear();
  const std::string body = entry.substr(colon + 1);
  const char *p = body.data();
  const char *end = p + body.size();
  while (true) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == ',')) ++p;
    if (p == end) break;
    double v = 0;
    if (*p == '+') ++p;  // from_chars takes no plus sign
    const auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc() || !std::isfinite(v) ||
        (next < end && *next != ' ' && *next != '\t' && *next != ',')) {
      const char *stop = next > p ? next : p + 1;
      while (stop < end && *stop != ' ' && *stop != ',') ++stop;
      *error = std::string(kind) + " \"" + *name + "\": \"" + std::string(p, stop) +
               "\" is not a number";
      return false;
    }
    if (normalized && (v < 0 || v > 1)) {
      *error = std::string(kind) + " \"" + *name + "\": " + format_number(v) +
               " is outside 0..1 (normalized=true)";
      return false;
    }
    numbers->push_back(v);
    p = next;
  }
  return true;
}

// Calls add(entry) for every non-empty ';'-separated entry; false when add fails or a name
// comes twice.
template <typename Add>
bool parse_entries(const std::string &text, const char *kind, std::string *error, Add add) {
  if (!trimmed(text).empty()) texts_parsed++;
  std::set<std::string> names;
  for (const std::string &raw : split(text, ';')) {
    const std::string entry = trimmed(raw);
    if (entry.empty()) continue;
    std::string name;
    if (!add(entry, &name)) return false;
    if (!names.insert(name).second) {
      *error = std::string(kind) + " \"" + name + "\" is given twice";
      return false;
    }
  }
  return true;
}

}  // namespace

uint64_t shape_texts_parsed() { return texts_parsed.load(); }

bool parse_lines(const std::string &text, bool normalized, std::vector<CountLine> *lines,
                 std::string *error) {
  std::vector<CountLine> out;
  const bool ok =
      parse_entries(text, "line", error, [&](const std::string &entry, std::string *name) {
        std::vector<double> v;
        if (!parse_entry(entry, "line", normalized, name, &v, error)) return false;
        if (v.size() != 4) {
          *error = "line \"" + *name + "\": needs 4 numbers x1,y1,x2,y2, not " +
                   std::to_string(v.size());
          return false;
        }
        if (v[0] == v[2] && v[1] == v[3]) {
          *error = "line \"" + *name + "\": its two ends are the same point: it has no length";
          return false;
        }
        out.push_back({*name, {v[0], v[1]}, {v[2], v[3]}});
        return true;
      });
  if (ok) *lines = std::move(out);
  return ok;
}

bool parse_zones(const std::string &text, bool normalized, std::vector<CountZone> *zones,
                 std::string *error) {
  std::vector<CountZone> out;
  const bool ok =
      parse_entries(text, "zone", error, [&](const std::string &entry, std::string *name) {
        std::vector<double> v;
        if (!parse_entry(entry, "zone", normalized, name, &v, error)) return false;
        const std::string what = "zone \"" + *name + "\": ";
        if (v.size() % 2 != 0) {
          *error =
              what + "an odd count of numbers (" + std::to_string(v.size()) + "): points are x,y";
          return false;
        }
        CountZone zone{*name, {}};
        for (size_t i = 0; i + 1 < v.size(); i += 2) zone.polygon.push_back({v[i], v[i + 1]});
        const size_t n = zone.polygon.size();
        if (n < 3) {
          *error = what + "a polygon needs at least 3 points, not " + std::to_string(n);
          return false;
        }
        if (n > kMaxZonePoints) {
          *error = what + "more than " + std::to_string(kMaxZonePoints) + " points";
          return false;
        }
        std::string why;
        if (!count_geometry::is_simple_polygon(zone.polygon, &why)) {
          *error = what + why;
          return false;
        }
        out.push_back(std::move(zone));
        return true;
      });
  if (ok) *zones = std::move(out);
  return ok;
}

}  // namespace cudanms
