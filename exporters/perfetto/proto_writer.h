// A minimal protobuf wire-format encoder for the Perfetto exporter: varints,
// fixed64, length-delimited fields and nested messages, appended to a byte
// buffer. Field numbers of the Perfetto messages it writes are in
// perfetto_fields below, transcribed from the upstream protos
// (docs/export.md); the tests hold golden bytes for them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace rankscope::export_detail {

enum class WireType : uint8_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2 };

namespace perfetto_fields {
// Trace
inline constexpr uint32_t kTracePacket = 1;
// TracePacket
inline constexpr uint32_t kTimestamp = 8;
inline constexpr uint32_t kTrustedPacketSequenceId = 10;
inline constexpr uint32_t kTrackEvent = 11;
inline constexpr uint32_t kInternedData = 12;
inline constexpr uint32_t kSequenceFlags = 13;
inline constexpr uint32_t kTracePacketDefaults = 59;
inline constexpr uint32_t kTrackDescriptor = 60;
inline constexpr uint64_t kSeqIncrementalStateCleared = 1;
inline constexpr uint64_t kSeqNeedsIncrementalState = 2;
// TracePacketDefaults
inline constexpr uint32_t kTrackEventDefaults = 11;
// TrackEventDefaults
inline constexpr uint32_t kDefaultTrackUuid = 11;
// TrackEvent
inline constexpr uint32_t kCategoryIids = 3;
inline constexpr uint32_t kDebugAnnotations = 4;
inline constexpr uint32_t kType = 9;
inline constexpr uint32_t kNameIid = 10;
inline constexpr uint32_t kTrackUuid = 11;
inline constexpr uint32_t kCategories = 22;
inline constexpr uint32_t kEventName = 23;
inline constexpr uint32_t kCounterValue = 30;
inline constexpr uint32_t kFlowIds = 47;  // fixed64
inline constexpr uint64_t kSliceBegin = 1, kSliceEnd = 2, kInstant = 3, kCounter = 4;
// DebugAnnotation
inline constexpr uint32_t kAnnotationNameIid = 1;
inline constexpr uint32_t kUintValue = 3;
inline constexpr uint32_t kIntValue = 4;
inline constexpr uint32_t kPointerValue = 7;
inline constexpr uint32_t kStringValueIid = 17;
// InternedData, and its entries (EventCategory, EventName,
// DebugAnnotationName and InternedString: iid 1, name or str 2)
inline constexpr uint32_t kEventCategories = 1;
inline constexpr uint32_t kEventNames = 2;
inline constexpr uint32_t kDebugAnnotationNames = 3;
inline constexpr uint32_t kDebugAnnotationStringValues = 29;
inline constexpr uint32_t kInternedIid = 1;
inline constexpr uint32_t kInternedName = 2;
// TrackDescriptor
inline constexpr uint32_t kUuid = 1;
inline constexpr uint32_t kName = 2;
inline constexpr uint32_t kProcess = 3;
inline constexpr uint32_t kThread = 4;
inline constexpr uint32_t kParentUuid = 5;
inline constexpr uint32_t kCounterDescriptor = 8;
// ProcessDescriptor
inline constexpr uint32_t kProcessPid = 1;
inline constexpr uint32_t kProcessName = 6;
inline constexpr uint32_t kProcessLabels = 8;
// ThreadDescriptor
inline constexpr uint32_t kThreadPid = 1;
inline constexpr uint32_t kThreadTid = 2;
inline constexpr uint32_t kThreadName = 5;
// CounterDescriptor
inline constexpr uint32_t kCounterUnit = 3;
inline constexpr uint64_t kUnitCount = 2, kUnitSizeBytes = 3;
}  // namespace perfetto_fields

// The one-byte tag of a field numbered below 16.
template <uint32_t Field, WireType Type>
constexpr uint8_t tag_byte() {
  static_assert(Field < 16, "fields from 16 on take a tag of two bytes or more");
  return static_cast<uint8_t>(Field << 3 | static_cast<uint8_t>(Type));
}

