// A small streaming JSON writer for the CLI's machine-readable outputs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rankscope {

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view name);
  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(int64_t number);
  JsonWriter& value(uint64_t number);
  JsonWriter& value(int32_t number) { return value(int64_t{number}); }
  JsonWriter& value(double number);
  JsonWriter& value(bool flag);
  JsonWriter& null();
  // `name`: the figure; or, where `unmeasured` says why it is not known,
  // `name`: null and `name_reason`: why. Never a 0 that was not measured.
  template <typename Number>
  JsonWriter& figure(std::string_view name, Number number, std::string_view unmeasured) {
    key(name);
    if (unmeasured.empty()) return value(number);
    null();
    return key(std::string(name) + "_reason").value(unmeasured);
  }

  const std::string& str() const { return out_; }

 private:
  void separate();
  template <typename Number, typename... Format>
  void append_number(Number number, Format... format);
  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

}  // namespace rankscope
