#include "kineto_reader.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "rankscope/model/error.h"

namespace rankscope::kineto {

// ------------------------------------------------------------- sources ---

// Uncompressed bytes of a file, plain or gzip (several members too).
class TraceReader::Source {
 public:
  virtual ~Source() = default;
  // Fills up to `n` bytes; 0 at the end. A damaged or cut compressed stream
  // sets problem() and ends the data there.
  virtual size_t read(char* out, size_t n) = 0;
  const std::string& problem() const { return problem_; }

 protected:
  std::string problem_;
};

namespace {

class MemorySource final : public TraceReader::Source {
 public:
  explicit MemorySource(std::string_view text) : text_(text) {}
  size_t read(char* out, size_t n) override {
    const size_t take = std::min(n, text_.size());
    std::memcpy(out, text_.data(), take);
    text_.remove_prefix(take);
    return take;
  }

 private:
  std::string_view text_;
};

class FileSource final : public TraceReader::Source {
 public:
  FileSource(std::string path, int fd) : path_(std::move(path)), fd_(fd) {
    unsigned char magic[2] = {0, 0};
    const ssize_t got = ::pread(fd_, magic, 2, 0);
    gzip_ = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (gzip_) {
      stream_ = {};
      if (inflateInit2(&stream_, 15 + 32) != Z_OK) throw Error(path_ + ": cannot start gzip decompression");
      in_.resize(1 << 20);
    }
  }
  ~FileSource() override {
    if (gzip_) inflateEnd(&stream_);
    ::close(fd_);
  }

  size_t read(char* out, size_t n) override { return gzip_ ? inflate_some(out, n) : read_plain(out, n); }

 private:
  size_t read_plain(char* out, size_t n) {
    for (;;) {
      const ssize_t got = ::read(fd_, out, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno == EINTR) continue;
      problem_ = "read failed: " + errno_text(errno);
      return 0;
    }
  }

  size_t inflate_some(char* out, size_t n) {
    if (done_) return 0;
    stream_.next_out = reinterpret_cast<Bytef*>(out);
    stream_.avail_out = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    while (stream_.avail_out > 0) {
      if (stream_.avail_in == 0) {
        const size_t got = read_plain(in_.data(), in_.size());
        if (got == 0) {
          // The compressed data stops before its end marker.
          if (!member_ended_ && problem_.empty()) {
            problem_ = "the gzip stream is cut short after " + std::to_string(compressed_read_) + " compressed bytes";
          }
          done_ = true;
          break;
        }
        compressed_read_ += got;
        stream_.next_in = reinterpret_cast<Bytef*>(in_.data());
        stream_.avail_in = static_cast<uInt>(got);
      }
      member_ended_ = false;
      const int status = inflate(&stream_, Z_NO_FLUSH);
      if (status == Z_STREAM_END) {
        // Another gzip member may follow, as `cat a.gz b.gz` makes; bytes
        // after the last member that start no other (padding, say) are
        // ignored, as gzip itself does.
        member_ended_ = true;
        if (stream_.avail_in >= 2 && (stream_.next_in[0] != 0x1f || stream_.next_in[1] != 0x8b)) {
          done_ = true;
          break;
        }
        inflateReset(&stream_);
        continue;
      }
      if (status != Z_OK && status != Z_BUF_ERROR) {
        problem_ = "damaged gzip data near compressed byte " + std::to_string(compressed_read_ - stream_.avail_in) +
                   " (" + (stream_.msg ? stream_.msg : "inflate failed") + ")";
        done_ = true;
        break;
      }
    }
    return n - stream_.avail_out;
  }

