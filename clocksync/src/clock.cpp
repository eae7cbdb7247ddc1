#include <time.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

#include "rankscope/clocksync/clock.h"
#include "rankscope/model/error.h"

namespace rankscope::clocksync {

int64_t raw_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int64_t wall_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::vector<FakeClockEntry> parse_fake_clock(std::string_view spec) {
  std::vector<FakeClockEntry> entries;
  size_t index = 0;
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view entry = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    ++index;
    const auto bad = [&](const std::string& why) {
      return Error(std::string(kFakeClockVariable) + ": entry " + std::to_string(index) + " '" + std::string(entry) +
                   "' " + why + " (expected rank:offset_ns:drift_ppm, e.g. 1:+2500000000:+80)");
    };
    const size_t first = entry.find(':');
    const size_t second = first == std::string_view::npos ? first : entry.find(':', first + 1);
    if (second == std::string_view::npos) throw bad("does not have three fields");
    auto number = [&](std::string_view text, auto& out, const char* what) {
      if (!text.empty() && text.front() == '+') text.remove_prefix(1);
      const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
      if (ec != std::errc() || ptr != text.data() + text.size()) throw bad(std::string("has a bad ") + what);
    };
    FakeClockEntry parsed{};
    number(entry.substr(0, first), parsed.rank, "rank");
    number(entry.substr(first + 1, second - first - 1), parsed.offset_ns, "offset");
    number(entry.substr(second + 1), parsed.drift_ppm, "drift");
    if (parsed.rank < 0) throw bad("names a negative rank");
    if (!std::isfinite(parsed.drift_ppm) || std::fabs(parsed.drift_ppm) > 1e5) throw bad("has a drift beyond 1e5 ppm");
    entries.push_back(parsed);
  }
  return entries;
}

double injected_offset_ns(const std::vector<FakeClockEntry>& clocks, int32_t rank, int64_t local_ns) {
  FakeClockEntry mine{rank, 0, 0}, root{0, 0, 0};
  for (const FakeClockEntry& e : clocks) {
    if (e.rank == rank) mine = e;
    if (e.rank == 0) root = e;
  }
  const double raw = (static_cast<double>(local_ns) - static_cast<double>(mine.offset_ns)) / (1 + mine.drift_ppm * 1e-6);
  const double reference = static_cast<double>(root.offset_ns) + raw * (1 + root.drift_ppm * 1e-6);
  return static_cast<double>(local_ns) - reference;
}

namespace {
Clock g_process_clock;
}  // namespace

void set_process_clock(const Clock& clock) { g_process_clock = clock; }
const Clock& process_clock() { return g_process_clock; }
uint64_t process_clock_now() { return static_cast<uint64_t>(g_process_clock.now_ns()); }

Clock Clock::for_rank(int32_t rank, const BaseClock& base) {
  const char* spec = std::getenv(kFakeClockVariable);
  if (!spec) return Clock(base, 0, 0);
  for (const FakeClockEntry& entry : parse_fake_clock(spec)) {
    if (entry.rank == rank) return Clock(base, entry.offset_ns, entry.drift_ppm);
  }
  return Clock(base, 0, 0);
}

}  // namespace rankscope::clocksync
