#include "rankscope/model/text.h"

#include <time.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "rankscope/model/error.h"

namespace rankscope {

std::string printf_string(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list measure;
  va_copy(measure, args);
  const int length = std::vsnprintf(nullptr, 0, format, measure);
  va_end(measure);
  std::string out(static_cast<size_t>(std::max(length, 0)), '\0');
  std::vsnprintf(out.data(), out.size() + 1, format, args);
  va_end(args);
  return out;
}

std::vector<int32_t> parse_rank_list(std::string_view text, std::string_view what) {
  const std::string prefix = what.empty() ? std::string() : std::string(what) + ": ";
  const auto bad = [&] { return Error(prefix + "'" + std::string(text) + "' is not a list of ranks like 0-3,8"); };
  std::vector<int32_t> ranks;
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const size_t dash = item.find('-');
    const auto first = parse_integer<uint64_t>(item.substr(0, dash));
    const auto last = dash == std::string_view::npos ? first : parse_integer<uint64_t>(item.substr(dash + 1));
    if (!first || !last || *last < *first || *last > INT32_MAX) throw bad();
    if (*last - *first >= (uint64_t{1} << 24)) {
      throw Error(prefix + "the range '" + std::string(item) + "' is too long");
    }
    for (uint64_t r = *first; r <= *last; ++r) ranks.push_back(static_cast<int32_t>(r));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

std::string format_rank_list(const std::vector<int32_t>& ranks) {
  if (ranks.empty()) return "none";
  std::string text;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!text.empty()) text += ',';
    if (j - i >= 2) {
      text += std::to_string(ranks[i]) + "-" + std::to_string(ranks[j]);
      i = j + 1;
    } else {
      text += std::to_string(ranks[i]);
      ++i;
    }
  }
  return text;
}

std::string gpu_uuid_text(const char* prefix, const char* bytes) {
  std::string text = prefix;
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    std::snprintf(hex, sizeof(hex), "%02x", static_cast<unsigned char>(bytes[i]));
    text += hex;
  }
  return text;
}

std::string format_utc_time(int64_t ns_since_epoch) {
  // Floored, so that a time before the epoch keeps a fraction in 0..1 s.
  int64_t seconds = ns_since_epoch / 1'000'000'000, fraction = ns_since_epoch % 1'000'000'000;
  if (fraction < 0) {
    seconds -= 1;
    fraction += 1'000'000'000;
  }
  const time_t whole = static_cast<time_t>(seconds);
  tm utc{};
  gmtime_r(&whole, &utc);
  char text[64];
  std::snprintf(text, sizeof(text), "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", utc.tm_year + 1900, utc.tm_mon + 1,
                utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<long long>(fraction));
  return text;
}

std::string signal_name(int signal_number) {
  const char* abbreviation = sigabbrev_np(signal_number);
  return abbreviation ? "SIG" + std::string(abbreviation) : "signal " + std::to_string(signal_number);
}

}  // namespace rankscope
