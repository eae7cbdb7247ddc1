#include "rankscope/model/shard.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "rankscope/model/crc32c.h"
#include "rankscope/model/error.h"
#include "rankscope/model/text.h"

namespace rankscope {
namespace {

uint32_t header_crc(const ChunkHeader& header) {
  return crc32c(&header, offsetof(ChunkHeader, header_crc));
}

uint32_t header_crc(const ShardFileHeader& header) {
  return crc32c(&header, offsetof(ShardFileHeader, header_crc));
}

bool is_known_chunk_type(uint16_t type) {
  return type >= static_cast<uint16_t>(ChunkType::kMetadata) && type <= static_cast<uint16_t>(ChunkType::kCaptureWindows);
}

bool header_is_valid(const ChunkHeader& header) {
  return header.magic == kChunkMagic && header.header_crc == header_crc(header) &&
         header.payload_bytes <= kMaxChunkPayload;
}

std::string_view chunk_type_name(uint16_t type) {
  switch (static_cast<ChunkType>(type)) {
    case ChunkType::kMetadata: return "metadata";
    case ChunkType::kStrings: return "strings";
    case ChunkType::kTracks: return "tracks";
    case ChunkType::kEvents: return "events";
    case ChunkType::kCounters: return "counters";
    case ChunkType::kEnd: return "end";
    case ChunkType::kClockSync: return "clock sync";
    case ChunkType::kCaptureWindows: return "capture windows";
  }
  return "unknown";
}

// pread that retries short reads; returns bytes read (less than size only at EOF).
size_t read_at(int fd, void* data, size_t size, uint64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, static_cast<char*>(data) + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(path + ": read failed at byte " + std::to_string(offset + done) + ": " + errno_text(errno));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

bool parse_strings(const std::vector<char>& payload, uint32_t count,
                   std::vector<std::pair<uint32_t, std::string>>& out) {
  size_t pos = 0;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t id = 0, length = 0;
    if (payload.size() - pos < 8) return false;
    std::memcpy(&id, payload.data() + pos, 4);
    std::memcpy(&length, payload.data() + pos + 4, 4);
    pos += 8;
    if (payload.size() - pos < length) return false;
    out.emplace_back(id, std::string(payload.data() + pos, length));
    pos += length;
  }
  return pos == payload.size();
}

// Appends a payload of `count` fixed-size records; false if the sizes disagree.
template <typename Record>
bool append_records(const std::vector<char>& payload, uint32_t count, std::vector<Record>& out) {
  if (payload.size() != uint64_t{count} * sizeof(Record)) return false;
  const size_t first = out.size();
  out.resize(first + count);
  std::memcpy(out.data() + first, payload.data(), payload.size());
  return true;
}

}  // namespace

// ---------------------------------------------------------------- writer ---

namespace {

// The writer's lock for as long as its shard is open: a live writer is told
// from a shard left behind (shard_in_use). False when another process holds
// it; a file system without locks lets every writer through.
bool lock_for_writing(int fd) { return ::flock(fd, LOCK_EX | LOCK_NB) == 0 || errno != EWOULDBLOCK; }

}  // namespace

ShardWriter::ShardWriter(ShardWriter&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), device_(other.device_), inode_(other.inode_), reopened_(other.reopened_),
      offset_(other.offset_), path_(std::move(other.path_)), error_(std::move(other.error_)) {}

ShardWriter& ShardWriter::operator=(ShardWriter&& other) noexcept {
  if (this != &other) {
    close_own_file();
    fd_ = std::exchange(other.fd_, -1);
    device_ = other.device_;
    inode_ = other.inode_;
    reopened_ = other.reopened_;
    offset_ = other.offset_;
    path_ = std::move(other.path_);
    error_ = std::move(other.error_);
  }
  return *this;
}

ShardWriter::~ShardWriter() { close_own_file(); }

void ShardWriter::release_after_fork() {
  // The child's copy of the descriptor only: the parent's lock and shard stay as they are.
  close_own_file();
}

bool ShardWriter::holds_own_file() const {
  struct stat st {};
  return fd_ >= 0 && ::fstat(fd_, &st) == 0 && st.st_dev == device_ && st.st_ino == inode_;
}

void ShardWriter::close_own_file() {
  // A descriptor the program took over is the program's to close.
  if (holds_own_file()) ::close(fd_);
  fd_ = -1;
}

bool ShardWriter::ensure_own_file() {
  if (holds_own_file()) return true;
  // What was written stays: the shard is appended to where it ended.
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    fd_ = -1;
    return fail("shard " + path_ + " was closed by the program and cannot be opened again: " + errno_text(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_dev != device_ || st.st_ino != inode_ || !lock_for_writing(fd)) {
    ::close(fd);
    fd_ = -1;
    return fail("shard " + path_ + " was closed by the program, and another file has taken its place");
  }
  fd_ = fd;
  ++reopened_;
  return true;
}

bool ShardWriter::fail(std::string message) {
  error_ = std::move(message);
  return false;
}

bool shard_in_use(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return held;
}

bool shard_folder_in_use(const std::string& folder) {
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(folder, ignored)) {
    if (is_shard_file(entry.path().filename().string()) && shard_in_use(entry.path().string())) return true;
  }
  return false;
}

bool ShardWriter::open(const std::string& path, const RankMetadata& metadata, int64_t now_ns) {
  path_ = path;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return fail("cannot create shard " + path + ": " + errno_text(errno));
  // Emptied only once it is this writer's: a live process's shard is never cut.
  if (!lock_for_writing(fd_) || (::ftruncate(fd_, 0) != 0 && errno != EINVAL)) {
    const std::string why = errno == EWOULDBLOCK ? "a running process writes it" : errno_text(errno);
    ::close(fd_);
    fd_ = -1;
    return fail("cannot create shard " + path + ": " + why);
  }
  ShardFileHeader header{};
  std::memcpy(header.magic, kShardMagic, sizeof(kShardMagic));
  header.version = kShardVersion;
  header.header_bytes = sizeof(ShardFileHeader);
  header.rank = metadata.rank;
  header.world_size = metadata.world_size;
  header.header_crc = header_crc(header);
  const ssize_t n = ::pwrite(fd_, &header, sizeof(header), 0);
  if (n != static_cast<ssize_t>(sizeof(header))) {
    const int error_number = n < 0 ? errno : ENOSPC;
    // A header-less file would only confuse the merge; devices are left alone.
    struct stat st {};
    if (::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode)) ::unlink(path.c_str());
    ::close(fd_);
    fd_ = -1;
    return fail("cannot write shard " + path + ": " + errno_text(error_number));
  }
  offset_ = sizeof(header);
  struct stat st {};
  ::fstat(fd_, &st);
  device_ = st.st_dev;
  inode_ = st.st_ino;
  return write_metadata(metadata, now_ns);
}

