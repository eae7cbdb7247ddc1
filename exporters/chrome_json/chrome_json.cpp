// Chrome trace-event JSON, the legacy format Perfetto, chrome://tracing and
// most other viewers read: the same processes, lanes, slices, counters and
// flows as the Perfetto export. Slices are complete ("X") events, instants
// "i", counters "C"; every lane is a thread (tid) of its rank's process;
// flows are "s"/"f" pairs bound to the slices they start and end on. Times
// are microseconds with three decimals, so nanoseconds survive exactly.
// Layout: docs/export.md.
#include <charconv>
#include <span>

#include "export_arguments.h"
#include "export_walk.h"
#include "export_writers.h"
#include "json_text.h"

namespace rankscope::export_detail {
namespace {

constexpr size_t kWriteBytes = size_t{8} << 20;

class ChromeJsonSink {
 public:
  ChromeJsonSink(const Timeline& timeline, OutputFile& out)
      : strings_(timeline.strings()), out_(out), escaped_(strings_.size()), escaped_ready_(strings_.size(), false) {
    buffer_.reserve(kWriteBytes + (1 << 16));
    buffer_ += "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"timeline\":\"";
    append_escaped(buffer_, timeline.path());
    buffer_ += "\",\"clock_corrected\":";
    buffer_ += timeline.clock_corrected() ? "true" : "false";
    buffer_ += "},\"traceEvents\":[";
  }

  void begin_rank(const RankOut& rank) {
    metadata(rank.pid, -1, "process_name", "name", rank.name);
    std::string labels;
    for (const std::string& label : rank.labels) labels += (labels.empty() ? "" : ", ") + label;
    metadata(rank.pid, -1, "process_labels", "labels", labels);
    begin_event("M", rank.pid, -1);
    buffer_ += ",\"name\":\"process_sort_index\",\"args\":{\"sort_index\":";
    number(rank.rank);
    buffer_ += "}}";
  }

  void declare_lane(const RankOut& rank, const LaneOut& lane, int64_t) {
    metadata(rank.pid, lane.tid, "thread_name", "name",
             lane.lane == 0 ? lane.name : lane.name + " (lane " + std::to_string(lane.lane + 1) + ")");
    begin_event("M", rank.pid, lane.tid);
    buffer_ += ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":";
    number(lane.tid % kTidsPerPid);
    buffer_ += "}}";
  }

  void declare_counter(const RankOut&, const CounterOut&, int64_t) {}  // a counter is named by its samples

  void slice(const RankOut& rank, const LaneOut& lane, const Event& e, std::span<const FlowEnd> flows) {
    begin_event("X", rank.pid, lane.tid);
    buffer_ += ",\"ts\":";
    microseconds(e.begin_ns);
    buffer_ += ",\"dur\":";
    microseconds(e.end_ns - e.begin_ns);
    name_and_arguments(e);
    flow_events(rank, lane, e.begin_ns, flows);
    maybe_write();
  }

  void overlay_slice(const RankOut& rank, const LaneOut& lane, int64_t begin_ns, int64_t end_ns,
                     const std::string& name, const std::string& category, std::span<const FlowEnd> flows) {
    begin_event("X", rank.pid, lane.tid);
    buffer_ += ",\"ts\":";
    microseconds(begin_ns);
    buffer_ += ",\"dur\":";
    microseconds(end_ns - begin_ns);
    buffer_ += ",\"cat\":\"";
    append_escaped(buffer_, category);
    buffer_ += "\",\"name\":\"";
    append_escaped(buffer_, name);
    buffer_ += "\"}";
    flow_events(rank, lane, begin_ns, flows, category);
    maybe_write();
  }

  // The "s" or "f" event of each flow, bound to the slice that begins at ts.
  void flow_events(const RankOut& rank, const LaneOut& lane, int64_t ts, std::span<const FlowEnd> flows,
                   const std::string& overlay_category = {}) {
    for (const FlowEnd& flow : flows) {
      begin_event(flow.first ? "s" : "f", rank.pid, lane.tid);
      buffer_ += ",\"ts\":";
      microseconds(ts);
      switch (flow.kind) {
        case FlowKind::kCollective: buffer_ += ",\"cat\":\"collective\",\"name\":\"collective\""; break;
        case FlowKind::kLaunch: buffer_ += ",\"cat\":\"launch\",\"name\":\"launch\""; break;
        case FlowKind::kOverlay:
          buffer_ += ",\"cat\":\"";
          append_escaped(buffer_, overlay_category);
          buffer_ += "\",\"name\":\"";
          append_escaped(buffer_, overlay_category);
          buffer_ += '"';
          break;
      }
      buffer_ += ",\"id\":";
      number(flow.id);
      if (!flow.first) buffer_ += ",\"bp\":\"e\"";  // bind to the enclosing slice, not the next one
      buffer_ += '}';
    }
  }