  std::string path_;
  int fd_;
  bool gzip_ = false;
  bool done_ = false;
  bool member_ended_ = false;
  uint64_t compressed_read_ = 0;
  z_stream stream_{};
  std::vector<char> in_;
};

// ------------------------------------------------------------- scanner ---

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

#ifdef __SSE2__
// Bit i set where byte i of a 64-byte block is one of the characters.
struct BlockMasks {
  uint64_t quote, backslash, brackets;
};

BlockMasks block_masks(const char* block) {
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
  // '[' and ']' are '{' and '}' without the bit 0x20: with it set, two
  // comparisons find all four brackets, and no other character.
  const __m128i case_bit = _mm_set1_epi8(0x20), open = _mm_set1_epi8('{'), close = _mm_set1_epi8('}');
  BlockMasks m{0, 0, 0};
  for (int k = 0; k < 4; ++k) {
    const __m128i chunk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 16 * k));
    const __m128i folded = _mm_or_si128(chunk, case_bit);
    const __m128i brackets = _mm_or_si128(_mm_cmpeq_epi8(folded, open), _mm_cmpeq_epi8(folded, close));
    const auto bits = [](__m128i equal) {
      return static_cast<uint64_t>(static_cast<uint16_t>(_mm_movemask_epi8(equal)));
    };
    m.quote |= bits(_mm_cmpeq_epi8(chunk, quote)) << (16 * k);
    m.backslash |= bits(_mm_cmpeq_epi8(chunk, backslash)) << (16 * k);
    m.brackets |= bits(brackets) << (16 * k);
  }
  return m;
}

// Bit i = XOR of bits 0..i: set from an opening quote up to its closing one.
uint64_t prefix_xor(uint64_t x) {
  for (int shift = 1; shift < 64; shift *= 2) x ^= x << shift;
  return x;
}
#endif

// Walks the top-level object in a sliding window over the source.
class Scanner {
 public:
  Scanner(std::string_view name, TraceReader::Source& source, const TraceReader::Callbacks& callbacks,
          size_t window = kInitialWindow)
      : name_(name), source_(source), callbacks_(callbacks) {
    buffer_.resize(window + kTextPadding);
  }

  ReaderStats run() {
    if (!skip_space() || at() != '{') {
      const std::string what = end_ == begin_ && offset_ == 0 ? "is empty" : "is not a JSON object";
      throw Error(std::string(name_) + " " + what + (source_.problem().empty() ? "" : " (" + source_.problem() + ")"));
    }
    ++begin_;
    for (;;) {
      if (!skip_space()) return cut("inside the top-level object");
      if (at() == '}') break;
      if (at() == ',') {
        ++begin_;
        continue;
      }
      if (at() != '"') return broken("a key of the top-level object");
      size_t key_end = 0;
      if (!find_string_end(begin_, key_end)) return cut("inside a top-level key");
      const std::string key(&buffer_[begin_ + 1], key_end - begin_ - 2);
      begin_ = key_end;
      if (!skip_space()) return cut("after the key \"" + key + "\"");
      if (at() != ':') return broken("the ':' after \"" + key + "\"");
      ++begin_;
      if (!skip_space()) return cut("after the key \"" + key + "\"");
      if (key == "traceEvents" && at() == '[') {
        stats_.trace_events_found = true;
        ++begin_;
        if (!read_events()) return stats_;
        continue;
      }
      size_t value_end = 0;
      switch (find_value_end(begin_, value_end)) {
        case Extent::kComplete: break;
        case Extent::kCut: return cut("inside the value of \"" + key + "\"");
        case Extent::kMalformed:
        case Extent::kTooLarge:
        case Extent::kTooDeep: return broken("the value of \"" + key + "\"");
      }
      callbacks_.on_header(key, text(begin_, value_end));
      begin_ = value_end;
    }
    finish_source();
    return stats_;
  }

  static constexpr size_t kInitialWindow = 4u << 20;

 private:
  static constexpr size_t kMaxWindow = 1u << 30;  // one header value larger than this is not a trace
  // An event longer than this is damage (an unterminated string, say), not
  // an event: it is skipped instead of holding the rest of the file.
  static constexpr size_t kMaxEventBytes = 16u << 20;

  enum class Extent { kComplete, kCut, kMalformed, kTooLarge, kTooDeep };
  // Brackets a value may nest: a trace event nests a few (its args); JSON
  // itself sets no limit, and a reader must, to keep its stack bounded.
  static constexpr int kMaxNesting = 16 * 64;

  char at() const { return buffer_[begin_]; }
  uint64_t place() const { return offset_ + begin_; }

  std::string_view text(size_t from, size_t to) {
    // The padding after `to` is inside the buffer; simdjson may read it.
    return std::string_view(&buffer_[from], to - from);
  }

