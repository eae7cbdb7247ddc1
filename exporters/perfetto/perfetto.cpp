// Native Perfetto protobuf (TrackEvent), written with our own encoder
// (proto_writer.h). One packet sequence per rank: its first packet clears
// the sequence's state, interns the argument names and makes the rank's
// busiest lane the default track; event names, categories (the event kinds)
// and enum texts are interned on first use.
// Timestamps are the timeline's nanoseconds, with no clock id, so viewers
// show the corrected timeline as it is. Layout: docs/export.md.
#include <array>
#include <span>

#include "export_arguments.h"
#include "export_walk.h"
#include "export_writers.h"
#include "proto_writer.h"

namespace rankscope::export_detail {
namespace {

namespace field = perfetto_fields;

// Bytes buffered before a write to the file.
constexpr size_t kWriteBytes = size_t{8} << 20;
// The most a slice end, counter sample or event without arguments takes:
// packet tag and length 2, timestamp 11, sequence 6, flags 2, TrackEvent tag
// and length 2, type 2, track 11, then value 12, or name 6 and category 2.
constexpr size_t kSmallPacketBytes = 48;
static_assert(kSmallPacketBytes < 0x80, "its lengths take one byte");

// One argument of the event being written.
struct Argument {
  Arg arg;
  ArgValue value;
};

// Kinds are categories, interned by their value; 0 is not a valid iid.
bool known_kind(EventKind kind) {
  return static_cast<int>(kind) >= 1 && static_cast<int>(kind) <= kEventKindCount;
}

class PerfettoSink {
 public:
  PerfettoSink(const Timeline& timeline, OutputFile& out)
      : strings_(timeline.strings()), out_(out), names_interned_on_(strings_.size(), 0) {}

  void begin_rank(const RankOut& rank) {
    default_lane_ = rank.default_lane;
    size_t packet = begin_packet(rank.first_ns, rank.sequence);
    w_.varint_field(field::kSequenceFlags, field::kSeqIncrementalStateCleared | field::kSeqNeedsIncrementalState);
    const size_t interned = w_.begin(field::kInternedData);
    for (int i = 0; i < kArgCount; ++i) {
      interned_entry(field::kDebugAnnotationNames, static_cast<uint64_t>(i) + 1, kArgNames[i]);
    }
    w_.end(interned);
    if (rank.default_lane != 0) {
      const size_t defaults = w_.begin(field::kTracePacketDefaults);
      const size_t event_defaults = w_.begin(field::kTrackEventDefaults);
      w_.varint_field(field::kDefaultTrackUuid, rank.default_lane);
      w_.end(event_defaults);
      w_.end(defaults);
    }
    end_packet(packet);

    packet = begin_packet(rank.first_ns, rank.sequence);
    const size_t track = w_.begin(field::kTrackDescriptor);
    w_.varint_field(field::kUuid, rank.uuid);
    const size_t process = w_.begin(field::kProcess);
    w_.int_field(field::kProcessPid, rank.pid);
    w_.bytes_field(field::kProcessName, rank.name);
    for (const std::string& label : rank.labels) w_.bytes_field(field::kProcessLabels, label);
    w_.end(process);
    w_.end(track);
    end_packet(packet);
  }

  void declare_lane(const RankOut& rank, const LaneOut& lane, int64_t ts) {
    const size_t packet = begin_packet(ts, rank.sequence);
    const size_t track = w_.begin(field::kTrackDescriptor);
    w_.varint_field(field::kUuid, lane.uuid);
    if (lane.thread) {
      const size_t thread = w_.begin(field::kThread);
      w_.int_field(field::kThreadPid, rank.pid);
      w_.int_field(field::kThreadTid, lane.tid);
      w_.bytes_field(field::kThreadName, lane.name);
      w_.end(thread);
    } else {
      // Lanes of one source track share its name, so the viewer shows them as
      // one track with several rows; a thread's overflow lanes sit beside it.
      w_.varint_field(field::kParentUuid, rank.uuid);
      w_.bytes_field(field::kName, lane.of_thread ? lane.name + " (overlapping)" : lane.name);
    }
    w_.end(track);
    end_packet(packet);
  }

