#include "rankscope/model/format.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace rankscope {

std::string trimmed(double value, int decimals) {
  std::string text = printf_string("%.*f", decimals, value);
  if (text.find('.') != std::string::npos) {
    text.erase(text.find_last_not_of('0') + 1);
    if (text.back() == '.') text.pop_back();
  }
  return text == "-0" ? "0" : text;
}

std::string significant(double value) {
  const double magnitude = std::fabs(value);
  return trimmed(value, magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : 2);
}

std::string format_duration(double ns) {
  if (std::isnan(ns) || ns == static_cast<double>(INT64_MIN)) return "—";
  const double magnitude = std::fabs(ns);
  if (magnitude < 1e3) return significant(ns) + " ns";
  if (magnitude < 1e6) return significant(ns / 1e3) + " µs";
  if (magnitude < 1e9) return significant(ns / 1e6) + " ms";
  return significant(ns / 1e9) + " s";
}

std::string format_bytes(double bytes) {
  static constexpr std::array<const char*, 5> kUnits = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t unit = 0;
  while (std::fabs(bytes) >= 1024 && unit + 1 < kUnits.size()) {
    bytes /= 1024;
    ++unit;
  }
  return significant(bytes) + " " + kUnits[unit];
}

std::string format_percent(double percent) { return std::isfinite(percent) ? trimmed(percent, 1) + " %" : "—"; }

std::string format_bandwidth(double gigabytes_per_second) {
  return std::isfinite(gigabytes_per_second) ? significant(gigabytes_per_second) + " GB/s" : "—";
}

}  // namespace rankscope