  // Moves the unread part to the front and reads more after it; grows the
  // window when the unread part fills it. False at the end of the data.
  bool refill() {
    if (source_done_) return false;
    if (begin_ > 0) {
      std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
      offset_ += begin_;
      end_ -= begin_;
      begin_ = 0;
    }
    const size_t window = buffer_.size() - kTextPadding;
    if (end_ == window) {
      if (window >= kMaxWindow) return false;
      buffer_.resize(std::min(window * 2, kMaxWindow) + kTextPadding);
    }
    const size_t got = source_.read(buffer_.data() + end_, buffer_.size() - kTextPadding - end_);
    if (got == 0) {
      source_done_ = true;
      return false;
    }
    end_ += got;
    stats_.bytes += got;
    std::memset(buffer_.data() + end_, ' ', kTextPadding);
    return true;
  }

  // Positions are relative to the window, which moves on refill: every
  // search restarts from begin_ after a refill, so none is kept across one.
  bool skip_space() {
    for (;;) {
      while (begin_ < end_ && is_space(buffer_[begin_])) ++begin_;
      if (begin_ < end_) return true;
      if (!refill()) return false;
    }
  }

  // `from` is at a '"'; `out` is one past the closing quote.
  bool find_string_end(size_t from, size_t& out) {
    size_t scanned = from + 1;
    for (;;) {
      const size_t base = begin_;
      if (string_end_in_window(scanned, out)) return true;
      scanned = end_;
      if (!refill()) return false;
      scanned -= base - begin_;
      from -= base - begin_;
    }
  }

  // Finds the closing quote of a string whose body starts at `p`, within the
  // window; false when the window ends first.
  bool string_end_in_window(size_t p, size_t& out) const {
    while (p < end_) {
      const void* hit = std::memchr(&buffer_[p], '"', end_ - p);
      if (!hit) return false;
      const size_t quote = static_cast<size_t>(static_cast<const char*>(hit) - buffer_.data());
      size_t slashes = 0;
      while (quote - slashes > 0 && buffer_[quote - slashes - 1] == '\\') ++slashes;
      if (slashes % 2 == 0) {
        out = quote + 1;
        return true;
      }
      p = quote + 1;
    }
    return false;
  }

  // The end of the JSON value starting at `from` (an object, array, string
  // or scalar). Restarts after each refill: values are small next to the window.
  // Values longer than `limit` bytes are kTooLarge, found without reading on.
  Extent find_value_end(size_t from, size_t& out, size_t limit = kMaxWindow) {
    for (;;) {
      const size_t base = begin_;
      const Extent extent = value_end_in_window(from, out);
      if (extent != Extent::kCut) return extent;
      if (end_ - from > limit) return Extent::kTooLarge;
      if (!refill()) return Extent::kCut;
      from -= base - begin_;
    }
  }

