// JSON text for the JSON writers (Chrome trace events, Kineto traces):
// strings that always parse, and times in µs that keep every nanosecond.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace rankscope::export_detail {

// Appends `text` as the inside of a JSON string; bytes that are not valid
// UTF-8 become U+FFFD, so the output always parses.
inline void append_escaped(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20) {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 15];
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else {
      const size_t length = c >= 0xF0 && c < 0xF5 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
      bool valid = length > 0 && i + length <= text.size();
      for (size_t k = 1; valid && k < length; ++k) valid = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
      if (valid) {
        out.append(text.substr(i, length));
        i += length;
      } else {
        out += "\xEF\xBF\xBD";
        ++i;
      }
    }
  }
}

template <typename Integer>
void append_number(std::string& out, Integer value) {
  char text[24];
  out.append(text, std::to_chars(text, text + sizeof(text), value).ptr);
}

// Nanoseconds as microseconds with exactly three decimals.
inline void append_microseconds(std::string& out, int64_t ns) {
  if (ns < 0) {
    out += '-';
    ns = -ns;
  }
  append_number(out, ns / 1000);
  const auto fraction = static_cast<int>(ns % 1000);
  const char digits[4] = {'.', static_cast<char>('0' + fraction / 100), static_cast<char>('0' + fraction / 10 % 10),
                          static_cast<char>('0' + fraction % 10)};
  out.append(digits, 4);
}

}  // namespace rankscope::export_detail