bool ShardWriter::open_existing(const std::string& path) {
  path_ = path;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd_ < 0) return fail("cannot open shard " + path + ": " + errno_text(errno));
  if (!lock_for_writing(fd_)) {
    ::close(fd_);
    fd_ = -1;
    return fail("cannot add to shard " + path + ": a running process writes it");
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || static_cast<uint64_t>(st.st_size) < sizeof(ShardFileHeader)) {
    ::close(fd_);
    fd_ = -1;
    return fail(path + " is not a shard to append to");
  }
  offset_ = static_cast<uint64_t>(st.st_size);
  device_ = st.st_dev;
  inode_ = st.st_ino;
  return true;
}

bool ShardWriter::write_chunk(ChunkType type, uint16_t flags, const void* payload, uint32_t payload_bytes,
                              uint32_t item_count, int64_t first_ns, int64_t last_ns) {
  if (fd_ < 0) return fail("shard " + path_ + " is not open");
  if (!ensure_own_file()) return false;
  if (payload_bytes > kMaxChunkPayload) return fail("chunk of " + std::to_string(payload_bytes) + " bytes is too large");
  ChunkHeader header{};
  header.magic = kChunkMagic;
  header.type = static_cast<uint16_t>(type);
  header.flags = flags;
  header.payload_bytes = payload_bytes;
  header.item_count = item_count;
  header.first_ns = first_ns;
  header.last_ns = last_ns;
  header.payload_crc = crc32c(payload, payload_bytes);
  header.header_crc = header_crc(header);

  iovec parts[2] = {{&header, sizeof(header)}, {const_cast<void*>(payload), payload_bytes}};
  const size_t total = sizeof(header) + payload_bytes;
  // Every chunk but the closing ones keeps kCloseReserveBytes allocated past
  // itself: on a full disk the chunk is refused, and the shard's last
  // counters (events_unwritten among them) and end record still fit.
  if (!closing_ && reserving_ &&
      ::fallocate(fd_, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset_), static_cast<off_t>(total + kCloseReserveBytes)) != 0) {
    if (errno == ENOSPC || errno == EDQUOT) {
      return fail("writing shard " + path_ + " at byte " + std::to_string(offset_) + " failed: " + errno_text(errno) +
                  " (the room kept for the shard's end is left for it)");
    }
    reserving_ = false;  // a file system that cannot allocate ahead: chunks go as they can
  }
  size_t done = 0;
  while (done < total) {
    // Skip the parts already written.
    iovec rest[2];
    int count = 0;
    size_t skip = done;
    for (const iovec& part : parts) {
      if (skip >= part.iov_len) {
        skip -= part.iov_len;
        continue;
      }
      rest[count++] = {static_cast<char*>(part.iov_base) + skip, part.iov_len - skip};
      skip = 0;
    }
    const ssize_t n = ::pwritev(fd_, rest, count, static_cast<off_t>(offset_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error_number = n < 0 ? errno : ENOSPC;
      // Drop the partial chunk so the shard stays clean for later chunks.
      if (::ftruncate(fd_, static_cast<off_t>(offset_)) != 0) { /* the reader resyncs past it */ }
      return fail("writing shard " + path_ + " at byte " + std::to_string(offset_) + " failed: " +
                  errno_text(error_number));
    }
    done += static_cast<size_t>(n);
  }
  offset_ += total;
  return true;
}