  Extent value_end_in_window(size_t p, size_t& out) const {
    const char first = buffer_[p];
    if (first == '"') return string_end_in_window(p + 1, out) ? Extent::kComplete : Extent::kCut;
    if (first != '{' && first != '[') {
      const size_t start = p;
      while (p < end_) {
        const char c = buffer_[p];
        if (c == ',' || c == '}' || c == ']' || is_space(c)) {
          if (p == start) return Extent::kMalformed;  // a stray '}' or ']': no value at all
          out = p;
          return Extent::kComplete;
        }
        if (c == '{' || c == '[' || c == '"' || c == ':') return Extent::kMalformed;
        ++p;
      }
      return Extent::kCut;
    }
    // Brackets open in a bit stack: 1 for '{', 0 for '['. The characters
    // that matter are found 16 at a time; everything else is skipped.
    uint64_t stack[kMaxNesting / 64] = {};
    int depth = 0;
    bool in_string = false;
    size_t skip_to = p;  // the character after a backslash is not looked at
    // A bracket outside strings.
    auto bracket = [&](size_t at) -> std::optional<Extent> {
      const char c = buffer_[at];
      if (c == '{' || c == '[') {
        if (depth == kMaxNesting) return Extent::kTooDeep;
        if (c == '{') stack[depth / 64] |= uint64_t{1} << (depth % 64);
        else stack[depth / 64] &= ~(uint64_t{1} << (depth % 64));
        ++depth;
        return std::nullopt;
      }
      if (depth == 0) return Extent::kMalformed;
      --depth;
      const bool object = (stack[depth / 64] >> (depth % 64)) & 1;
      if (object != (c == '}')) return Extent::kMalformed;
      if (depth == 0) {
        out = at + 1;
        return Extent::kComplete;
      }
      return std::nullopt;
    };
    // Any character that matters, strings and escapes included.
    auto visit = [&](size_t at) -> std::optional<Extent> {
      if (at < skip_to) return std::nullopt;
      const char c = buffer_[at];
      if (in_string) {
        if (c == '\\') skip_to = at + 2;
        else if (c == '"') in_string = false;
        return std::nullopt;
      }
      if (c == '"') {
        in_string = true;
        return std::nullopt;
      }
      if (c == '\\') return Extent::kMalformed;  // a backslash outside a string
      return bracket(at);
    };
#ifdef __SSE2__
    // 64 bytes at a time: the quotes' prefix XOR marks what is inside
    // strings, so only brackets outside them are visited. Blocks with a
    // backslash (rare in traces) take the byte-by-byte path, which knows escapes.
    for (; p + 64 <= end_; p += 64) {
      const BlockMasks m = block_masks(&buffer_[p]);
      if (m.backslash != 0 || skip_to > p) {
        for (uint64_t hits = m.quote | m.backslash | m.brackets; hits != 0; hits &= hits - 1) {
          if (const auto extent = visit(p + static_cast<size_t>(__builtin_ctzll(hits)))) return *extent;
        }
        continue;
      }
      const uint64_t inside = prefix_xor(m.quote) ^ (in_string ? ~uint64_t{0} : 0);
      in_string = (inside >> 63) != 0;
      for (uint64_t hits = m.brackets & ~inside; hits != 0; hits &= hits - 1) {
        if (const auto extent = bracket(p + static_cast<size_t>(__builtin_ctzll(hits)))) return *extent;
      }
    }
#endif
    for (; p < end_; ++p) {
      const char c = buffer_[p];
      if (c == '"' || c == '\\' || c == '{' || c == '}' || c == '[' || c == ']') {
        if (const auto extent = visit(p)) return *extent;
      }
    }
    return Extent::kCut;
  }

  // Reads the elements of traceEvents, begin_ just past its '['. False when
  // the document ends inside the array.
  bool read_events() {
    for (;;) {
      if (!skip_space()) {
        cut("inside traceEvents, after event " + std::to_string(stats_.events + stats_.elements_skipped));
        return false;
      }
      const char c = at();
      if (c == ']') {
        ++begin_;
        return true;
      }
      if (c == ',') {
        ++begin_;
        continue;
      }
      const uint64_t index = stats_.events + stats_.elements_skipped;
      size_t value_end = 0;
      switch (find_value_end(begin_, value_end, kMaxEventBytes)) {
        case Extent::kComplete:
          callbacks_.on_event(text(begin_, value_end), index, place());
          ++stats_.events;
          begin_ = value_end;
          break;
        case Extent::kCut:
          // A cut file, or an event whose damage runs on to the end: what
          // follows it, if anything, is looked for before giving up.
          if (!resync(index, "is not valid JSON (an unterminated string or bracket)", true)) return false;
          break;
        case Extent::kMalformed:
          if (!resync(index, "is not valid JSON (its brackets do not balance)", false)) return false;
          break;
        case Extent::kTooDeep:
          if (!resync(index, "nests brackets deeper than " + std::to_string(kMaxNesting) +
                                 " levels, which no trace event does (not read)",
                      false)) {
            return false;
          }
          break;
        case Extent::kTooLarge:
          if (!resync(index, "runs past " + std::to_string(kMaxEventBytes >> 20) + " MiB (an unterminated string?)",
                      false)) {
            return false;
          }
          break;
      }
    }
  }

  enum class Landing { kNone, kEvent, kArrayEnd, kNeedMore };

