// The base clocks under every event clock: the TSC's calibration against
// CLOCK_MONOTONIC_RAW, the calibration file the processes of one machine
// share, and which base clock a process runs. Background: docs/design/clock-sync.md,
// "The local clock".
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include "rankscope/clocksync/clock.h"
#include "rankscope/model/error.h"

namespace rankscope::clocksync {
namespace {

// A calibration agrees with CLOCK_MONOTONIC_RAW while their difference stays
// within kAgreementSlackNs plus this rate error times the calibration's age.
// A 20 ms calibration is good to about 0.05 ppm, so only a counter that was
// reset or changed rate (a suspend, another machine's calibration) exceeds it.
constexpr double kMaxRateErrorPpm = 2.0;
constexpr int64_t kAgreementSlackNs = 1'000'000;

#if defined(__x86_64__)
// One (counter, CLOCK_MONOTONIC_RAW) pair. The clock read lies somewhere in
// its (counter, clock, counter) bracket; of many brackets the narrowest was
// least disturbed (by an interrupt, a preemption), and its middle is taken.
struct Anchor {
  uint64_t tsc;
  int64_t ns;
};

Anchor anchor() {
  constexpr int kBrackets = 256;  // about 10 µs
  Anchor best{0, 0};
  uint64_t narrowest = UINT64_MAX;
  for (int i = 0; i < kBrackets; ++i) {
    const uint64_t before = read_tsc_ordered();
    const int64_t ns = raw_now_ns();
    const uint64_t after = read_tsc_ordered();
    if (after - before < narrowest) {
      narrowest = after - before;
      best = {before + narrowest / 2, ns};
    }
  }
  return best;
}

bool agrees_with_raw_clock(const TscCalibration& calibration) {
  const Anchor now = anchor();
  const int64_t age_ns = now.ns - calibration.base_ns;
  if (age_ns < 0) return false;
  const double allowed_ns = static_cast<double>(kAgreementSlackNs) + static_cast<double>(age_ns) * kMaxRateErrorPpm * 1e-6;
  return std::fabs(static_cast<double>(calibration.ns_at(now.tsc) - now.ns)) <= allowed_ns;
}
#else
bool agrees_with_raw_clock(const TscCalibration&) { return false; }
#endif

// The calibration in the file at `path`, if this user wrote it (nobody else
// could have changed it since), it parses, and it still agrees with CLOCK_MONOTONIC_RAW.
std::optional<TscCalibration> read_calibration_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  struct stat status {};
  const bool trusted = ::fstat(fd, &status) == 0 && S_ISREG(status.st_mode) && status.st_uid == ::geteuid() &&
                       (status.st_mode & (S_IWGRP | S_IWOTH)) == 0;
  char text[128];
  const ssize_t length = trusted ? ::read(fd, text, sizeof(text)) : -1;
  ::close(fd);
  if (length <= 0) return std::nullopt;
  std::string_view line(text, static_cast<size_t>(length));
  if (line.back() == '\n') line.remove_suffix(1);
  try {
    const BaseClock base = BaseClock::parse(line);
    if (base.uses_tsc() && agrees_with_raw_clock(base.tsc())) return base.tsc();
  } catch (const Error&) {
  }
  return std::nullopt;
}

// Publishes `mine` at `path` unless another process got there first, and
// returns what is at `path` then. The file is written whole under a name of
// its own and linked into place, so that no reader ever sees half of it.
TscCalibration publish(const std::string& path, const TscCalibration& mine) {
  const std::string own_name = path + "." + std::to_string(::getpid());
  const int fd = ::open(own_name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return mine;  // no /dev/shm, or not writable: this process keeps its own
  const std::string line = BaseClock(mine).text() + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  TscCalibration chosen = mine;
  if (written && ::link(own_name.c_str(), path.c_str()) != 0 && errno == EEXIST) {
    if (const auto theirs = read_calibration_file(path)) {
      chosen = *theirs;  // another process published first
    } else {
      // What is there is stale or not this user's; replacing the latter
      // fails in /dev/shm (sticky), and this process then keeps its own.
      ::rename(own_name.c_str(), path.c_str());
    }
  }
  ::unlink(own_name.c_str());
  return chosen;
}

std::string first_line_starting(const char* path, std::string_view prefix) {
  std::ifstream file(path);
  for (std::string line; std::getline(file, line);) {
    if (line.starts_with(prefix)) return line;
  }
  return {};
}

bool has_flag(std::string_view flags, std::string_view flag) {
  for (size_t begin = 0; begin < flags.size();) {
    const size_t end = std::min(flags.find_first_of(" \t\n", begin), flags.size());
    if (flags.substr(begin, end - begin) == flag) return true;
    begin = end + 1;
  }
  return false;
}

uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ull;
  x ^= x >> 27;
  x *= 0x81dadef4bc2dd44dull;
  return x ^ (x >> 33);
}

}  // namespace