// Writes a varint at p without bounds checks; returns the byte after it.
inline uint8_t* put_varint(uint8_t* p, uint64_t value) {
  while (value >= 0x80) {
    *p++ = static_cast<uint8_t>(value | 0x80);
    value >>= 7;
  }
  *p++ = static_cast<uint8_t>(value);
  return p;
}

class ProtoWriter {
 public:
  ProtoWriter() { adopt(); }

  size_t size() const { return static_cast<size_t>(at_ - begin_); }
  const uint8_t* data() const { return begin_; }
  void clear() { at_ = begin_; }
  // The bytes written are storage()[0, size()). The storage may be swapped
  // for another buffer (of any size); call adopt() then, and writing starts over.
  std::string& storage() { return buffer_; }
  void adopt() {
    if (buffer_.size() < kInitialBytes) buffer_.resize(kInitialBytes);
    begin_ = at_ = reinterpret_cast<uint8_t*>(buffer_.data());
    end_ = begin_ + buffer_.size();
  }

  void varint(uint64_t value) {
    room(10);
    at_ = put_varint(at_, value);
  }

  // Unchecked writing, for small packets of a known shape: reserve(n) gives
  // room for n bytes; the caller writes them and hands back the end.
  uint8_t* reserve(size_t n) {
    room(n);
    return at_;
  }
  void commit(uint8_t* end) { at_ = end; }
  void tag(uint32_t field, WireType type) { varint(uint64_t{field} << 3 | static_cast<uint8_t>(type)); }
  void varint_field(uint32_t field, uint64_t value) {
    tag(field, WireType::kVarint);
    varint(value);
  }
  // int32 and int64 fields: negative values take ten bytes, as protobuf sends them.
  void int_field(uint32_t field, int64_t value) { varint_field(field, static_cast<uint64_t>(value)); }
  void fixed64_field(uint32_t field, uint64_t value) {
    tag(field, WireType::kFixed64);
    room(8);
    for (int i = 0; i < 8; ++i) *at_++ = static_cast<uint8_t>(value >> (8 * i));
  }
  void bytes_field(uint32_t field, std::string_view bytes) {
    tag(field, WireType::kLengthDelimited);
    varint(bytes.size());
    room(bytes.size());
    std::memcpy(at_, bytes.data(), bytes.size());
    at_ += bytes.size();
  }

  // A nested message: begin() writes its tag and one byte for its length,
  // which end() fills in; the rare message of 128 bytes or more is moved up
  // to make room for a longer length.
  size_t begin(uint32_t field) {
    tag(field, WireType::kLengthDelimited);
    room(1);
    ++at_;
    return size() - 1;
  }
  void end(size_t length_at) {
    const size_t length = size() - length_at - 1;
    if (length < 0x80) {
      begin_[length_at] = static_cast<uint8_t>(length);
      return;
    }
    size_t extra = 0;
    for (size_t rest = length >> 7; rest != 0; rest >>= 7) ++extra;
    room(extra);
    std::memmove(begin_ + length_at + 1 + extra, begin_ + length_at + 1, length);
    uint8_t* p = begin_ + length_at;
    uint64_t value = length;
    while (value >= 0x80) {
      *p++ = static_cast<uint8_t>(value | 0x80);
      value >>= 7;
    }
    *p = static_cast<uint8_t>(value);
    at_ += extra;
  }

 private:
  static constexpr size_t kInitialBytes = 1 << 16;

  void room(size_t n) {
    if (static_cast<size_t>(end_ - at_) < n) grow(n);
  }
  [[gnu::noinline]] void grow(size_t n) {
    const size_t used = size();
    buffer_.resize(std::max(buffer_.size() * 2, used + n));
    begin_ = reinterpret_cast<uint8_t*>(buffer_.data());
    at_ = begin_ + used;
    end_ = begin_ + buffer_.size();
  }

  std::string buffer_;
  uint8_t* begin_ = nullptr;
  uint8_t* at_ = nullptr;
  uint8_t* end_ = nullptr;
};

}  // namespace rankscope::export_detail
