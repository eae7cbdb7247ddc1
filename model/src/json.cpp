#include "rankscope/model/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace rankscope {

void JsonWriter::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_ += ',';
    first_.back() = false;
  }
}

JsonWriter& JsonWriter::begin_object() {
  separate();
  out_ += '{';
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  out_ += '}';
  first_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  separate();
  out_ += '[';
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  out_ += ']';
  first_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view name) {
  value(name);
  out_ += ':';
  after_key_ = true;
  return *this;
}

namespace {

// How a character is written inside a JSON string; nullptr: as itself.
const char* escape_of(char c) {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: return nullptr;
  }
}

}  // namespace

JsonWriter& JsonWriter::value(std::string_view text) {
  separate();
  out_ += '"';
  // Runs of characters written as themselves are appended whole.
  size_t run = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char* escaped = escape_of(c);
    if (!escaped && static_cast<unsigned char>(c) >= 0x20) continue;
    out_.append(text.data() + run, i - run);
    run = i + 1;
    if (escaped) {
      out_ += escaped;
    } else {
      char code[8];
      std::snprintf(code, sizeof(code), "\\u%04x", c);
      out_ += code;
    }
  }
  out_.append(text.data() + run, text.size() - run);
  out_ += '"';
  return *this;
}

template <typename Number, typename... Format>
void JsonWriter::append_number(Number number, Format... format) {
  separate();
  char text[32];
  const std::to_chars_result written = std::to_chars(text, text + sizeof(text), number, format...);
  out_.append(text, written.ptr);
}

JsonWriter& JsonWriter::value(int64_t number) {
  append_number(number);
  return *this;
}

JsonWriter& JsonWriter::value(uint64_t number) {
  append_number(number);
  return *this;
}

JsonWriter& JsonWriter::value(double number) {
  if (!std::isfinite(number)) return null();
  // As printf's %.17g: every double read back as itself.
  append_number(number, std::chars_format::general, 17);
  return *this;
}

JsonWriter& JsonWriter::value(bool flag) {
  separate();
  out_ += flag ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::null() {
  separate();
  out_ += "null";
  return *this;
}

}  // namespace rankscope