  void declare_counter(const RankOut& rank, const CounterOut& counter, int64_t ts) {
    const size_t packet = begin_packet(ts, rank.sequence);
    const size_t track = w_.begin(field::kTrackDescriptor);
    w_.varint_field(field::kUuid, counter.uuid);
    w_.varint_field(field::kParentUuid, rank.uuid);
    w_.bytes_field(field::kName, counter.name);
    const size_t descriptor = w_.begin(field::kCounterDescriptor);
    if (counter.unit == CounterUnit::kBytes) w_.varint_field(field::kCounterUnit, field::kUnitSizeBytes);
    if (counter.unit == CounterUnit::kCount) w_.varint_field(field::kCounterUnit, field::kUnitCount);
    w_.end(descriptor);
    w_.end(track);
    end_packet(packet);
  }

  void slice(const RankOut& rank, const LaneOut& lane, const Event& e, std::span<const FlowEnd> flows) {
    event_packet(rank, lane, e, field::kSliceBegin, flows);
  }

  void instant(const RankOut& rank, const LaneOut& lane, const Event& e) {
    event_packet(rank, lane, e, field::kInstant, {});
  }

  // A stretch of the overlay: few, so named in full rather than interned.
  void overlay_slice(const RankOut& rank, const LaneOut& lane, int64_t begin_ns, int64_t, const std::string& name,
                     const std::string& category, std::span<const FlowEnd> flows) {
    const size_t packet = begin_packet(begin_ns, rank.sequence);
    const size_t event = w_.begin(field::kTrackEvent);
    w_.varint_field(field::kType, field::kSliceBegin);
    w_.varint_field(field::kTrackUuid, lane.uuid);
    w_.bytes_field(field::kCategories, category);
    w_.bytes_field(field::kEventName, name);
    for (const FlowEnd& flow : flows) w_.fixed64_field(field::kFlowIds, flow.id);
    w_.end(event);
    end_packet(packet);
  }

  // Slice ends and counter samples are most of the packets: each is written
  // in one go, its lengths known to fit one byte.
  void slice_end(const RankOut& rank, const LaneOut& lane, int64_t end_ns) {
    uint8_t* const packet = w_.reserve(kSmallPacketBytes);
    uint8_t* p = small_packet_header(packet, end_ns, rank.sequence);
    uint8_t* const event_length = p++;
    *p++ = tag_byte<field::kType, WireType::kVarint>();
    *p++ = field::kSliceEnd;
    if (lane.uuid != default_lane_) {
      *p++ = tag_byte<field::kTrackUuid, WireType::kVarint>();
      p = put_varint(p, lane.uuid);
    }
    finish_small_packet(packet, event_length, p);
  }

  void counter(const RankOut& rank, const CounterOut& counter, int64_t ts, int64_t value) {
    uint8_t* const packet = w_.reserve(kSmallPacketBytes);
    uint8_t* p = small_packet_header(packet, ts, rank.sequence);
    uint8_t* const event_length = p++;
    *p++ = tag_byte<field::kType, WireType::kVarint>();
    *p++ = field::kCounter;
    *p++ = tag_byte<field::kTrackUuid, WireType::kVarint>();
    p = put_varint(p, counter.uuid);
    p = put_varint(p, uint64_t{field::kCounterValue} << 3 | static_cast<uint8_t>(WireType::kVarint));
    p = put_varint(p, static_cast<uint64_t>(value));
    finish_small_packet(packet, event_length, p);
  }

  void finish() {
    out_.submit(w_.storage(), w_.size());
    w_.adopt();
  }