TscCalibration calibrate_tsc(int64_t window_ns) {
#if defined(__x86_64__)
  const Anchor first = anchor();
  timespec pause{static_cast<time_t>(window_ns / 1'000'000'000), static_cast<long>(window_ns % 1'000'000'000)};
  while (::nanosleep(&pause, &pause) != 0 && errno == EINTR) {
  }
  const Anchor last = anchor();
  if (last.tsc <= first.tsc || last.ns <= first.ns) {
    throw Error("the time-stamp counter did not advance with CLOCK_MONOTONIC_RAW");
  }
  const double ns_per_tick = static_cast<double>(last.ns - first.ns) / static_cast<double>(last.tsc - first.tsc);
  return {last.tsc, last.ns, static_cast<uint64_t>(std::llround(std::ldexp(ns_per_tick, 32)))};
#else
  (void)window_ns;
  throw Error("this CPU has no time-stamp counter");
#endif
}

bool tsc_is_invariant(std::string_view cpu_flags, std::string_view clocksource) {
  while (!clocksource.empty() && (clocksource.back() == '\n' || clocksource.back() == ' ')) clocksource.remove_suffix(1);
  return has_flag(cpu_flags, "constant_tsc") && has_flag(cpu_flags, "nonstop_tsc") && has_flag(cpu_flags, "rdtscp") &&
         clocksource == "tsc";
}

TscCalibration node_tsc_calibration(const std::string& path) {
  if (path.empty()) return calibrate_tsc();
  if (const auto shared = read_calibration_file(path)) return *shared;
  return publish(path, calibrate_tsc());
}

std::string node_tsc_calibration_path() {
  if (const char* path = std::getenv(kClockFileVariable)) return path;
  return "/dev/shm/rankscope-tsc-" + std::to_string(::geteuid());
}

std::string BaseClock::text() const {
  if (!uses_tsc()) return "raw";
  char text[96];
  std::snprintf(text, sizeof(text), "tsc:%llu:%lld:%llu", static_cast<unsigned long long>(tsc_.base_tsc),
                static_cast<long long>(tsc_.base_ns), static_cast<unsigned long long>(tsc_.ns_per_tick_q32));
  return text;
}

BaseClock BaseClock::parse(std::string_view text) {
  if (text == "raw") return BaseClock();
  const auto bad = [&](const char* why) {
    return Error("clock base '" + std::string(text) + "' " + why +
                 " (expected raw or tsc:BASE_TSC:BASE_NS:NS_PER_TICK_Q32)");
  };
  if (!text.starts_with("tsc:")) throw bad("is neither raw nor tsc");
#if !defined(__x86_64__)
  throw bad("names the time-stamp counter, which this CPU does not have");
#endif
  std::string_view rest = text.substr(4);
  const auto field = [&](auto& out) {
    const size_t colon = rest.find(':');
    const std::string_view digits = rest.substr(0, colon);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
    if (ec != std::errc() || end != digits.data() + digits.size()) throw bad("has a bad field");
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    return colon != std::string_view::npos;
  };
  TscCalibration tsc;
  if (!field(tsc.base_tsc) || !field(tsc.base_ns) || field(tsc.ns_per_tick_q32)) throw bad("does not have three fields");
  if (tsc.ns_per_tick_q32 == 0) throw bad("has no rate");
  return BaseClock(tsc);
}

uint64_t BaseClock::identity() const {
  if (!uses_tsc()) return 1;
  return mix(tsc_.base_tsc ^ mix(static_cast<uint64_t>(tsc_.base_ns) ^ mix(tsc_.ns_per_tick_q32)));
}

BaseClock BaseClock::from_environment() {
  if (const char* handed = std::getenv(kClockBaseVariable); handed && *handed) {
    try {
      return parse(handed);
    } catch (const Error& e) {
      throw Error(std::string(kClockBaseVariable) + ": " + e.what());
    }
  }
  const char* requested = std::getenv(kClockVariable);
  const std::string_view mode = requested && *requested ? requested : "auto";
  if (mode == "raw") return BaseClock();
  if (mode != "auto" && mode != "tsc") {
    throw Error(std::string(kClockVariable) + "='" + std::string(mode) + "' is not auto, tsc or raw");
  }
  const std::string flags = first_line_starting("/proc/cpuinfo", "flags");
  std::ifstream clocksource_file("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string clocksource;
  std::getline(clocksource_file, clocksource);
  if (mode == "auto") {
    if (!tsc_is_invariant(flags, clocksource)) return BaseClock();
    try {
      return BaseClock(node_tsc_calibration(node_tsc_calibration_path()));
    } catch (const Error&) {
      return BaseClock();  // a counter that does not advance is no clock; auto promised only a working one
    }
  }
#if defined(__x86_64__)
  if (!has_flag(flags, "rdtscp")) {
    throw Error(std::string(kClockVariable) + "=tsc, but this CPU cannot read its time-stamp counter in order (no rdtscp)");
  }
  return BaseClock(node_tsc_calibration(node_tsc_calibration_path()));
#else
  throw Error(std::string(kClockVariable) + "=tsc, but this CPU has no time-stamp counter");
#endif
}

const BaseClock& process_base_clock() {
  static const BaseClock chosen = BaseClock::from_environment();
  return chosen;
}

}  // namespace rankscope::clocksync
