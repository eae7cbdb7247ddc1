// Quantities as people read them, the same in every report format and in
// the analyses' sentences: durations, sizes, shares and rates with about
// three significant digits and a unit chosen for the magnitude.
#pragma once

#include <string>

#include "rankscope/model/text.h"

namespace rankscope {

// `decimals` digits after the point, trailing zeros dropped: 25.0 -> "25".
std::string trimmed(double value, int decimals);
// About three significant digits: 1234 -> "1234", 12.34 -> "12.3", 1.234 -> "1.23".
std::string significant(double value);

// 950 -> "950 ns", 1.5e6 -> "1.5 ms", 2e9 -> "2 s"; "—" for NaN or INT64_MIN (analysis::kUnknown).
std::string format_duration(double ns);
// 1536 -> "1.5 KiB", binary units up to TiB.
std::string format_bytes(double bytes);
// A percentage (already times 100), one decimal: 33.33 -> "33.3 %"; "—" when not finite.
std::string format_percent(double percent);
// Gigabytes (10^9) per second: "12.3 GB/s"; "—" when not finite.
std::string format_bandwidth(double gigabytes_per_second);

}  // namespace rankscope
