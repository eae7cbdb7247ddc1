// Per-rank shard files: what the agent appends while the job runs and what the
// merge reads. A shard is a 32-byte file header followed by self-describing
// chunks, each with its own checksum, so a shard cut anywhere or damaged in
// place still yields every whole chunk. Layout: docs/format.md.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rankscope/model/capture_windows.h"
#include "rankscope/model/event.h"
#include "rankscope/model/metadata.h"

namespace rankscope {

inline constexpr uint32_t kShardVersion = 1;

// A job's shard folder holds one rank-NNNNN.shard per rank, and beside a
// shard its companions, named the same with another suffix (.finalized).
inline constexpr std::string_view kShardSuffix = ".shard";
std::string shard_file_name(int32_t rank, std::string_view suffix = kShardSuffix);
// The rank in a name shard_file_name made with `suffix`, or nothing.
std::optional<int32_t> shard_file_rank(std::string_view name, std::string_view suffix = kShardSuffix);
// Whether a file name is a shard's by its suffix (imports name theirs freely).
bool is_shard_file(std::string_view name);
inline constexpr char kShardMagic[8] = {'R', 'S', 'S', 'H', 'A', 'R', 'D', '\0'};
inline constexpr uint32_t kChunkMagic = 0x4B435352;  // "RSCK" in file byte order
inline constexpr uint32_t kMaxChunkPayload = 64u << 20;

enum class ChunkType : uint16_t {
  kMetadata = 1,  // RankMetadata::encode() text; the last one wins
  kStrings = 2,   // {u32 id, u32 length, bytes} repeated
  kTracks = 3,    // Track records
  kEvents = 4,    // Event records
  kCounters = 5,  // Counters::encode() text; the last one wins
  kEnd = 6,       // empty: the agent closed the shard cleanly
  kClockSync = 7, // SyncPoint records, in the order measured
  kCaptureWindows = 8,  // CaptureWindow records (capture_windows.h)
};

enum ChunkFlags : uint16_t {
  kChunkSortedByBegin = 1 << 0,
  kChunkWindowsOfEndedEvents = 1 << 1,  // capture windows: a flight recorder's dumps (WindowHolds::kEventsEnded)
};

struct ShardFileHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  int32_t rank;
  int32_t world_size;
  uint32_t reserved;
  uint32_t header_crc;  // over the 28 bytes before it
};
static_assert(sizeof(ShardFileHeader) == 32);

struct ChunkHeader {
  uint32_t magic;
  uint16_t type;
  uint16_t flags;
  uint32_t payload_bytes;
  uint32_t item_count;
  int64_t first_ns;  // events: smallest begin; other chunks: when written
  int64_t last_ns;   // events: largest end; other chunks: when written
  uint32_t payload_crc;
  uint32_t header_crc;  // over the 36 bytes before it
};
static_assert(sizeof(ChunkHeader) == 40);

// Appends chunks to one rank's shard. Never throws: a failed write returns
// false, leaves the file as it was before the chunk (so everything written
// earlier stays readable) and keeps its reason in error().
// Room every chunk keeps allocated past itself (fallocate, without growing
// the file) for the closing counters and end record: a full disk refuses
// the next chunk, never the shard's end.
inline constexpr uint64_t kCloseReserveBytes = 64 << 10;

// Whether a live process has the shard at `path` open for writing now (its
// ShardWriter's lock); false for a shard whose writer ended, however it
// ended, and on a file system without locks.
bool shard_in_use(const std::string& path);
// Whether a live process writes any shard in `folder` (a running job's).
bool shard_folder_in_use(const std::string& folder);

class ShardWriter {
 public:
  ShardWriter() = default;
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;
  ShardWriter(ShardWriter&& other) noexcept;
  ShardWriter& operator=(ShardWriter&& other) noexcept;
  ~ShardWriter();

  // Both hold a lock on the shard (flock) while it is open, so that others
  // tell a running writer's shard from one left behind (shard_in_use); both
  // fail on a shard another live process holds.
  bool open(const std::string& path, const RankMetadata& metadata, int64_t now_ns);
  // Appends chunks to a shard another process wrote (the sidecar adds its
  // clock measurements to its child's shard), after whatever it holds.
  bool open_existing(const std::string& path);
  // In a forked child: lets go of the parent's shard without writing to it,
  // so that the child does not keep it held after the parent ends.
  void release_after_fork();
  bool is_open() const { return fd_ >= 0; }

