// Small pieces of text that several commands and the agent read or write:
// integers, environment variables, rank lists. One home each, so that every
// reader accepts and every writer prints the same forms.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace rankscope {

// The whole of `text` as a decimal integer of type Int; nothing when it is
// empty, has anything else in it, or does not fit.
template <typename Int>
std::optional<Int> parse_integer(std::string_view text) {
  Int value{};
  if (text.empty()) return std::nullopt;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// An environment variable holding an integer; `fallback` when it is unset,
// empty or not an integer of type Int. Safe before main (no allocation).
template <typename Int>
Int env_integer(const char* name, Int fallback) {
  const char* text = std::getenv(name);
  if (!text) return fallback;
  return parse_integer<Int>(text).value_or(fallback);
}

// "0-3,8" -> 0 1 2 3 8, sorted, without repeats; throws Error quoting the
// text, prefixed with `what` (the option or variable it came from), if any.
std::vector<int32_t> parse_rank_list(std::string_view text, std::string_view what = "--ranks");

// The inverse, for people: runs of three or more as "A-B", the rest one by
// one, comma-separated ("0-3,8"; "none" for no ranks). What it prints,
// parse_rank_list reads.
std::string format_rank_list(const std::vector<int32_t>& ranks);

// A signal as people know it: "SIGSEGV"; "signal 40" for one without a name.
std::string signal_name(int signal_number);

// printf into a std::string.
std::string printf_string(const char* format, ...) __attribute__((format(printf, 1, 2)));

// A wall-clock time (ns since the epoch) as ISO 8601 in UTC, to the ns:
// "2024-05-22T17:15:22.123456789Z".
std::string format_utc_time(int64_t ns_since_epoch);

// A GPU's 16-byte UUID as nvidia-smi prints it: PREFIX then
// xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (PREFIX "GPU-", or "MIG-" for a MIG instance).
std::string gpu_uuid_text(const char* prefix, const char* bytes);

}  // namespace rankscope
