// Values packed into bytes and read back, for what the processes of a report
// exchange (work_share.h). All of them run the same build: plain values
// travel as they lie in memory. A record's fields are listed once, in a
// function template over BytesOut and BytesIn, so that packing and reading
// cannot disagree.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "rankscope/model/error.h"

namespace rankscope::analysis {

template <typename T>
inline constexpr bool kIsVector = false;
template <typename T>
inline constexpr bool kIsVector<std::vector<T>> = true;
template <typename T>
inline constexpr bool kIsPair = false;
template <typename A, typename B>
inline constexpr bool kIsPair<std::pair<A, B>> = true;

class BytesOut {
 public:
  explicit BytesOut(std::string& out) : out_(out) {}

  // A plain value, a string, a pair or a vector of them.
  template <typename T>
  void field(const T& value) {
    if constexpr (kIsVector<T>) {
      field<uint64_t>(value.size());
      if constexpr (std::is_trivially_copyable_v<typename T::value_type>) {
        if (!value.empty()) out_.append(reinterpret_cast<const char*>(value.data()), value.size() * sizeof(value[0]));
      } else {
        for (const auto& item : value) field(item);
      }
    } else if constexpr (kIsPair<T>) {
      field(value.first);
      field(value.second);
    } else if constexpr (std::is_same_v<T, std::string>) {
      field<uint64_t>(value.size());
      out_.append(value);
    } else {
      static_assert(std::is_trivially_copyable_v<T>);
      out_.append(reinterpret_cast<const char*>(&value), sizeof(T));
    }
  }

 private:
  std::string& out_;
};

class BytesIn {
 public:
  explicit BytesIn(std::string_view in) : in_(in) {}

  template <typename T>
  void field(T& value) {
    if constexpr (kIsVector<T>) {
      const auto count = get<uint64_t>();
      if (count > in_.size() - at_) short_record();  // every item takes a byte at least
      value.resize(count);
      if constexpr (std::is_trivially_copyable_v<typename T::value_type>) {
        if (count > 0) std::memcpy(value.data(), take(count * sizeof(value[0])), count * sizeof(value[0]));
      } else {
        for (auto& item : value) field(item);
      }
    } else if constexpr (kIsPair<T>) {
      field(value.first);
      field(value.second);
    } else if constexpr (std::is_same_v<T, std::string>) {
      const auto size = get<uint64_t>();
      value.assign(take(size), size);
    } else {
      static_assert(std::is_trivially_copyable_v<T>);
      std::memcpy(&value, take(sizeof(T)), sizeof(T));
    }
  }
  template <typename T>
  T get() {
    T value;
    field(value);
    return value;
  }

 private:
  const char* take(size_t bytes) {
    if (bytes > in_.size() - at_) short_record();
    const char* at = in_.data() + at_;
    at_ += bytes;
    return at;
  }
  [[noreturn]] static void short_record() {
    throw Error("a report process sent a record shorter than its contents (processes of different builds?)");
  }

  std::string_view in_;
  size_t at_ = 0;
};

}  // namespace rankscope::analysis