  // Sorts `events` into event_time_order in place, then writes them as one chunk.
  bool write_events(std::span<Event> events);
  bool write_strings(std::span<const std::pair<uint32_t, std::string_view>> strings, int64_t now_ns);
  bool write_tracks(std::span<const Track> tracks, int64_t now_ns);
  bool write_metadata(const RankMetadata& metadata, int64_t now_ns);
  bool write_counters(const Counters& counters, int64_t now_ns);
  bool write_sync_points(std::span<const SyncPoint> points, int64_t now_ns);
  // Windows closed since the last such chunk, and the one open now (its
  // until kWindowStillOpen); an empty chunk says the capture is windowed.
  bool write_capture_windows(std::span<const CaptureWindow> windows, WindowHolds holds, int64_t now_ns);
  // Writes the final counters and the end marker, syncs and closes. A
  // capture's shard is synced: it must outlast a crash of the machine after
  // its program ended. One the import writes only for its merge, and
  // removes after it, is not: syncing the 170 MB of an 8-rank import cost
  // 0.3-0.6 s on this project's VM disk.
  enum class Keeping : uint8_t { kDurable, kTemporary };
  bool close(const Counters& counters, int64_t now_ns, Keeping keeping = Keeping::kDurable);

  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }
  uint64_t bytes_written() const { return offset_; }
  // Times the shard was opened again by its path: the program closed the
  // writer's descriptor, or put a file of its own in its place.
  uint64_t reopened() const { return reopened_; }

 private:
  bool write_chunk(ChunkType type, uint16_t flags, const void* payload, uint32_t payload_bytes,
                   uint32_t item_count, int64_t first_ns, int64_t last_ns);
  bool fail(std::string message);
  // Whether fd_ is still the shard this writer opened (dev and inode), not
  // closed by the program nor reused for a file of its own.
  bool holds_own_file() const;
  // Before each write: the shard opened again where fd_ is no longer it.
  bool ensure_own_file();
  void close_own_file();

  int fd_ = -1;
  uint64_t device_ = 0, inode_ = 0;
  uint64_t reopened_ = 0;
  uint64_t offset_ = 0;
  bool reserving_ = true;  // until the file system says it cannot allocate ahead
  bool closing_ = false;   // close()'s chunks use the room kept for them
  std::string path_;
  std::string error_;
};

struct EventChunkRef {
  uint64_t payload_offset;
  uint32_t count;
  int64_t first_ns;
  int64_t last_ns;
  bool sorted;
};

// What a scan recovered and what it could not.
struct ShardDamage {
  uint64_t chunks_corrupt = 0;
  uint64_t events_lost = 0;      // events in chunks whose header was readable but payload was not
  uint64_t bytes_skipped = 0;    // bytes in unreadable chunks, skipped to the next good one
  uint64_t truncated_bytes = 0;  // bytes of a last chunk cut short
  std::vector<std::string> problems;  // one line each, naming the file and byte offset
  bool any() const { return chunks_corrupt || bytes_skipped || truncated_bytes; }
};

// Everything in a shard except the events themselves, which stay on disk and
// are read chunk by chunk with ShardFile::read_events.
struct ShardScan {
  std::string path;
  int32_t header_rank = -1;
  int32_t header_world_size = 0;
  std::optional<RankMetadata> metadata;
  std::vector<std::pair<uint32_t, std::string>> strings;
  std::vector<Track> tracks;
  Counters counters;
  std::vector<SyncPoint> sync_points;
  // Nothing: the shard has no windows of that kind.
  std::optional<RecordedWindows> steered_windows, dumped_windows;
  std::vector<EventChunkRef> event_chunks;
  uint64_t event_count = 0;
  int64_t first_ns = INT64_MAX;
  int64_t last_ns = INT64_MIN;  // last time the rank was heard from
  bool ended = false;           // the end marker was found
  ShardDamage damage;

  int32_t rank() const { return metadata ? metadata->rank : header_rank; }
  int32_t world_size() const { return metadata ? metadata->world_size : header_world_size; }
  // The spans whose events it holds in full (captured_spans); nothing: all its life.
  std::optional<std::vector<TimeSpan>> captured() const { return captured_spans(steered_windows, dumped_windows, last_ns); }
};

class ShardFile {
 public:
  // Throws Error when the file cannot be opened, is not a shard, or has a
  // version this build does not read.
  explicit ShardFile(const std::string& path);
  ShardFile(const ShardFile&) = delete;
  ShardFile& operator=(const ShardFile&) = delete;
  ~ShardFile();

  // Reads every chunk header and verifies every checksum. Never throws for
  // damage inside the file: it is reported in ShardScan::damage.
  ShardScan scan() const;

  // Reads one event chunk found by scan(); throws Error if the file changed.
  void read_events(const EventChunkRef& chunk, std::vector<Event>& out) const;

 private:
  int fd_ = -1;
  std::string path_;
  uint64_t size_ = 0;
  ShardFileHeader header_{};
};

}  // namespace rankscope