bool ShardWriter::write_events(std::span<Event> events) {
  if (events.empty()) return true;
  // A thread's events mostly come in order: checking costs a fraction of sorting.
  if (!std::is_sorted(events.begin(), events.end(), event_time_order)) {
    std::sort(events.begin(), events.end(), event_time_order);
  }
  int64_t last = INT64_MIN;
  for (const Event& e : events) last = std::max(last, e.end_ns);
  return write_chunk(ChunkType::kEvents, kChunkSortedByBegin, events.data(),
                     static_cast<uint32_t>(events.size_bytes()), static_cast<uint32_t>(events.size()),
                     events.front().begin_ns, last);
}

bool ShardWriter::write_strings(std::span<const std::pair<uint32_t, std::string_view>> strings, int64_t now_ns) {
  std::string payload;
  for (const auto& [id, text] : strings) {
    const auto length = static_cast<uint32_t>(text.size());
    payload.append(reinterpret_cast<const char*>(&id), 4);
    payload.append(reinterpret_cast<const char*>(&length), 4);
    payload.append(text);
  }
  return write_chunk(ChunkType::kStrings, 0, payload.data(), static_cast<uint32_t>(payload.size()),
                     static_cast<uint32_t>(strings.size()), now_ns, now_ns);
}

bool ShardWriter::write_tracks(std::span<const Track> tracks, int64_t now_ns) {
  return write_chunk(ChunkType::kTracks, 0, tracks.data(), static_cast<uint32_t>(tracks.size_bytes()),
                     static_cast<uint32_t>(tracks.size()), now_ns, now_ns);
}

bool ShardWriter::write_metadata(const RankMetadata& metadata, int64_t now_ns) {
  const std::string text = metadata.encode();
  return write_chunk(ChunkType::kMetadata, 0, text.data(), static_cast<uint32_t>(text.size()), 1, now_ns, now_ns);
}

bool ShardWriter::write_counters(const Counters& counters, int64_t now_ns) {
  const std::string text = counters.encode();
  return write_chunk(ChunkType::kCounters, 0, text.data(), static_cast<uint32_t>(text.size()),
                     static_cast<uint32_t>(counters.entries().size()), now_ns, now_ns);
}

bool ShardWriter::write_sync_points(std::span<const SyncPoint> points, int64_t now_ns) {
  return write_chunk(ChunkType::kClockSync, 0, points.data(), static_cast<uint32_t>(points.size_bytes()),
                     static_cast<uint32_t>(points.size()), now_ns, now_ns);
}

bool ShardWriter::write_capture_windows(std::span<const CaptureWindow> windows, WindowHolds holds, int64_t now_ns) {
  const uint16_t flags = holds == WindowHolds::kEventsEnded ? kChunkWindowsOfEndedEvents : 0;
  return write_chunk(ChunkType::kCaptureWindows, flags, windows.data(), static_cast<uint32_t>(windows.size_bytes()),
                     static_cast<uint32_t>(windows.size()), now_ns, now_ns);
}

bool ShardWriter::close(const Counters& counters, int64_t now_ns, Keeping keeping) {
  closing_ = true;
  const bool written = write_counters(counters, now_ns) && write_chunk(ChunkType::kEnd, 0, nullptr, 0, 0, now_ns, now_ns);
  // What was kept past the end and not needed goes back to the file system.
  if (reserving_ && written && ::ftruncate(fd_, static_cast<off_t>(offset_)) != 0) { /* kept until the file goes: harmless */ }
  closing_ = false;
  const bool synced = fd_ >= 0 && (keeping == Keeping::kTemporary || ::fdatasync(fd_) == 0 ||
                                   fail("syncing shard " + path_ + " failed: " + errno_text(errno)));
  close_own_file();
  return written && synced;
}