  // Whether position `p` is where the reader may land after damage: an
  // event starting a line of its own or following "},", whose first key is
  // a trace event's; or the end of traceEvents: "]" after "}", followed by
  // the document's end or another top-level key. Looks back no further than
  // `floor`.
  Landing landing_at(size_t p, size_t floor) const {
    const char c = buffer_[p];
    if (c != '{' && c != ']') return Landing::kNone;
    size_t back = p;
    while (back > floor && (buffer_[back - 1] == ' ' || buffer_[back - 1] == '\t' || buffer_[back - 1] == '\r')) --back;
    const bool line_start = back > floor && buffer_[back - 1] == '\n';
    while (back > floor && is_space(buffer_[back - 1])) --back;
    bool after_object = back > floor && buffer_[back - 1] == '}';
    if (c == '{' && !after_object && back > floor && buffer_[back - 1] == ',') {
      size_t comma = back - 1;
      while (comma > floor && is_space(buffer_[comma - 1])) --comma;
      after_object = comma > floor && buffer_[comma - 1] == '}';
    } else if (c == '{') {
      after_object = false;
    }
    if (c == '{' ? !(line_start || after_object) : !after_object) return Landing::kNone;
    size_t ahead = p + 1;
    while (ahead < end_ && is_space(buffer_[ahead])) ++ahead;
    if (end_ - ahead < 64 && !source_done_) return Landing::kNeedMore;
    static constexpr std::string_view kEventKeys[] = {"\"ph\"", "\"name\"", "\"cat\"", "\"pid\"",
                                                      "\"tid\"", "\"ts\"",   "\"dur\"", "\"id\""};
    auto event_key_at = [&](size_t at) {
      for (const std::string_view key : kEventKeys) {
        if (end_ - at >= key.size() && std::memcmp(&buffer_[at], key.data(), key.size()) == 0) return true;
      }
      return false;
    };
    if (c == '{') return ahead < end_ && event_key_at(ahead) ? Landing::kEvent : Landing::kNone;
    // The end of traceEvents: the document's end, or another top-level key
    // (which no event has), not the "]}" or "]," of an event's arguments.
    if (ahead == end_) return Landing::kNone;
    if (buffer_[ahead] == '}') {
      size_t rest = ahead + 1;
      while (rest < end_ && is_space(buffer_[rest])) ++rest;
      return rest == end_ ? Landing::kArrayEnd : Landing::kNone;
    }
    if (buffer_[ahead] != ',') return Landing::kNone;
    size_t key = ahead + 1;
    while (key < end_ && is_space(buffer_[key])) ++key;
    return key < end_ && buffer_[key] == '"' && !event_key_at(key) ? Landing::kArrayEnd : Landing::kNone;
  }

  // Skips a damaged element: on to the next place landing_at() accepts where
  // a whole event follows (or traceEvents ends). `at_end`: the element ran to
  // the end of the file, so finding nothing means the file was cut.
  bool resync(uint64_t index, const std::string& what, bool at_end) {
    const uint64_t from = place();
    ++stats_.elements_skipped;
    size_t p = begin_ + 1;
    bool final_look = false;
    for (;;) {
      for (; p < end_; ++p) {
        const Landing landing = landing_at(p, begin_);
        if (landing == Landing::kNone) continue;
        if (landing == Landing::kNeedMore) break;  // read on, then look again
        if (landing == Landing::kEvent) {
          size_t after = 0;
          const Extent extent = value_end_in_window(p, after);
          if (extent == Extent::kCut && !source_done_ && end_ - p <= kMaxEventBytes) break;
          if (extent != Extent::kComplete) continue;
          while (after < end_ && is_space(buffer_[after])) ++after;
          if (after == end_ && !source_done_) break;
          if (after == end_ || (buffer_[after] != ',' && buffer_[after] != ']')) continue;
        }
        const uint64_t skipped = offset_ + p - from;
        problem("event " + std::to_string(index) + " at byte " + std::to_string(from) + " " + what + "; skipped " +
                std::to_string(skipped) + " bytes to the " + (landing == Landing::kEvent ? "next event" : "end of the events"));
        stats_.bytes_skipped += skipped;
        begin_ = p;
        return true;
      }
      // Keep a little before `p` for looking back; the damaged bytes before it go.
      begin_ = std::max(begin_, p > 256 ? p - 256 : 0);
      const size_t base = begin_;
      const bool more = refill();
      p -= base - begin_;  // refill() moves the window even when nothing more comes
      if (!more && !final_look) {
        final_look = true;  // the end is known now: look at what is left once more
        continue;
      }
      if (!more) {
        const uint64_t skipped = offset_ + end_ - from;
        stats_.bytes_skipped += skipped;
        stats_.truncated = true;
        problem(at_end ? "the file ends inside event " + std::to_string(index) + " (byte " + std::to_string(from) +
                             "); the events before it are imported" +
                             (source_.problem().empty() ? "" : " (" + source_.problem() + ")")
                       : "event " + std::to_string(index) + " at byte " + std::to_string(from) + " " + what +
                             " and no event follows it; the events before it are imported");
        return false;
      }
    }
  }

