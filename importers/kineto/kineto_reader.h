// Streaming reader of torch.profiler (Kineto) trace files, plain or gzip'd.
//
// A trace is one JSON object whose "traceEvents" array can hold gigabytes.
// The reader never holds the document: it walks the top-level object in a
// window of the file, hands every other top-level value whole to on_header,
// and every element of "traceEvents" to on_event as its own small JSON text.
// The caller parses those with simdjson; the window carries the padding
// simdjson needs past the end of each text.
//
// Damage never costs what is sound: an element whose brackets do not balance,
// or that runs past 16 MiB (an unterminated string), is skipped up to the next
// whole element that starts a line of its own or follows "}," and begins with
// a trace event's key (or to the end of the array), and a file cut short
// keeps every element before the cut. Each problem is reported with the
// file, the event index and the byte offset in the uncompressed text.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace rankscope::kineto {

// Bytes of readable memory after every text handed out (simdjson's padding).
inline constexpr size_t kTextPadding = 64;

struct ReaderStats {
  uint64_t bytes = 0;               // uncompressed bytes read
  uint64_t events = 0;              // elements of traceEvents handed out
  uint64_t elements_skipped = 0;    // elements with unbalanced brackets, skipped
  uint64_t bytes_skipped = 0;       // bytes skipped to get past them
  bool truncated = false;           // the file ended inside the document
  bool trace_events_found = false;  // the top-level object has a traceEvents array
};

class TraceReader {
 public:
  struct Callbacks {
    // A top-level key and its value's JSON text; `text.data()` is padded.
    std::function<void(std::string_view key, std::string_view text)> on_header;
    // One element of traceEvents, its index and its byte offset in the
    // uncompressed file; `text.data()` is padded.
    std::function<void(std::string_view text, uint64_t index, uint64_t offset)> on_event;
    // A problem found in the file's structure, already naming the place.
    std::function<void(const std::string& message)> on_problem;
  };

  // Throws Error when the file cannot be opened.
  explicit TraceReader(std::string path);
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  // Reads the whole file. Throws Error only when nothing of it can be read as
  // a trace (not JSON, not an object); every later problem goes to on_problem.
  ReaderStats read(const Callbacks& callbacks);

  // A reader over a text already in memory (tests and the fuzzer).
  static ReaderStats read_text(std::string_view name, std::string_view text, const Callbacks& callbacks);

 // The uncompressed bytes of a file or of a text in memory.
  class Source;

 private:
  std::string path_;
  std::unique_ptr<Source> source_;
};

// A JSON number as written, in thousandths of its unit, exactly for up to
// three decimals (µs with a ns fraction: "1234.567" -> 1234567). False for
// anything that is not a finite number in range.
bool parse_milli(std::string_view text, int64_t& out);

}  // namespace rankscope::kineto