 private:
  // Every packet starts with its timestamp: the checker and trace_processor
  // read it first, and packets equal after it compress well.
  size_t begin_packet(int64_t ts, uint32_t sequence) {
    const size_t packet = w_.begin(field::kTracePacket);
    w_.varint_field(field::kTimestamp, static_cast<uint64_t>(ts));
    w_.varint_field(field::kTrustedPacketSequenceId, sequence);
    return packet;
  }
  // A packet of at most kSmallPacketBytes: the Trace.packet tag, its length,
  // timestamp, sequence and the TrackEvent's tag; returns where the
  // TrackEvent's length goes.
  static uint8_t* small_packet_header(uint8_t* p, int64_t ts, uint32_t sequence) {
    *p++ = tag_byte<field::kTracePacket, WireType::kLengthDelimited>();
    ++p;  // the packet's length
    *p++ = tag_byte<field::kTimestamp, WireType::kVarint>();
    p = put_varint(p, static_cast<uint64_t>(ts));
    *p++ = tag_byte<field::kTrustedPacketSequenceId, WireType::kVarint>();
    p = put_varint(p, sequence);
    *p++ = tag_byte<field::kTrackEvent, WireType::kLengthDelimited>();
    return p;
  }
  void finish_small_packet(uint8_t* packet, uint8_t* event_length, uint8_t* end) {
    *event_length = static_cast<uint8_t>(end - event_length - 1);
    packet[1] = static_cast<uint8_t>(end - packet - 2);
    w_.commit(end);
    if (w_.size() >= kWriteBytes) finish();
  }

  void end_packet(size_t packet) {
    w_.end(packet);
    if (w_.size() >= kWriteBytes) finish();
  }

  void event_packet(const RankOut& rank, const LaneOut& lane, const Event& e, uint64_t type,
                    std::span<const FlowEnd> flows) {
    size_t argument_count = 0;
    for_each_argument(e, [&](Arg arg, const ArgValue& value) { arguments_[argument_count++] = {arg, value}; });
    const std::span<const Argument> arguments(arguments_.data(), argument_count);
    if (arguments.empty() && flows.empty() && interned(e, rank.sequence)) {
      plain_event_packet(rank, lane, e, type);
      return;
    }
    const size_t packet = begin_packet(e.begin_ns, rank.sequence);
    w_.varint_field(field::kSequenceFlags, field::kSeqNeedsIncrementalState);
    intern(e, arguments, rank.sequence);
    const size_t event = w_.begin(field::kTrackEvent);
    w_.varint_field(field::kType, type);
    if (lane.uuid != default_lane_) w_.varint_field(field::kTrackUuid, lane.uuid);
    w_.varint_field(field::kNameIid, uint64_t{e.name_id} + 1);  // iid 0 is invalid
    if (known_kind(e.kind)) w_.varint_field(field::kCategoryIids, static_cast<uint64_t>(e.kind));
    for (const Argument& argument : arguments) {
      const size_t annotation = w_.begin(field::kDebugAnnotations);
      w_.varint_field(field::kAnnotationNameIid, static_cast<uint64_t>(argument.arg) + 1);
      const ArgValue& value = argument.value;
      switch (value.type) {
        case ArgValue::Type::kUint: w_.varint_field(field::kUintValue, value.number); break;
        case ArgValue::Type::kInt: w_.varint_field(field::kIntValue, value.number); break;
        case ArgValue::Type::kEnum: w_.varint_field(field::kStringValueIid, value.number + 1); break;
        case ArgValue::Type::kHex: w_.varint_field(field::kPointerValue, value.number); break;
      }
      w_.end(annotation);
    }
    for (const FlowEnd& flow : flows) w_.fixed64_field(field::kFlowIds, flow.id);
    w_.end(event);
    end_packet(packet);
  }

  // Most events have neither arguments nor flows, and names and kinds seen
  // before: written in one go like slice ends.
  void plain_event_packet(const RankOut& rank, const LaneOut& lane, const Event& e, uint64_t type) {
    uint8_t* const packet = w_.reserve(kSmallPacketBytes);
    uint8_t* p = packet + 2;
    *p++ = tag_byte<field::kTimestamp, WireType::kVarint>();
    p = put_varint(p, static_cast<uint64_t>(e.begin_ns));
    *p++ = tag_byte<field::kTrustedPacketSequenceId, WireType::kVarint>();
    p = put_varint(p, rank.sequence);
    *p++ = tag_byte<field::kSequenceFlags, WireType::kVarint>();
    *p++ = field::kSeqNeedsIncrementalState;
    *p++ = tag_byte<field::kTrackEvent, WireType::kLengthDelimited>();
    uint8_t* const event_length = p++;
    *p++ = tag_byte<field::kType, WireType::kVarint>();
    *p++ = static_cast<uint8_t>(type);
    if (lane.uuid != default_lane_) {
      *p++ = tag_byte<field::kTrackUuid, WireType::kVarint>();
      p = put_varint(p, lane.uuid);
    }
    *p++ = tag_byte<field::kNameIid, WireType::kVarint>();
    p = put_varint(p, uint64_t{e.name_id} + 1);
    if (known_kind(e.kind)) {
      *p++ = tag_byte<field::kCategoryIids, WireType::kVarint>();
      *p++ = static_cast<uint8_t>(e.kind);
    }
    packet[0] = tag_byte<field::kTracePacket, WireType::kLengthDelimited>();
    finish_small_packet(packet, event_length, p);
  }