  void problem(const std::string& text) { callbacks_.on_problem(std::string(name_) + ": " + text); }

  // Drains the source so that a damaged tail of a compressed file is still reported.
  void finish_source() {
    while (refill()) begin_ = end_;
    if (!source_.problem().empty()) {
      problem(source_.problem());
      stats_.truncated = true;
    }
  }

  ReaderStats cut(const std::string& where) {
    stats_.truncated = true;
    std::string message = "the file ends " + where;
    if (!source_.problem().empty()) message += " (" + source_.problem() + ")";
    problem(message);
    return stats_;
  }

  ReaderStats broken(const std::string& what) {
    stats_.truncated = true;
    problem("invalid JSON at byte " + std::to_string(place()) + ", where " + what +
            " should be; nothing after it is imported");
    return stats_;
  }

  std::string_view name_;
  TraceReader::Source& source_;
  const TraceReader::Callbacks& callbacks_;
  std::vector<char> buffer_;
  size_t begin_ = 0;  // first unread byte
  size_t end_ = 0;    // end of the data in the window
  uint64_t offset_ = 0;  // file offset of buffer_[0]
  bool source_done_ = false;
  ReaderStats stats_;
};

}  // namespace

TraceReader::TraceReader(std::string path) : path_(std::move(path)) {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path_ + ": cannot open: " + errno_text(errno));
  source_ = std::make_unique<FileSource>(path_, fd);
}

TraceReader::~TraceReader() = default;

ReaderStats TraceReader::read(const Callbacks& callbacks) { return Scanner(path_, *source_, callbacks).run(); }

ReaderStats TraceReader::read_text(std::string_view name, std::string_view text, const Callbacks& callbacks) {
  MemorySource source(text);
  // A window just larger than the text: small texts (the fuzzer's) stay cheap.
  return Scanner(name, source, callbacks, std::min<size_t>(Scanner::kInitialWindow, text.size() + 1)).run();
}

bool parse_milli(std::string_view text, int64_t& out) {
  size_t i = 0;
  const bool negative = !text.empty() && text[0] == '-';
  if (negative) ++i;
  if (i == text.size()) return false;
  uint64_t whole = 0;
  size_t digits = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits) {
    if (whole > (UINT64_MAX - 9) / 10) return false;
    whole = whole * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  uint64_t fraction = 0;
  int fraction_digits = 0;
  bool round_up = false;
  if (i < text.size() && text[i] == '.') {
    ++i;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      if (fraction_digits < 3) {
        fraction = fraction * 10 + static_cast<uint64_t>(text[i] - '0');
        ++fraction_digits;
      } else if (fraction_digits == 3) {
        round_up = text[i] >= '5';
        ++fraction_digits;
      }
    }
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    // Exponents are rare in traces; the double path keeps them right enough.
    const double value = std::strtod(std::string(text).c_str(), nullptr) * 1000.0;
    if (!std::isfinite(value) || std::fabs(value) >= 9.2e18) return false;
    out = std::llround(value);
    return true;
  }
  if (i != text.size() || digits == 0) return false;
  for (int d = std::min(fraction_digits, 3); d < 3; ++d) fraction *= 10;
  if (whole > static_cast<uint64_t>(INT64_MAX) / 1000) return false;
  const uint64_t magnitude = whole * 1000 + fraction + (round_up ? 1 : 0);
  if (magnitude > static_cast<uint64_t>(INT64_MAX)) return false;
  out = negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
  return true;
}

}  // namespace rankscope::kineto