  void instant(const RankOut& rank, const LaneOut& lane, const Event& e) {
    begin_event("i", rank.pid, lane.tid);
    buffer_ += ",\"s\":\"t\",\"ts\":";
    microseconds(e.begin_ns);
    name_and_arguments(e);
    maybe_write();
  }

  void slice_end(const RankOut&, const LaneOut&, int64_t) {}  // "X" events carry their duration

  void counter(const RankOut& rank, const CounterOut& counter, int64_t ts, int64_t value) {
    begin_event("C", rank.pid, -1);
    buffer_ += ",\"ts\":";
    microseconds(ts);
    buffer_ += ",\"name\":\"";
    append_escaped(buffer_, counter.name);
    buffer_ += "\",\"args\":{\"value\":";
    number(value);
    buffer_ += "}}";
    maybe_write();
  }

  void finish() {
    buffer_ += "\n]}\n";
    out_.submit(buffer_, buffer_.size());
    buffer_.clear();
  }

 private:
  // One event per line: {"ph":..,"pid":..[,"tid":..] — the caller adds the rest and the closing brace.
  void begin_event(const char* phase, int32_t pid, int64_t tid) {
    buffer_ += first_ ? "\n{\"ph\":\"" : ",\n{\"ph\":\"";
    first_ = false;
    buffer_ += phase;
    buffer_ += "\",\"pid\":";
    number(pid);
    if (tid >= 0) {
      buffer_ += ",\"tid\":";
      number(tid);
    }
  }

  void metadata(int32_t pid, int64_t tid, const char* name, const char* key, const std::string& value) {
    begin_event("M", pid, tid);
    buffer_ += ",\"name\":\"";
    buffer_ += name;
    buffer_ += "\",\"args\":{\"";
    buffer_ += key;
    buffer_ += "\":\"";
    append_escaped(buffer_, value);
    buffer_ += "\"}}";
  }

  void name_and_arguments(const Event& e) {
    buffer_ += ",\"name\":\"";
    buffer_ += escaped_name(e.name_id);
    buffer_ += "\",\"cat\":\"";
    buffer_ += event_kind_name(e.kind);
    buffer_ += '"';
    bool first = true;
    for_each_argument(e, [&](Arg arg, const ArgValue& value) {
      buffer_ += first ? ",\"args\":{\"" : ",\"";
      first = false;
      buffer_ += arg_name(arg);
      buffer_ += "\":";
      switch (value.type) {
        case ArgValue::Type::kUint: number(value.number); break;
        case ArgValue::Type::kInt: number(static_cast<int64_t>(value.number)); break;
        case ArgValue::Type::kEnum:
          buffer_ += '"';
          append_escaped(buffer_, value.text);
          buffer_ += '"';
          break;
        case ArgValue::Type::kHex: {
          char text[24];
          const auto end = std::to_chars(text, text + sizeof(text), value.number, 16).ptr;
          buffer_ += "\"0x";
          buffer_.append(text, end);
          buffer_ += '"';
          break;
        }
      }
    });
    buffer_ += first ? "}" : "}}";
  }

  const std::string& escaped_name(uint32_t name_id) {
    if (name_id >= escaped_.size()) {
      escaped_.resize(name_id + size_t{1});
      escaped_ready_.resize(name_id + size_t{1}, false);
    }
    if (!escaped_ready_[name_id]) {
      append_escaped(escaped_[name_id], name_id < strings_.size() ? std::string_view(strings_[name_id]) : "(unnamed)");
      escaped_ready_[name_id] = true;
    }
    return escaped_[name_id];
  }

  template <typename Integer>
  void number(Integer value) {
    append_number(buffer_, value);
  }

  void microseconds(int64_t ns) { append_microseconds(buffer_, ns); }

  void maybe_write() {
    if (buffer_.size() < kWriteBytes) return;
    out_.submit(buffer_, buffer_.size());
    buffer_.clear();
  }

  const std::vector<std::string>& strings_;
  OutputFile& out_;
  std::string buffer_;
  bool first_ = true;
  std::vector<std::string> escaped_;  // per name id, escaped on first use
  std::vector<bool> escaped_ready_;
};

}  // namespace

Written write_chrome_json(const Timeline& timeline, const Plan& plan, OutputFile& out) {
  ChromeJsonSink sink(timeline, out);
  TraceWalker<ChromeJsonSink> walker(timeline, plan, sink);
  walker.run();
  sink.finish();
  return {walker.counts(), walker.events_read(), walker.events_written()};
}

}  // namespace rankscope::export_detail
