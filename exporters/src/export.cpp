#include "rankscope/exporters/export.h"

#include <algorithm>
#include <chrono>

#include "export_output.h"
#include "export_plan.h"
#include "export_writers.h"
#include "rankscope/model/error.h"
#include "rankscope/model/text.h"

namespace rankscope {
namespace {

// "1.5ms" -> 1500000; digits with an optional fraction and unit (default ns).
bool parse_duration_ns(std::string_view text, int64_t& ns) {
  struct Unit {
    std::string_view suffix;
    int64_t ns;
  };
  static constexpr Unit kUnits[] = {{"ns", 1}, {"us", 1'000}, {"ms", 1'000'000}, {"s", 1'000'000'000}};
  int64_t scale = 1;
  for (const Unit& unit : kUnits) {  // "ns", "us" and "ms" before "s"
    if (text.size() > unit.suffix.size() && text.ends_with(unit.suffix)) {
      scale = unit.ns;
      text.remove_suffix(unit.suffix.size());
      break;
    }
  }
  const size_t dot = text.find('.');
  const auto whole = parse_integer<uint64_t>(text.substr(0, dot));
  if (!whole || *whole > static_cast<uint64_t>(INT64_MAX / scale)) return false;
  ns = static_cast<int64_t>(*whole) * scale;
  if (dot == std::string_view::npos) return true;
  const std::string_view fraction = text.substr(dot + 1);
  if (fraction.empty() || fraction.size() > 9) return false;
  const auto fraction_digits = parse_integer<uint64_t>(fraction);
  if (!fraction_digits) return false;
  const uint64_t digits = *fraction_digits;
  int64_t denominator = 1;
  for (size_t i = 0; i < fraction.size(); ++i) denominator *= 10;
  // Rounded to the nearest nanosecond; digits < 10^9 and scale <= 10^9 keep this below 2^63.
  const auto part = static_cast<int64_t>((digits * static_cast<uint64_t>(scale) * 2 + static_cast<uint64_t>(denominator)) /
                                         (2 * static_cast<uint64_t>(denominator)));
  if (ns > INT64_MAX - part) return false;
  ns += part;
  return true;
}

TimeBound parse_time_bound(std::string_view text, std::string_view whole) {
  TimeBound bound;
  if (text.empty()) return bound;
  bool negative = false;
  if (text.front() == '+') {
    bound.kind = TimeBound::Kind::kFromJobStart;
    text.remove_prefix(1);
  } else {
    bound.kind = TimeBound::Kind::kAbsolute;
    negative = text.front() == '-';
    if (negative) text.remove_prefix(1);
  }
  if (!parse_duration_ns(text, bound.ns)) {
    throw Error("--time: '" + std::string(whole) +
                "' is not START:END (each empty, nanoseconds on the timeline, or +N with a unit ns, us, ms or s "
                "from the job's first event; e.g. +1.5s:+2s)");
  }
  if (negative) bound.ns = -bound.ns;
  return bound;
}

}  // namespace

const char* export_format_name(ExportFormat format) {
  switch (format) {
    case ExportFormat::kPerfetto: return "perfetto";
    case ExportFormat::kChromeJson: return "chrome-json";
    case ExportFormat::kKineto: return "kineto";
    case ExportFormat::kOtf2: return "otf2";
  }
  return "";
}

bool export_writes_folder(ExportFormat format) {
  return format == ExportFormat::kKineto || format == ExportFormat::kOtf2;
}

TimeSelection parse_time_selection(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos || text.find(':', colon + 1) != std::string_view::npos) {
    throw Error("--time: '" + std::string(text) + "' is not START:END (e.g. +1.5s:+2s, or 5000000:9000000 in ns)");
  }
  return {parse_time_bound(text.substr(0, colon), text), parse_time_bound(text.substr(colon + 1), text)};
}

ExportResult export_timeline(const Timeline& timeline, ExportFormat format, const std::string& output,
                             const ExportOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const export_detail::Plan plan = export_detail::make_plan(timeline, options);
  ExportResult result;
  result.format = format;
  result.output = output;
  result.window_begin_ns = plan.selection.begin_ns;
  result.window_end_ns = plan.selection.end_ns;
  for (const export_detail::RankPlan& rank : plan.ranks) result.ranks.push_back(rank.rank);
  result.estimated_bytes = export_detail::estimate_bytes(plan, format);
  if (result.estimated_bytes > options.warn_bytes && options.warn) {
    options.warn(export_detail::size_warning(plan, format, result.estimated_bytes, options.warn_bytes));
  }
  export_detail::Written written;
  if (export_writes_folder(format)) {
    export_detail::OutputFolder out(output, options.replace_output);
    written = format == ExportFormat::kKineto ? export_detail::write_kineto(timeline, plan, out)
                                              : export_detail::write_otf2(timeline, plan, out);
    out.commit();
    result.bytes = out.bytes();
  } else {
    export_detail::OutputFile out(output, options.replace_output);
    written = format == ExportFormat::kPerfetto ? export_detail::write_perfetto(timeline, plan, out)
                                                : export_detail::write_chrome_json(timeline, plan, out);
    out.commit();
    result.bytes = out.bytes();
  }
  result.counts = written.counts;
  result.events_read = plan.events_read + written.events_read;
  result.events_written = written.events_written;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace rankscope