// ---------------------------------------------------------------- reader ---

ShardFile::ShardFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw Error("cannot open shard " + path + ": " + errno_text(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int error_number = errno;
    ::close(fd_);
    throw Error("cannot stat shard " + path + ": " + errno_text(error_number));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  const size_t got = read_at(fd_, &header_, sizeof(header_), 0, path);
  if (got < sizeof(kShardMagic) || std::memcmp(header_.magic, kShardMagic, sizeof(kShardMagic)) != 0) {
    ::close(fd_);
    throw Error(path + " is not a rankscope shard (no shard header at byte 0)");
  }
  const bool header_intact = got == sizeof(header_) && header_.header_crc == header_crc(header_);
  if (header_intact && header_.version != kShardVersion) {
    ::close(fd_);
    throw Error(path + ": shard format version " + std::to_string(header_.version) +
                " is not supported; this rankscope reads version " + std::to_string(kShardVersion));
  }
  if (!header_intact) {
    // The chunks carry everything the header does; scan() reports the damage.
    header_.rank = -1;
    header_.world_size = 0;
  }
}

ShardFile::~ShardFile() {
  if (fd_ >= 0) ::close(fd_);
}

ShardScan ShardFile::scan() const {
  ShardScan scan;
  scan.path = path_;
  scan.header_rank = header_.rank;
  scan.header_world_size = header_.world_size;
  ShardDamage& damage = scan.damage;
  if (header_.rank < 0) {
    damage.problems.push_back(path_ + ": file header damaged at byte 0; reading the chunks after it");
  }

  // Where the first readable chunk header at or after `from` begins (before
  // `until`); size_ when there is none.
  std::vector<char> window;
  const auto next_chunk_from = [&](uint64_t from, uint64_t until = UINT64_MAX) {
    window.resize(1 << 20);
    const uint64_t last = std::min(until, size_);
    for (uint64_t base = from; base + sizeof(ChunkHeader) <= size_ && base < last;
         base += window.size() - sizeof(ChunkHeader)) {
      const size_t n = read_at(fd_, window.data(), window.size(), base, path_);
      for (size_t i = 0; i + sizeof(ChunkHeader) <= n && base + i < last; ++i) {
        if (std::memcmp(window.data() + i, &kChunkMagic, 4) != 0) continue;
        ChunkHeader candidate;
        std::memcpy(&candidate, window.data() + i, sizeof(candidate));
        if (header_is_valid(candidate)) return base + i;
      }
      if (n < window.size()) break;
    }
    return size_;
  };
  std::vector<char> payload;
  uint64_t offset = sizeof(ShardFileHeader);
  while (offset < size_) {
    ChunkHeader header{};
    const size_t got = size_ - offset >= sizeof(header) ? read_at(fd_, &header, sizeof(header), offset, path_) : 0;
    if (got == sizeof(header) && header_is_valid(header)) {
      const uint64_t end = offset + sizeof(header) + header.payload_bytes;
      const bool is_events = header.type == static_cast<uint16_t>(ChunkType::kEvents);
      // A write cut short (the process killed mid-write, a full disk) may be
      // followed by chunks written later (by `rankscope run`, after the
      // process died): they begin inside this chunk's extent.
      const auto cut_short = [&](uint64_t later_chunk) {
        const uint64_t present = std::min(later_chunk, size_) - offset;
        damage.truncated_bytes += present;
        if (is_events) damage.events_lost += header.item_count;
        damage.problems.push_back(path_ + ": " + std::string(chunk_type_name(header.type)) + " chunk at byte " +
                                  std::to_string(offset) + " is cut short (" + std::to_string(present) + " of " +
                                  std::to_string(end - offset) + " bytes present" +
                                  (later_chunk < size_ ? ", then a chunk written later" : "") + ")" +
                                  (is_events ? "; " + std::to_string(header.item_count) + " events lost" : ""));
      };
      if (end > size_) {
        const uint64_t later_chunk = next_chunk_from(offset + sizeof(header));
        cut_short(later_chunk);
        if (later_chunk == size_) break;
        offset = later_chunk;
        continue;
      }
      payload.resize(header.payload_bytes);
      read_at(fd_, payload.data(), payload.size(), offset + sizeof(header), path_);
      bool sound = crc32c(payload.data(), payload.size()) == header.payload_crc;
      if (sound) {
        switch (static_cast<ChunkType>(header.type)) {
          case ChunkType::kMetadata:
            scan.metadata = RankMetadata::decode(std::string_view(payload.data(), payload.size()));
            break;
          case ChunkType::kStrings:
            sound = parse_strings(payload, header.item_count, scan.strings);
            break;
          case ChunkType::kTracks:
            sound = append_records(payload, header.item_count, scan.tracks);
            break;
          case ChunkType::kEvents:
            sound = payload.size() == uint64_t{header.item_count} * sizeof(Event);
            if (sound && header.item_count > 0) {
              scan.event_chunks.push_back({offset + sizeof(header), header.item_count, header.first_ns,
                                           header.last_ns, (header.flags & kChunkSortedByBegin) != 0});
              scan.event_count += header.item_count;
              scan.first_ns = std::min(scan.first_ns, header.first_ns);
            }
            break;
          case ChunkType::kCounters:
            scan.counters = Counters::decode(std::string_view(payload.data(), payload.size()));
            break;
          case ChunkType::kEnd:
            scan.ended = true;
            break;
          case ChunkType::kClockSync:
            sound = append_records(payload, header.item_count, scan.sync_points);
            break;
          case ChunkType::kCaptureWindows: {
            std::vector<CaptureWindow> windows;
            sound = append_records(payload, header.item_count, windows) &&
                    std::all_of(windows.begin(), windows.end(), [](const CaptureWindow& w) { return w.from_ns < w.until_ns; });
            auto& kind = (header.flags & kChunkWindowsOfEndedEvents) != 0 ? scan.dumped_windows : scan.steered_windows;
            if (sound) {
              if (!kind) kind.emplace();
              kind->add_chunk(windows);
            }
            break;
          }
        }
        // Chunk types from a newer minor revision are skipped whole.
      }
      if (sound) {
        if (is_known_chunk_type(header.type)) scan.last_ns = std::max(scan.last_ns, header.last_ns);
      } else if (const uint64_t later_chunk = next_chunk_from(offset + sizeof(header), end); later_chunk < end) {
        cut_short(later_chunk);
        offset = later_chunk;
        continue;
      } else {
        ++damage.chunks_corrupt;
        if (is_events) damage.events_lost += header.item_count;
        damage.problems.push_back(path_ + ": " + std::string(chunk_type_name(header.type)) + " chunk at byte " +
                                  std::to_string(offset) + " fails its checksum; skipped" +
                                  (is_events ? " (" + std::to_string(header.item_count) + " events lost)" : ""));
      }
      offset = end;
      continue;
    }

    // No readable chunk header here: find the next one.
    if (size_ - offset < sizeof(header)) {
      damage.truncated_bytes += size_ - offset;
      damage.problems.push_back(path_ + ": the last " + std::to_string(size_ - offset) + " bytes (from byte " +
                                std::to_string(offset) + ") are a chunk header cut short");
      break;
    }
    const uint64_t next = next_chunk_from(offset + 1);
    ++damage.chunks_corrupt;
    damage.bytes_skipped += next - offset;
    damage.problems.push_back(path_ + ": unreadable data at bytes " + std::to_string(offset) + "-" +
                              std::to_string(next) + "; " +
                              (next < size_ ? "resumed at the next whole chunk" : "nothing readable after it"));
    offset = next;
  }
  if (scan.event_count == 0) scan.first_ns = scan.last_ns;
  return scan;
}

void ShardFile::read_events(const EventChunkRef& chunk, std::vector<Event>& out) const {
  out.resize(chunk.count);
  const size_t bytes = size_t{chunk.count} * sizeof(Event);
  if (read_at(fd_, out.data(), bytes, chunk.payload_offset, path_) != bytes) {
    throw Error(path_ + ": events chunk at byte " + std::to_string(chunk.payload_offset - sizeof(ChunkHeader)) +
                " vanished while merging (was the shard truncated?)");
  }
}

std::string shard_file_name(int32_t rank, std::string_view suffix) {
  char digits[16];
  std::snprintf(digits, sizeof(digits), "%05d", rank);
  return "rank-" + std::string(digits) + std::string(suffix);
}

std::optional<int32_t> shard_file_rank(std::string_view name, std::string_view suffix) {
  if (!name.starts_with("rank-") || !name.ends_with(suffix)) return std::nullopt;
  name.remove_prefix(5);
  name.remove_suffix(suffix.size());
  const auto rank = parse_integer<int32_t>(name);
  return rank && *rank >= 0 ? rank : std::nullopt;
}

bool is_shard_file(std::string_view name) { return name.size() > kShardSuffix.size() && name.ends_with(kShardSuffix); }

}  // namespace rankscope