  // Whether the event's name and kind are interned on the sequence already.
  bool interned(const Event& e, uint32_t sequence) const {
    return e.name_id < names_interned_on_.size() && names_interned_on_[e.name_id] == sequence &&
           (!known_kind(e.kind) || kinds_interned_on_[static_cast<size_t>(e.kind)] == sequence);
  }

  // Interns the event's name, kind (its category) and enum texts on the
  // sequence at their first use there, in the packet that uses them
  // (trace_processor reads a packet's interned data before its event).
  void intern(const Event& e, std::span<const Argument> arguments, uint32_t sequence) {
    if (e.name_id >= names_interned_on_.size()) names_interned_on_.resize(e.name_id + size_t{1}, 0);
    const auto kind = static_cast<size_t>(e.kind);
    const bool name_new = names_interned_on_[e.name_id] != sequence;
    const bool kind_new = known_kind(e.kind) && kinds_interned_on_[kind] != sequence;
    bool texts_new = false;
    for (const Argument& a : arguments) {
      texts_new |= a.value.type == ArgValue::Type::kEnum && texts_interned_on_[a.value.number] != sequence;
    }
    if (!name_new && !kind_new && !texts_new) return;
    const size_t interned = w_.begin(field::kInternedData);
    if (name_new) {
      names_interned_on_[e.name_id] = sequence;
      interned_entry(field::kEventNames, uint64_t{e.name_id} + 1,
                     e.name_id < strings_.size() ? std::string_view(strings_[e.name_id]) : std::string_view("(unnamed)"));
    }
    if (kind_new) {
      kinds_interned_on_[kind] = sequence;
      interned_entry(field::kEventCategories, kind, event_kind_name(e.kind));
    }
    for (const Argument& a : arguments) {
      if (a.value.type != ArgValue::Type::kEnum || texts_interned_on_[a.value.number] == sequence) continue;
      texts_interned_on_[a.value.number] = sequence;
      interned_entry(field::kDebugAnnotationStringValues, a.value.number + 1, a.value.text);
    }
    w_.end(interned);
  }

  void interned_entry(uint32_t table, uint64_t iid, std::string_view text) {
    const size_t entry = w_.begin(table);
    w_.varint_field(field::kInternedIid, iid);
    w_.bytes_field(field::kInternedName, text);
    w_.end(entry);
  }

  const std::vector<std::string>& strings_;
  OutputFile& out_;
  ProtoWriter w_;
  std::array<Argument, kArgCount> arguments_;  // the event being written
  std::vector<uint32_t> names_interned_on_;          // per name id: the sequence that last interned it
  uint32_t texts_interned_on_[kEnumTextCount] = {};  // likewise per enum text
  uint32_t kinds_interned_on_[kEventKindCount + 1] = {};  // and per event kind
  uint64_t default_lane_ = 0;
};

}  // namespace

Written write_perfetto(const Timeline& timeline, const Plan& plan, OutputFile& out) {
  require_times_from_zero(timeline, plan, "Perfetto");
  PerfettoSink sink(timeline, out);
  TraceWalker<PerfettoSink> walker(timeline, plan, sink);
  walker.run();
  sink.finish();
  return {walker.counts(), walker.events_read(), walker.events_written()};
}

}  // namespace rankscope::export_detail
