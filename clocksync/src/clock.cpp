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

double FakeClockEntry::virtual_ns(double raw) const {
  const double change_at = static_cast<double>(change_at_ns);
  const double drifted = raw <= change_at ? raw * drift_ppm : change_at * drift_ppm + (raw - change_at) * later_drift_ppm;
  return static_cast<double>(offset_ns) + raw + drifted * 1e-6;
}

double FakeClockEntry::raw_ns(double virtual_reading) const {
  const double change_at = static_cast<double>(change_at_ns);
  if (virtual_reading <= virtual_ns(change_at))
    return (virtual_reading - static_cast<double>(offset_ns)) / (1 + drift_ppm * 1e-6);
  return change_at + (virtual_reading - virtual_ns(change_at)) / (1 + later_drift_ppm * 1e-6);
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
                   "' " + why +
                   " (expected rank:offset_ns:drift_ppm[:at_ns:later_drift_ppm], e.g. 1:+2500000000:+80)");
    };
    std::vector<std::string_view> fields;
    for (std::string_view rest = entry;;) {
      const size_t colon = rest.find(':');
      fields.push_back(rest.substr(0, colon));
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
    if (fields.size() != 3 && fields.size() != 5) throw bad("does not have three or five fields");
    auto number = [&](std::string_view text, auto& out, const char* what) {
      if (!text.empty() && text.front() == '+') text.remove_prefix(1);
      const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
      if (ec != std::errc() || ptr != text.data() + text.size()) throw bad(std::string("has a bad ") + what);
    };
    const auto drift = [&](std::string_view text, const char* what) {
      double ppm = 0;
      number(text, ppm, what);
      if (!std::isfinite(ppm) || std::fabs(ppm) > 1e5) throw bad(std::string("has a ") + what + " beyond 1e5 ppm");
      return ppm;
    };
    FakeClockEntry parsed{};
    number(fields[0], parsed.rank, "rank");
    number(fields[1], parsed.offset_ns, "offset");
    parsed.drift_ppm = parsed.later_drift_ppm = drift(fields[2], "drift");
    if (fields.size() == 5) {
      number(fields[3], parsed.change_at_ns, "time of the change");
      parsed.later_drift_ppm = drift(fields[4], "later drift");
    }
    if (parsed.rank < 0) throw bad("names a negative rank");
    entries.push_back(parsed);
  }
  return entries;
}

double injected_offset_ns(const std::vector<FakeClockEntry>& clocks, int32_t rank, int64_t local_ns) {
  if (rank == 0) return 0;  // exactly, where the round trip through doubles below would leave a rounding
  FakeClockEntry mine{rank, 0, 0}, root{0, 0, 0};
  for (const FakeClockEntry& e : clocks) {
    if (e.rank == rank) mine = e;
    if (e.rank == 0) root = e;
  }
  const double local = static_cast<double>(local_ns);
  return local - root.virtual_ns(mine.raw_ns(local));
}

namespace {
Clock g_process_clock;
}  // namespace

void set_process_clock(const Clock& clock) { g_process_clock = clock; }
const Clock& process_clock() { return g_process_clock; }
uint64_t process_clock_now() { return static_cast<uint64_t>(g_process_clock.now_ns()); }

Clock Clock::for_rank(int32_t rank, const BaseClock& base) {
  const char* spec = std::getenv(kFakeClockVariable);
  if (!spec) return Clock(base, {rank, 0, 0});
  for (const FakeClockEntry& entry : parse_fake_clock(spec)) {
    if (entry.rank == rank) return Clock(base, entry);
  }
  return Clock(base, {rank, 0, 0});
}

}  // namespace rankscope::clocksync
