#include "rankscope/merge/merge.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <fcntl.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "clock_repair.h"
#include "happens_before.h"
#include "one_job.h"
#include "rankscope/clocksync/clock.h"
#include "rankscope/merge/rank_status.h"
#include "rankscope/model/counters.h"
#include "rankscope/model/crc32c.h"
#include "rankscope/model/error.h"
#include "rankscope/model/temporary_paths.h"
#include "rankscope/model/input_files.h"
#include "rankscope/model/shard.h"
#include "rankscope/model/text.h"
#include "rankscope/model/version.h"
#include "rankscope/mpi_exchange/gather.h"
#include "rankscope/timeline/schema.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope {
namespace {

using schema::Handle;

constexpr const char* kMissingName = "<name lost>";
// Beyond any id an agent gives: its string table's eight segments end at 16,711,680.
constexpr uint32_t kMaxLocalStringId = 1u << 24;
// Checks before the repair gives up; each reads every shard once. One finds
// the violations and one more confirms the shifts when the ranks that are off
// are off by one amount (one rank, or one node's ranks); K different amounts
// take about K + 1, as a check sees only the first rank out and the last rank
// in of each collective (every message is seen, with both its ranks).
constexpr int kMaxRepairRounds = 8;

// ------------------------------------------------------------ shards ---

struct OwnedShard {
  size_t input_index;
  std::unique_ptr<ShardFile> file;
  ShardScan scan;
  std::vector<uint32_t> name_map;  // local string id -> job string id
  Counters counters;               // what the agent counted plus what the merge found
  clocksync::ClockModel clock;     // identity when the rank measured nothing
  std::optional<std::vector<TimeSpan>> captured;  // its capture windows, on its clock (ShardScan::captured)
};

struct RankSummary {
  int32_t rank;
  int32_t world_size;
  uint64_t input_index;
  uint64_t events;
  uint64_t tracks;
  uint64_t counters;
  uint64_t sync_points;
  int64_t clock_bound;  // the largest bound of its clock model; -1 without one
  int64_t job_start_wall_ns;
  uint8_t ended;
  uint64_t windows;  // spans in /capture_windows
};

std::vector<size_t> assign_shards(const std::vector<std::string>& inputs, int process, int processes) {
  // Largest first onto the least loaded process, so every process sees the same plan.
  std::vector<std::pair<uint64_t, size_t>> by_size;
  for (size_t i = 0; i < inputs.size(); ++i) {
    struct stat st {};
    if (::stat(inputs[i].c_str(), &st) != 0) throw Error("cannot read shard " + inputs[i] + ": " + errno_text(errno));
    by_size.emplace_back(static_cast<uint64_t>(st.st_size), i);
  }
  std::stable_sort(by_size.begin(), by_size.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::vector<uint64_t> load(static_cast<size_t>(processes), 0);
  std::vector<size_t> mine;
  for (const auto& [bytes, index] : by_size) {
    const auto target = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    load[static_cast<size_t>(target)] += bytes + 1;
    if (target == process) mine.push_back(index);
  }
  std::sort(mine.begin(), mine.end());
  return mine;
}

Counters merged_counters(const ShardScan& scan) {
  Counters counters = scan.counters;
  counters.set(counter::kChunksCorrupt, scan.damage.chunks_corrupt);
  counters.set(counter::kEventsLost, scan.damage.events_lost);
  counters.set(counter::kBytesSkipped, scan.damage.bytes_skipped);
  counters.set(counter::kTruncatedBytes, scan.damage.truncated_bytes);
  // A process killed before its first flush captured events; they were lost with it.
  counters.set(counter::kNothingCaptured, scan.event_count == 0 && scan.damage.events_lost == 0 &&
                                                  scan.counters.get(counter::kKilledBySignal) == 0
                                              ? 1
                                              : 0);
  // Set once the events are merged; present from the start so every process
  // knows each rank's number of counters before writing.
  for (std::string_view name : {counter::kNamesMissing, counter::kClockViolations, counter::kClockViolationWorstNs, counter::kClockCheckSkipped,
                                counter::kClockViolationsRepaired, counter::kClockViolationsP2p, counter::kClockViolationsP2pRepaired,
                                counter::kP2pUnmatched}) {
    counters.set(name, 0);
  }
  return counters;
}

// Whether `bytes` can be written to `path`: the folder is writable, the
// process may write files that large, and (checked once) the disk has room.
std::string check_room(const std::string& path, uint64_t bytes, bool check_disk) {
  // What is needed is rounded up and what is there down, so a refusal never reads "needs 1 MiB, 1 MiB free".
  const auto size = [](uint64_t n, bool up) {
    const bool large = n >= (uint64_t{10} << 20);
    const uint64_t unit = large ? 1 << 20 : 1 << 10;
    return std::to_string(up ? (n + unit - 1) / unit : n / unit) + (large ? " MiB" : " KiB");
  };
  const auto needed = [&](uint64_t n) { return size(n, true); };
  const auto available = [&](uint64_t n) { return size(n, false); };
  rlimit limit{};
  if (::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < bytes) {
    return "cannot write the timeline " + path + ": it needs " + needed(bytes) +
           " but this process may write files of at most " + available(limit.rlim_cur) + " (ulimit -f)";
  }
  if (!check_disk) return {};
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot write the timeline: cannot create " + path + ": " + errno_text(errno);
  struct statvfs fs {};
  const bool known = ::fstatvfs(fd, &fs) == 0;
  ::close(fd);
  const uint64_t free_bytes = known ? uint64_t{fs.f_bavail} * fs.f_frsize : UINT64_MAX;
  if (free_bytes < bytes) {
    ::unlink(path.c_str());
    return "cannot write the timeline " + path + ": it needs " + needed(bytes) + " but only " + available(free_bytes) +
           " are free there (" + errno_text(ENOSPC) + ")";
  }
  return {};
}

// ------------------------------------------------------------- HDF5 ---

std::string with_errno(std::string message, int error_number) {
  if (error_number != 0) message += ": " + errno_text(error_number);
  return message;
}

class TimelineFile {
 public:
  TimelineFile(MPI_Comm comm, const std::string& path) : path_(path) {
    Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL);
    // The 1.10 file format checksums every piece of metadata (superblock,
    // object headers with their datatype and shape, chunk indexes): a flipped
    // byte there is refused by HDF5 instead of being trusted. The rows carry
    // their own checksums (Fletcher32 chunks, /event_checksums).
    H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110);
    errno = 0;
    file_ = Handle(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), H5Fclose);
    if (!file_.valid()) throw Error(with_errno("cannot create the timeline " + path, errno));
    collective_ = Handle(H5Pcreate(H5P_DATASET_XFER), H5Pclose);
    H5Pset_dxpl_mpio(collective_, H5FD_MPIO_COLLECTIVE);
    independent_ = Handle(H5Pcreate(H5P_DATASET_XFER), H5Pclose);
    H5Pset_dxpl_mpio(independent_, H5FD_MPIO_INDEPENDENT);
  }

  // A chunked dataset with HDF5's Fletcher32 checksum on every chunk of
  // `chunk_rows` rows, or a contiguous one (chunk_rows 0, or no rows).
  // Readers find a damaged chunk and leave out its rows (timeline.cpp).
  hid_t create(const char* name, hid_t type, std::vector<hsize_t> dims, hsize_t chunk_rows) {
    Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
    Handle links(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
    H5Pset_create_intermediate_group(links, 1);
    // Every element is written by the merge: filling the space first would write it all twice.
    Handle creation(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_fill_time(creation, H5D_FILL_TIME_NEVER);
    if (dims.at(0) > 0 && chunk_rows > 0) {
      std::vector<hsize_t> chunk = dims;
      chunk[0] = std::min(chunk_rows, dims[0]);
      H5Pset_chunk(creation, static_cast<int>(chunk.size()), chunk.data());
      H5Pset_fletcher32(creation);
    }
    Handle dataset(H5Dcreate2(file_, name, type, space, links, creation, H5P_DEFAULT), H5Dclose);
    if (!dataset.valid()) throw Error("cannot create /" + std::string(name) + " in " + path_);
    datasets_.push_back(std::move(dataset));
    return datasets_.back();
  }

  // Collective: parallel HDF5 writes checksummed (filtered) datasets only
  // with every process in the call, so a process with nothing to write
  // passes an empty `count`. `start` and `count` may list several runs of
  // rows (each `dims` long), in increasing order, taken from `data` in turn.
  void write(hid_t dataset, hid_t type, const std::vector<hsize_t>& start, const std::vector<hsize_t>& count,
             const void* data, const std::string& what, size_t dims = 1) {
    write(dataset, type, start, count, data, what, dims, collective_);
  }

  // One process alone, into a contiguous dataset (/events).
  void write_independently(hid_t dataset, hid_t type, hsize_t start, hsize_t count, const void* data,
                           const std::string& what) {
    if (count > 0) write(dataset, type, {start}, {count}, data, what, 1, independent_);
  }

  void attribute(const char* name, const std::string& value) {
    Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(type, std::max<size_t>(value.size(), 1));
    Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    Handle attribute(H5Acreate2(file_, name, type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    H5Awrite(attribute, type, value.c_str());
  }

  void attribute(const char* name, int64_t value) {
    Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    Handle attribute(H5Acreate2(file_, name, H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    H5Awrite(attribute, H5T_NATIVE_INT64, &value);
  }

  // Collective. Returns the error, if any, so callers can agree on it first.
  std::string close() {
    datasets_.clear();
    errno = 0;
    const herr_t status = H5Fclose(file_.release());
    return status < 0 ? with_errno("closing the timeline " + path_ + " failed", errno) : std::string();
  }

  ~TimelineFile() {
    datasets_.clear();
    file_.reset();
  }

  const std::string& path() const { return path_; }

 private:
  void write(hid_t dataset, hid_t type, const std::vector<hsize_t>& start, const std::vector<hsize_t>& count,
             const void* data, const std::string& what, size_t dims, hid_t transfer) {
    Handle file_space(H5Dget_space(dataset), H5Sclose);
    if (H5Sget_simple_extent_npoints(file_space) == 0) return;  // an empty table has no storage to write to
    hsize_t elements = 0;
    H5Sselect_none(file_space);
    for (size_t i = 0; i + dims <= start.size(); i += dims) {
      hsize_t run = 1;
      for (size_t d = 0; d < dims; ++d) run *= count[i + d];
      if (run == 0) continue;
      H5Sselect_hyperslab(file_space, H5S_SELECT_OR, &start[i], nullptr, &count[i], nullptr);
      elements += run;
    }
    const hsize_t memory_elements = std::max<hsize_t>(elements, 1);
    Handle memory_space(H5Screate_simple(1, &memory_elements, nullptr), H5Sclose);
    static const Event nothing{};  // HDF5 wants a buffer even for no rows
    if (elements == 0) {
      H5Sselect_none(memory_space);
      data = &nothing;
    }
    errno = 0;
    if (H5Dwrite(dataset, type, memory_space, file_space, transfer, data) < 0) {
      throw Error(with_errno("writing " + what + " to " + path_ + " failed", errno));
    }
  }

  std::string path_;
  Handle file_;
  Handle collective_, independent_;
  std::vector<Handle> datasets_;
};

// ----------------------------------------------------- event merging ---

// Maps one of a rank's events onto the reference clock and moves it by the
// rank's repair shift (0 without merge --repair-clock).
void put_on_reference_clock(clocksync::ClockMapper& clock, int64_t repair_shift, Event& event) {
  const clocksync::MappedTime begin = clock.map(event.begin_ns);
  const clocksync::MappedTime end = clock.map(event.end_ns);
  event.begin_ns = begin.time_ns + repair_shift;
  event.end_ns = end.time_ns + repair_shift;
  if (begin.outside || end.outside) event.flags |= kFlagClockOutsideModel;
  if (repair_shift != 0) event.flags |= kFlagClockRepaired;
}

// Writes one rank's events to /events, each process its own ranks' alone
// (the dataset is contiguous), and checksums them as they go: a CRC-32C of
// every kEventChecksumRows rows, counted from the rank's first.
class EventWriter {
 public:
  EventWriter(TimelineFile& out, hid_t dataset, hid_t type, uint64_t first_row)
      : out_(out), dataset_(dataset), type_(type), next_row_(first_row) {}

  void write(const std::vector<Event>& events, const std::string& what) {
    out_.write_independently(dataset_, type_, next_row_, events.size(), events.data(), what);
    next_row_ += events.size();
    for (size_t done = 0; done < events.size();) {
      const size_t n = std::min<size_t>(events.size() - done, schema::kEventChecksumRows - rows_in_block_);
      crc_ = crc32c(events.data() + done, n * sizeof(Event), crc_);
      rows_in_block_ += n;
      done += n;
      if (rows_in_block_ == schema::kEventChecksumRows) end_block();
    }
  }

  // The rank's checksums, its last block included.
  std::vector<uint32_t> checksums() {
    if (rows_in_block_ > 0) end_block();
    return std::move(checksums_);
  }

 private:
  void end_block() {
    checksums_.push_back(crc_);
    crc_ = 0;
    rows_in_block_ = 0;
  }

  TimelineFile& out_;
  hid_t dataset_;
  hid_t type_;
  uint64_t next_row_;
  uint32_t crc_ = 0;
  uint64_t rows_in_block_ = 0;
  std::vector<uint32_t> checksums_;
};

// Writes one rank's events in time order. Each chunk is sorted on its own, and
// no event of a chunk begins before the chunk's first_ns; so once the chunks
// are taken in order of first_ns, every open event that begins before the next
// chunk's first_ns is final. Only the chunks whose time ranges overlap are in
// memory at once, however long the shard.
class RankEventMerger {
 public:
  RankEventMerger(const OwnedShard& shard, EventWriter& out, uint64_t block, int64_t repair_shift,
                  HappensBeforeCheck& check)
      : shard_(shard), out_(out), block_(block),
        clock_(shard.clock), correct_clock_(!shard.clock.points().empty()), repair_shift_(repair_shift),
        check_(check) {
    out_block_.reserve(block);
  }

  void run() {
    std::vector<EventChunkRef> chunks = shard_.scan.event_chunks;
    std::stable_sort(chunks.begin(), chunks.end(),
                     [](const EventChunkRef& a, const EventChunkRef& b) { return a.first_ns < b.first_ns; });
    size_t next_chunk = 0;
    while (next_chunk < chunks.size() || !open_.empty()) {
      if (next_chunk < chunks.size()) open(chunks[next_chunk++]);
      const int64_t watermark = next_chunk < chunks.size() ? chunks[next_chunk].first_ns : INT64_MAX;
      emit_below(watermark);
    }
    flush();
  }

  const std::array<uint64_t, kEventKindCount + 1>& kind_counts() const { return kind_counts_; }
  uint64_t names_missing() const { return names_missing_; }
  int64_t first_ns() const { return first_ns_; }
  int64_t last_ns() const { return last_ns_; }

 private:
  struct Cursor {
    std::vector<Event> events;
    size_t position = 0;
    size_t limit = 0;  // end of the part below the current watermark
  };

  void open(const EventChunkRef& chunk) {
    Cursor cursor;
    if (!spare_.empty()) {
      cursor.events = std::move(spare_.back());
      spare_.pop_back();
    }
    shard_.file->read_events(chunk, cursor.events);
    if (!chunk.sorted || !std::is_sorted(cursor.events.begin(), cursor.events.end(), event_time_order)) {
      std::sort(cursor.events.begin(), cursor.events.end(), event_time_order);
    }
    open_.push_back(std::move(cursor));
  }

  // Emits, in order, every open event that begins before `watermark`.
  void emit_below(int64_t watermark) {
    size_t active = 0;
    for (Cursor& c : open_) {
      c.limit = static_cast<size_t>(
          std::lower_bound(c.events.begin() + static_cast<long>(c.position), c.events.end(), watermark,
                           [](const Event& e, int64_t t) { return e.begin_ns < t; }) -
          c.events.begin());
      if (c.limit > c.position) ++active;
    }
    if (active == 1) {
      for (Cursor& c : open_) {
        if (c.limit > c.position) append(c.events.data() + c.position, c.limit - c.position);
        c.position = c.limit;
      }
    } else if (active > 1) {
      while (true) {
        // The cursor whose next event comes first (the earlier cursor on a
        // tie), and the one after it; the first's events go out in one run
        // until the second's next event is due.
        Cursor* best = nullptr;
        Cursor* second = nullptr;
        for (Cursor& c : open_) {
          if (c.position >= c.limit) continue;
          if (!best || event_time_order(c.events[c.position], best->events[best->position])) {
            second = best;
            best = &c;
          } else if (!second || event_time_order(c.events[c.position], second->events[second->position])) {
            second = &c;
          }
        }
        if (!best) break;
        size_t end = best->position + 1;
        if (!second) {
          end = best->limit;
        } else {
          const Event& next = second->events[second->position];
          const bool best_first_on_ties = best < second;
          while (end < best->limit && (event_time_order(best->events[end], next) ||
                                       (best_first_on_ties && !event_time_order(next, best->events[end])))) {
            ++end;
          }
        }
        append(&best->events[best->position], end - best->position);
        best->position = end;
      }
    }
    for (size_t i = 0; i < open_.size();) {
      if (open_[i].position == open_[i].events.size()) {
        spare_.push_back(std::move(open_[i].events));
        open_.erase(open_.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
  }

  void append(const Event* events, size_t count) {
    while (count > 0) {
      const size_t n = std::min(count, block_ - out_block_.size());
      const size_t first = out_block_.size();
      out_block_.insert(out_block_.end(), events, events + n);
      finish(out_block_.data() + first, n);
      events += n;
      count -= n;
      if (out_block_.size() == block_) flush();
    }
  }

  // Puts times on the reference clock, maps names to the job's string table
  // and keeps the rank's statistics.
  void finish(Event* events, size_t count) {
    if (correct_clock_) {
      for (Event* e = events; e != events + count; ++e) put_on_reference_clock(clock_, repair_shift_, *e);
    }
    const uint32_t* map = shard_.name_map.data();
    const size_t map_size = shard_.name_map.size();
    const uint32_t missing = shard_.name_map.back();
    for (Event* e = events; e != events + count; ++e) {
      const uint32_t mapped = e->name_id < map_size ? map[e->name_id] : UINT32_MAX;
      names_missing_ += mapped == UINT32_MAX;
      e->name_id = mapped == UINT32_MAX ? missing : mapped;
      const auto kind = static_cast<size_t>(e->kind);
      ++kind_counts_[kind <= kEventKindCount ? kind : 0];
      first_ns_ = std::min(first_ns_, e->begin_ns);
      last_ns_ = std::max(last_ns_, e->end_ns);
      check_.add(shard_.scan.rank(), *e);
    }
  }

  void flush() {
    if (out_block_.empty()) return;
    out_.write(out_block_, "events of rank " + std::to_string(shard_.scan.rank()));
    out_block_.clear();
  }

  const OwnedShard& shard_;
  EventWriter& out_;
  uint64_t block_;
  std::vector<Cursor> open_;
  std::vector<std::vector<Event>> spare_;
  std::vector<Event> out_block_;
  clocksync::ClockMapper clock_;
  bool correct_clock_;
  int64_t repair_shift_;
  HappensBeforeCheck& check_;
  std::array<uint64_t, kEventKindCount + 1> kind_counts_{};
  uint64_t names_missing_ = 0;
  int64_t first_ns_ = INT64_MAX;
  int64_t last_ns_ = INT64_MIN;
};

schema::RankRow rank_row(const OwnedShard& shard, uint64_t event_offset, uint64_t track_offset,
                         uint64_t counter_offset, int64_t repair_shift) {
  schema::RankRow row{};
  const ShardScan& scan = shard.scan;
  const RankMetadata metadata = scan.metadata.value_or(RankMetadata{});
  row.rank = scan.rank();
  row.local_rank = metadata.local_rank;
  row.node_id = metadata.node_id;
  row.status = static_cast<uint8_t>(shard_rank_status(scan));
  row.pid = metadata.pid;
  row.event_offset = event_offset;
  row.event_count = scan.event_count;
  row.track_offset = track_offset;
  row.track_count = scan.tracks.size();
  row.counter_offset = counter_offset;
  row.counter_count = shard.counters.entries().size();
  row.last_heard_ns = shard.clock.to_reference(scan.last_ns).time_ns + repair_shift;
  row.start_wall_ns = metadata.start_wall_ns;
  schema::set_text(row.host, metadata.host);
  schema::set_text(row.gpu_uuids, metadata.gpu_uuids);
  schema::set_text(row.launcher, metadata.launcher);
  schema::set_text(row.agent_version, metadata.agent_version);
  schema::set_text(row.capture, metadata.capture);
  schema::set_text(row.shard, std::filesystem::absolute(scan.path).string());
  schema::set_text(row.job_id, metadata.job.id);
  row.job_start_wall_ns = metadata.job.start_wall_ns;
  return row;
}

// --------------------------------------------------------- clock repair ---

// Feeds the check every collective and message of this process's ranks, on
// the reference clock and moved by `shifts`. The check needs no order, so the
// chunks are read as they lie in the shard, one at a time. Ranks without
// clock measurements are neither checked nor repaired.
void feed_check(const std::vector<OwnedShard>& shards, const std::vector<int64_t>& shifts, HappensBeforeCheck& check) {
  std::vector<Event> chunk;
  for (const auto& shard : shards) {
    if (shard.clock.points().empty()) continue;
    const int32_t rank = shard.scan.rank();
    clocksync::ClockMapper clock(shard.clock);
    for (const EventChunkRef& ref : shard.scan.event_chunks) {
      shard.file->read_events(ref, chunk);
      for (Event& e : chunk) {
        if (!HappensBeforeCheck::applies_to(e)) continue;
        put_on_reference_clock(clock, shifts[static_cast<size_t>(rank)], e);
        check.add(rank, e);
      }
    }
  }
}

struct ClockRepairOutcome {
  std::vector<int64_t> shifts;               // per rank
  std::vector<uint64_t> violations_before;   // per rank, as counted before any shift
  std::vector<uint64_t> message_violations_before;  // the same, for messages
  std::vector<int32_t> contradictory;        // ranks no constant shift repairs
  bool gave_up = false;                      // kMaxRepairRounds were not enough to settle
};

// Collective. Checks the collectives and messages before anything is written
// and solves for the shifts, checking again with them until a check finds
// nothing new.
// Memory: one chunk and the check's budget, whatever the length of the job.
ClockRepairOutcome repair_clocks(MPI_Comm comm, const std::vector<OwnedShard>& shards,
                                 const std::vector<int64_t>& clock_bounds, uint64_t check_memory_bytes) {
  ClockRepair repair(static_cast<int32_t>(clock_bounds.size()));
  ClockRepairOutcome outcome;
  for (int round = 1;; ++round) {
    HappensBeforeCheck check(check_memory_bytes);
    std::string error;
    try {
      feed_check(shards, repair.shifts(), check);
    } catch (const Error& e) {
      error = e.what();
    }
    // Every process takes part, whatever happened above, so none waits forever.
    const HappensBeforeCheck::Result found = check.finish(comm, clock_bounds);
    check_all(comm, error);
    if (round == 1) {
      outcome.violations_before = found.violations;
      outcome.message_violations_before = found.message_violations;
    }
    if (!repair.learn(found.worst_by_pair)) break;
    repair.solve();
    if (round == kMaxRepairRounds) {
      outcome.gave_up = true;
      break;
    }
  }
  outcome.shifts = repair.shifts();
  outcome.contradictory = repair.contradictory();
  return outcome;
}

// What the repair did, for the merge's warnings: every process computes the
// same lines.
std::vector<std::string> describe_repair(const ClockRepairOutcome& outcome,
                                         const HappensBeforeCheck::Result& after) {
  std::vector<std::string> lines;
  const auto total = [](const std::vector<uint64_t>& per_rank) {
    return std::accumulate(per_rank.begin(), per_rank.end(), uint64_t{0});
  };
  const uint64_t collectives_before = total(outcome.violations_before), collectives_after = total(after.violations);
  const uint64_t messages_before = total(outcome.message_violations_before),
                 messages_after = total(after.message_violations);
  const bool collectives = collectives_before + collectives_after > 0, messages = messages_before + messages_after > 0;
  if (!collectives && !messages) return lines;
  // "3 collectives", "5 messages" or "3 collectives and 5 messages"; unnamed the second time.
  const auto counts = [&](uint64_t collective_count, uint64_t message_count, bool named) {
    std::string text = collectives ? std::to_string(collective_count) + (named ? " collectives" : "") : "";
    if (messages) text += (text.empty() ? "" : " and ") + std::to_string(message_count) + (named ? " messages" : "");
    return text;
  };
  std::string moved;
  for (size_t r = 0; r < outcome.shifts.size(); ++r) {
    if (outcome.shifts[r] == 0) continue;
    moved += (moved.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " by " +
             (outcome.shifts[r] > 0 ? "+" : "") + std::to_string(outcome.shifts[r]) + " ns";
  }
  lines.push_back("--repair-clock: " + counts(collectives_before, messages_before, true) +
                  " broke causality before the repair, " + counts(collectives_after, messages_after, false) +
                  " after it; " + (moved.empty() ? "no rank moved" : "moved " + moved));
  if (!outcome.contradictory.empty()) {
    lines.push_back("--repair-clock: no constant shift repairs ranks " + format_rank_list(outcome.contradictory) +
                    ": their collectives and messages need them both earlier and later than other ranks (a clock "
                    "that stepped or drifted between measurements); their times are left as measured");
  }
  if (outcome.gave_up) {
    lines.push_back("--repair-clock: still finding new violations after " + std::to_string(kMaxRepairRounds) +
                    " rounds; the shifts of the last round were used");
  }
  return lines;
}

// ------------------------------------------------------------- phases ---

// 1. This process's share of the shards, scanned.
std::vector<OwnedShard> scan_own_shards(MPI_Comm comm, const std::vector<std::string>& inputs) {
  int process = 0, processes = 1;
  MPI_Comm_rank(comm, &process);
  MPI_Comm_size(comm, &processes);
  std::vector<OwnedShard> shards;
  std::string error;
  try {
    for (size_t index : assign_shards(inputs, process, processes)) {
      // Its rank is still writing it: a merge now would call it dead, and
      // take only what it has flushed so far.
      if (shard_in_use(inputs[index])) {
        throw Error(inputs[index] + " is being written by a running process: merge a job's shards once it has "
                                    "ended (`rankscope trigger JOB dump` writes a running job's flight recorder)");
      }
      OwnedShard shard{index, std::make_unique<ShardFile>(inputs[index]), {}, {}, {}, {}, {}};
      shard.scan = shard.file->scan();
      if (shard.scan.rank() < 0) {
        throw Error(inputs[index] + ": neither the file header nor any metadata chunk says which rank wrote it");
      }
      shard.counters = merged_counters(shard.scan);
      shard.clock = clocksync::ClockModel(shard.scan.sync_points);
      shard.captured = shard.scan.captured();
      shards.push_back(std::move(shard));
    }
  } catch (const Error& e) {
    error = e.what();
  }
  check_all(comm, error);
  return shards;
}

// Where each rank's rows go in the timeline's tables, and what every process
// knows of every rank.
struct JobLayout {
  int32_t world_size = 0;
  std::vector<std::optional<RankSummary>> by_rank;  // nothing for a missing rank
  // Per rank r, its first row in each table; entry world_size is the total.
  std::vector<uint64_t> event_offset, track_offset, counter_offset, point_offset, checksum_offset, window_offset;
  std::vector<int64_t> clock_bounds;  // per rank; -1 without a clock model
  bool clock_corrected = false;       // every rank measured its offset to rank 0
};

// 2. Agree on who is who: the same layout on every process, or the same Error.
JobLayout agree_on_layout(MPI_Comm comm, const std::vector<OwnedShard>& shards, const std::vector<std::string>& inputs) {
  std::vector<RankSummary> local_summaries;
  std::vector<std::string> local_job_ids;
  for (const auto& shard : shards) {
    const JobIdentity job = shard.scan.metadata.value_or(RankMetadata{}).job;
    local_summaries.push_back({shard.scan.rank(), shard.scan.world_size(), shard.input_index, shard.scan.event_count,
                               shard.scan.tracks.size(), shard.counters.entries().size(),
                               shard.scan.sync_points.size(),
                               shard.clock.points().empty() ? -1 : shard.clock.max_bound_ns(), job.start_wall_ns,
                               static_cast<uint8_t>(shard.scan.ended), shard.captured ? shard.captured->size() : 0});
    local_job_ids.push_back(job.id);
  }
  std::vector<RankSummary> summaries = allgather_rows(comm, local_summaries);
  // Gathered in the same order as the summaries.
  const std::vector<std::string> job_ids = allgather_strings(comm, local_job_ids);
  std::vector<JobIdentity> jobs(inputs.size());
  for (size_t i = 0; i < summaries.size(); ++i) {
    jobs[summaries[i].input_index] = {job_ids[i], summaries[i].job_start_wall_ns};
  }
  std::sort(summaries.begin(), summaries.end(), [](auto& a, auto& b) { return a.rank < b.rank; });

  // Sizes from the shards are checked before anything is sized by them.
  for (const auto& s : summaries) {
    const std::string& path = inputs[s.input_index];
    if (s.rank >= kMaxWorldSize || s.world_size < 0 || s.world_size > kMaxWorldSize) {
      throw Error(path + " says it is rank " + std::to_string(s.rank) + " of a job of " + std::to_string(s.world_size) +
                  " ranks; rankscope takes jobs of at most " + std::to_string(kMaxWorldSize) +
                  " ranks (is the shard damaged?)");
    }
    if (s.world_size != 0 && s.rank >= s.world_size) {
      throw Error(path + " says it is rank " + std::to_string(s.rank) + " of a job of only " +
                  std::to_string(s.world_size) + " ranks");
    }
  }
  std::vector<std::pair<std::string, JobIdentity>> jobs_by_rank;
  for (const auto& s : summaries) jobs_by_rank.emplace_back(inputs[s.input_index], jobs[s.input_index]);
  check_one_job(jobs_by_rank);

  JobLayout layout;
  for (const auto& s : summaries) layout.world_size = std::max({layout.world_size, s.world_size, s.rank + 1});
  for (size_t i = 0; i < summaries.size(); ++i) {
    const auto& s = summaries[i];
    if (i > 0 && summaries[i - 1].rank == s.rank) {
      throw Error("two shards are from rank " + std::to_string(s.rank) + ": " + inputs[summaries[i - 1].input_index] +
                  " and " + inputs[s.input_index]);
    }
    if (s.world_size != layout.world_size && s.world_size != 0) {
      throw Error(inputs[s.input_index] + " is from a job of " + std::to_string(s.world_size) +
                  " ranks, but other shards are from a job of " + std::to_string(layout.world_size));
    }
  }

  const auto ranks = static_cast<size_t>(layout.world_size);
  layout.by_rank.resize(ranks);
  for (const auto& s : summaries) layout.by_rank[static_cast<size_t>(s.rank)] = s;
  for (auto* offsets : {&layout.event_offset, &layout.track_offset, &layout.counter_offset, &layout.point_offset,
                        &layout.checksum_offset, &layout.window_offset}) {
    offsets->assign(ranks + 1, 0);
  }
  layout.clock_bounds.assign(ranks, -1);
  for (size_t r = 0; r < ranks; ++r) {
    const std::optional<RankSummary>& s = layout.by_rank[r];
    layout.event_offset[r + 1] = layout.event_offset[r] + (s ? s->events : 0);
    layout.track_offset[r + 1] = layout.track_offset[r] + (s ? s->tracks : 0);
    layout.counter_offset[r + 1] = layout.counter_offset[r] + (s ? s->counters : 0);
    layout.point_offset[r + 1] = layout.point_offset[r] + (s ? s->sync_points : 0);
    layout.window_offset[r + 1] = layout.window_offset[r] + (s ? s->windows : 0);
    layout.checksum_offset[r + 1] =
        layout.checksum_offset[r] + (s ? (s->events + schema::kEventChecksumRows - 1) / schema::kEventChecksumRows : 0);
    if (s) layout.clock_bounds[r] = s->clock_bound;
  }
  // Times are on rank 0's clock only if every rank measured its offset to it
  // (an offset of unknown bound is a conversion, not a measurement).
  const auto measured = [](const RankSummary& s) { return s.sync_points > 0 && s.clock_bound < kUnknownClockBoundNs; };
  layout.clock_corrected = !summaries.empty() && std::all_of(summaries.begin(), summaries.end(), measured);
  return layout;
}

struct JobStrings {
  std::vector<std::string> texts;  // sorted; a text's index is its id
  std::unordered_map<std::string_view, uint32_t> ids;
  uint64_t bytes = 0;
};

// 3. One string table for the job: the same name has the same id on every
// rank. Each shard learns its map from local ids to the job's.
JobStrings build_string_table(MPI_Comm comm, std::vector<OwnedShard>& shards) {
  std::vector<std::string> local_strings = {kMissingName};
  for (const auto& shard : shards) {
    for (const auto& [id, text] : shard.scan.strings) local_strings.push_back(text);
    for (const auto& [name, value] : shard.counters.entries()) local_strings.push_back(name);
  }
  std::sort(local_strings.begin(), local_strings.end());
  local_strings.erase(std::unique(local_strings.begin(), local_strings.end()), local_strings.end());
  JobStrings strings;
  strings.texts = allgather_strings(comm, std::move(local_strings));
  std::sort(strings.texts.begin(), strings.texts.end());
  strings.texts.erase(std::unique(strings.texts.begin(), strings.texts.end()), strings.texts.end());
  for (size_t i = 0; i < strings.texts.size(); ++i) {
    strings.ids.emplace(strings.texts[i], static_cast<uint32_t>(i));
    strings.bytes += strings.texts[i].size();
  }

  for (auto& shard : shards) {
    uint32_t max_id = 0;
    for (const auto& [id, text] : shard.scan.strings) {
      if (id < kMaxLocalStringId) max_id = std::max(max_id, id + 1);
    }
    // The last slot holds the id that stands for a name whose string was lost.
    shard.name_map.assign(size_t{max_id} + 1, UINT32_MAX);
    for (const auto& [id, text] : shard.scan.strings) {
      if (id < kMaxLocalStringId) shard.name_map[id] = strings.ids.at(text);
    }
    shard.name_map.back() = strings.ids.at(kMissingName);
    // The job's table holds them now.
    std::vector<std::pair<uint32_t, std::string>>().swap(shard.scan.strings);
  }
  return strings;
}

// What the shards of this process tell about themselves, for the warnings.
std::vector<std::string> shard_problems(const std::vector<OwnedShard>& shards) {
  std::vector<std::string> problems;
  for (const auto& shard : shards) {
    for (const auto& problem : shard.scan.damage.problems) problems.push_back(problem);
    if (!shard.scan.metadata.value_or(RankMetadata{}).job.known()) {
      problems.push_back(shard.scan.path + " records no job identity (written by an older rankscope, or its metadata "
                         "was lost): it is merged without checking that it is of this job");
    }
    if (shard.counters.get(counter::kNothingCaptured) != 0) {
      const std::string capture = shard.scan.metadata.value_or(RankMetadata{}).capture;
      problems.push_back("rank " + std::to_string(shard.scan.rank()) + " captured nothing (capture: " + capture +
                         "): " + counter::nothing_captured_causes(shard.counters, capture));
    }
  }
  return problems;
}

// The timeline's datasets, created together by every process.
struct TimelineTables {
  Handle event_type = schema::event_type();
  Handle rank_type = schema::rank_row_type();
  Handle track_type = schema::track_row_type();
  Handle counter_type = schema::counter_row_type();
  Handle clock_type = schema::clock_row_type();
  Handle clock_point_type = schema::clock_point_row_type();
  Handle capture_window_type = schema::capture_window_row_type();
  hid_t events = -1, ranks = -1, counts = -1, tracks = -1, counters = -1, string_bytes = -1, string_offsets = -1,
        clock = -1, clock_points = -1, event_checksums = -1, capture_windows = -1;
};

// Rows per checksummed chunk: damage costs a reader one chunk's rows, so the
// tables that describe ranks have a chunk per rank. /events is contiguous,
// checked by /event_checksums: parallel HDF5 (1.10) writes every chunk of a
// filtered dataset twice, first as checksummed fill (bench/results/merge.md).
constexpr hsize_t kRankChunkRows = 1;
constexpr hsize_t kTableChunkRows = 1 << 10;
constexpr hsize_t kStringChunkBytes = 1 << 16;

// 5. The bytes the timeline needs, to find running out of room before HDF5
// does: it cannot close a file cleanly after a failed write. Besides the
// rows: what each chunk adds, and the file's own structure.
uint64_t timeline_bytes(const JobLayout& layout, const JobStrings& strings) {
  const uint64_t ranks = layout.by_rank.size();
  const uint64_t events = layout.event_offset.back(), tracks = layout.track_offset.back(),
                 counters = layout.counter_offset.back(), points = layout.point_offset.back(),
                 windows = layout.window_offset.back();
  const uint64_t rows = events * sizeof(Event) + ranks * sizeof(schema::RankRow) + ranks * kEventKindCount * 8 +
                        windows * sizeof(schema::CaptureWindowRow) +
                        tracks * sizeof(schema::TrackRow) + counters * sizeof(schema::CounterRow) + strings.bytes +
                        strings.texts.size() * 8 + ranks * sizeof(schema::ClockRow) +
                        points * sizeof(schema::ClockPointRow) + layout.checksum_offset.back() * 4;
  const auto chunks = [](uint64_t n, uint64_t per_chunk) { return (n + per_chunk - 1) / per_chunk; };
  const uint64_t chunk_count = chunks(layout.checksum_offset.back(), kTableChunkRows) + 3 * chunks(ranks, kRankChunkRows) +
                               chunks(tracks, kTableChunkRows) + chunks(counters, kTableChunkRows) +
                               chunks(points, kTableChunkRows) + chunks(windows, kTableChunkRows) +
                               chunks(strings.bytes, kStringChunkBytes) +
                               chunks(strings.texts.size() + 1, kTableChunkRows);
  // Measured: up to 1.6 KiB per chunk (its index entry, checksum and the
  // space parallel HDF5 leaves between chunks), 30 KiB for the rest.
  constexpr uint64_t kBytesPerChunk = 2 << 10, kFileStructureBytes = 64 << 10;
  return rows + chunk_count * kBytesPerChunk + kFileStructureBytes;
}

// 5. Collective: the datasets and the file's attributes.
void create_tables(TimelineFile& out, TimelineTables& t, const JobLayout& layout, const JobStrings& strings) {
  const auto ws = static_cast<hsize_t>(layout.world_size);
  t.events = out.create(schema::kEvents, t.event_type, {layout.event_offset.back()}, 0);
  t.event_checksums =
      out.create(schema::kEventChecksums, H5T_NATIVE_UINT32, {layout.checksum_offset.back()}, kTableChunkRows);
  t.ranks = out.create(schema::kRanks, t.rank_type, {ws}, kRankChunkRows);
  t.counts = out.create(schema::kEventCounts, H5T_NATIVE_UINT64, {ws, kEventKindCount}, kRankChunkRows);
  t.tracks = out.create(schema::kTracks, t.track_type, {layout.track_offset.back()}, kTableChunkRows);
  t.counters = out.create(schema::kCounters, t.counter_type, {layout.counter_offset.back()}, kTableChunkRows);
  t.string_bytes = out.create(schema::kStringBytes, H5T_NATIVE_CHAR, {strings.bytes}, kStringChunkBytes);
  t.string_offsets =
      out.create(schema::kStringOffsets, H5T_NATIVE_UINT64, {strings.texts.size() + 1}, kTableChunkRows);
  t.clock = out.create(schema::kClock, t.clock_type, {ws}, kRankChunkRows);
  t.clock_points = out.create(schema::kClockPoints, t.clock_point_type, {layout.point_offset.back()}, kTableChunkRows);
  t.capture_windows =
      out.create(schema::kCaptureWindows, t.capture_window_type, {layout.window_offset.back()}, kTableChunkRows);
  out.attribute("format", kTimelineFormatName);
  out.attribute("format_version", int64_t{kTimelineVersion});
  out.attribute("rankscope_version", kRankscopeVersion);
  out.attribute("world_size", int64_t{layout.world_size});
  out.attribute("clock_corrected", int64_t{layout.clock_corrected ? 1 : 0});
}

// Rows of one table that this process writes, by their first row: every
// table but /events is written in one collective call at the end. `Row` is
// one row of a table of `columns` columns of `Row::value_type`, or one
// element of a table of rows (columns 0).
template <typename Row, hsize_t columns = 0>
class TableRows {
 public:
  void add(hsize_t first_row, std::vector<Row> rows) {
    if (!rows.empty()) runs_[first_row] = std::move(rows);
  }

  void write(TimelineFile& out, hid_t dataset, hid_t type, const std::string& what) const {
    std::vector<hsize_t> start, count;
    for (const auto& [first, rows] : runs_) {
      start.push_back(first);
      count.push_back(rows.size());
      if (columns > 0) {
        start.push_back(0);
        count.push_back(columns);
      }
    }
    // One run (the string table, a process's only rank) is written from
    // where it lies: a copy would double the largest of them.
    std::vector<Row> data;
    if (runs_.size() > 1) {
      for (const auto& [first, rows] : runs_) data.insert(data.end(), rows.begin(), rows.end());
    }
    const Row* rows = runs_.size() == 1 ? runs_.begin()->second.data() : data.data();
    out.write(dataset, type, start, count, rows, what, columns > 0 ? 2 : 1);
  }

 private:
  std::map<hsize_t, std::vector<Row>> runs_;
};

// What this process writes to the tables besides /events.
struct TimelineRows {
  TableRows<schema::RankRow> ranks;
  TableRows<std::array<uint64_t, kEventKindCount>, kEventKindCount> counts;
  TableRows<schema::TrackRow> tracks;
  TableRows<schema::CounterRow> counters;
  TableRows<schema::ClockRow> clock;
  TableRows<schema::ClockPointRow> clock_points;
  TableRows<schema::CaptureWindowRow> capture_windows;
  TableRows<char> string_bytes;
  TableRows<uint64_t> string_offsets;
  TableRows<uint32_t> event_checksums;

  // Collective; every table is written, whatever fails. Returns the first error.
  std::string write(TimelineFile& out, const TimelineTables& t) const {
    std::string error;
    const auto attempt = [&](const auto& rows, hid_t dataset, hid_t type, const char* what) {
      try {
        rows.write(out, dataset, type, what);
      } catch (const Error& e) {
        if (error.empty()) error = e.what();
      }
    };
    attempt(ranks, t.ranks, t.rank_type, "the rank table");
    attempt(counts, t.counts, H5T_NATIVE_UINT64, "the event counts");
    attempt(tracks, t.tracks, t.track_type, "the track table");
    attempt(counters, t.counters, t.counter_type, "the counters");
    attempt(clock, t.clock, t.clock_type, "the clock table");
    attempt(clock_points, t.clock_points, t.clock_point_type, "the clock measurements");
    attempt(capture_windows, t.capture_windows, t.capture_window_type, "the capture windows");
    attempt(string_bytes, t.string_bytes, H5T_NATIVE_CHAR, "the string table");
    attempt(string_offsets, t.string_offsets, H5T_NATIVE_UINT64, "the string table");
    attempt(event_checksums, t.event_checksums, H5T_NATIVE_UINT32, "the event checksums");
    return error;
  }
};

// 6. One rank's events (fed to the happens-before check on the way); its
// row, event counts, tracks and clock go to `rows`. Returns the names it lost.
uint64_t write_rank(TimelineFile& out, const TimelineTables& t, TimelineRows& rows, const OwnedShard& shard,
                    const JobLayout& layout, int64_t repair_shift, uint64_t block_events, HappensBeforeCheck& check) {
  const auto r = static_cast<size_t>(shard.scan.rank());
  EventWriter events(out, t.events, t.event_type, layout.event_offset[r]);
  RankEventMerger merger(shard, events, block_events, repair_shift, check);
  merger.run();
  rows.event_checksums.add(layout.checksum_offset[r], events.checksums());

  schema::RankRow row =
      rank_row(shard, layout.event_offset[r], layout.track_offset[r], layout.counter_offset[r], repair_shift);
  row.first_ns = merger.first_ns() == INT64_MAX ? 0 : merger.first_ns();
  row.last_ns = merger.last_ns() == INT64_MIN ? 0 : merger.last_ns();
  row.checksum_offset = layout.checksum_offset[r];
  row.window_offset = layout.window_offset[r];
  if (shard.captured) {
    row.windowed = 1;
    row.window_count = shard.captured->size();
    std::vector<schema::CaptureWindowRow> window_rows;
    for (const auto& [from, until] : *shard.captured) {
      window_rows.push_back({static_cast<int32_t>(r), shard.clock.to_reference(from).time_ns + repair_shift,
                             shard.clock.to_reference(until).time_ns + repair_shift});
    }
    rows.capture_windows.add(layout.window_offset[r], std::move(window_rows));
  }
  rows.ranks.add(r, {row});
  std::array<uint64_t, kEventKindCount> counts{};
  std::copy(merger.kind_counts().begin() + 1, merger.kind_counts().end(), counts.begin());
  rows.counts.add(r, {counts});

  std::vector<schema::TrackRow> track_rows;
  for (const Track& track : shard.scan.tracks) {
    const uint32_t name = track.name_id < shard.name_map.size() && shard.name_map[track.name_id] != UINT32_MAX
                              ? shard.name_map[track.name_id]
                              : shard.name_map.back();
    track_rows.push_back(
        {static_cast<int32_t>(r), track.id, track.os_id, name, track.device, static_cast<uint8_t>(track.type)});
  }
  rows.tracks.add(layout.track_offset[r], std::move(track_rows));

  const auto& points = shard.clock.points();
  // A rank moved only by its trace's base time (an unknown bound) is not on the reference clock.
  const bool synced = !points.empty() && shard.clock.max_bound_ns() < kUnknownClockBoundNs;
  rows.clock.add(r, {{static_cast<int32_t>(r), static_cast<uint8_t>(synced), shard.clock.offset_ns(),
                      shard.clock.drift_ppm(), shard.clock.max_bound_ns(), layout.point_offset[r], points.size(),
                      repair_shift}});
  std::vector<schema::ClockPointRow> point_rows;
  for (const SyncPoint& p : points) point_rows.push_back({static_cast<int32_t>(r), p.local_ns, p.offset_ns, p.bound_ns});
  rows.clock_points.add(layout.point_offset[r], std::move(point_rows));
  return merger.names_missing();
}

// 6. One rank's counters: the agent's, and what the merge found.
void add_rank_counters(TimelineRows& rows, const OwnedShard& shard, const JobLayout& layout, const JobStrings& strings,
                       uint64_t names_missing, const ClockRepairOutcome& repair,
                       const HappensBeforeCheck::Result& causality) {
  const auto r = static_cast<size_t>(shard.scan.rank());
  Counters counters = shard.counters;
  counters.set(counter::kNamesMissing, names_missing);
  counters.set(counter::kClockViolations, causality.violations[r]);
  counters.set(counter::kClockViolationWorstNs, static_cast<uint64_t>(causality.worst_ns[r]));
  counters.set(counter::kClockCheckSkipped, causality.unchecked[r]);
  counters.set(counter::kClockViolationsRepaired, repair.violations_before[r]);
  counters.set(counter::kClockViolationsP2p, causality.message_violations[r]);
  counters.set(counter::kClockViolationsP2pRepaired, repair.message_violations_before[r]);
  counters.set(counter::kP2pUnmatched, causality.unmatched[r]);
  std::vector<schema::CounterRow> counter_rows;
  for (const auto& [name, value] : counters.entries()) {
    counter_rows.push_back({static_cast<int32_t>(r), strings.ids.at(name), value});
  }
  rows.counters.add(layout.counter_offset[r], std::move(counter_rows));
}

// 6. Process 0: the string table, and the rows of ranks without a shard.
void add_shared_rows(TimelineRows& rows, const JobLayout& layout, const JobStrings& strings) {
  std::vector<char> packed;
  std::vector<uint64_t> string_offsets = {0};
  for (const auto& text : strings.texts) {
    packed.insert(packed.end(), text.begin(), text.end());
    string_offsets.push_back(packed.size());
  }
  rows.string_bytes.add(0, std::move(packed));
  rows.string_offsets.add(0, std::move(string_offsets));
  for (size_t r = 0; r < layout.by_rank.size(); ++r) {
    if (layout.by_rank[r]) continue;
    schema::RankRow row{};
    row.rank = static_cast<int32_t>(r);
    row.local_rank = -1;
    row.node_id = -1;
    row.status = static_cast<uint8_t>(RankStatus::kMissing);
    row.event_offset = layout.event_offset[r];
    row.track_offset = layout.track_offset[r];
    row.counter_offset = layout.counter_offset[r];
    row.checksum_offset = layout.checksum_offset[r];
    row.window_offset = layout.window_offset[r];
    rows.ranks.add(r, {row});
    rows.counts.add(r, {std::array<uint64_t, kEventKindCount>{}});
    rows.clock.add(r, {{static_cast<int32_t>(r), 0, 0, 0.0, 0, layout.point_offset[r], 0, 0}});
  }
}

// 5 and 6, collective: the timeline written to `partial`, or the same Error
// on every process (an UnrecoverableError when HDF5 could not close the file).
HappensBeforeCheck::Result write_timeline(MPI_Comm comm, const std::string& partial, const MergeOptions& options,
                                          const std::vector<OwnedShard>& shards, const JobLayout& layout,
                                          const JobStrings& strings, const ClockRepairOutcome& repair) {
  int process = 0;
  MPI_Comm_rank(comm, &process);
  std::string error = check_room(partial, timeline_bytes(layout, strings), process == 0);
  check_all(comm, error);

  std::string close_error;
  HappensBeforeCheck::Result causality;
  {
    std::unique_ptr<TimelineFile> out;
    try {
      out = std::make_unique<TimelineFile>(comm, partial);
    } catch (const Error& e) {
      error = e.what();
    }
    check_all(comm, error);
    TimelineTables tables;
    try {
      create_tables(*out, tables, layout, strings);
    } catch (const Error& e) {
      error = e.what();
    }
    check_all(comm, error);

    // Each process writes its own ranks' events alone, then every table
    // with the others.
    TimelineRows rows;
    HappensBeforeCheck check(options.check_memory_bytes);
    std::vector<uint64_t> names_missing;
    try {
      for (const auto& shard : shards) {
        const int64_t shift = repair.shifts[static_cast<size_t>(shard.scan.rank())];
        names_missing.push_back(write_rank(*out, tables, rows, shard, layout, shift, options.block_events, check));
      }
    } catch (const Error& e) {
      error = e.what();
    }
    // Every process takes part in every collective, whatever happened above,
    // so none waits forever.
    causality = check.finish(comm, layout.clock_bounds);
    for (size_t i = 0; i < names_missing.size(); ++i) {
      add_rank_counters(rows, shards[i], layout, strings, names_missing[i], repair, causality);
    }
    if (process == 0) add_shared_rows(rows, layout, strings);
    const std::string table_error = rows.write(*out, tables);
    if (error.empty()) error = table_error;
    close_error = out->close();
  }
  if (error.empty()) error = close_error;
  int close_failed = close_error.empty() ? 0 : 1, any_close_failed = 0;
  MPI_Allreduce(&close_failed, &any_close_failed, 1, MPI_INT, MPI_MAX, comm);
  try {
    check_all(comm, error);
  } catch (const Error& e) {
    if (process == 0) ::unlink(partial.c_str());
    if (any_close_failed) throw UnrecoverableError(e.what());
    throw;
  }
  return causality;
}

// 7. What the merge did, the same on every process.
MergeResult summarize(MPI_Comm comm, const MergeOptions& options, const std::vector<OwnedShard>& shards,
                      const JobLayout& layout, const std::vector<std::string>& problems,
                      const ClockRepairOutcome& repair, const HappensBeforeCheck::Result& causality) {
  MergeResult result;
  result.world_size = layout.world_size;
  result.events = layout.event_offset.back();
  for (size_t r = 0; r < layout.by_rank.size(); ++r) {
    if (!layout.by_rank[r]) {
      result.missing_ranks.push_back(static_cast<int32_t>(r));
    } else if (!layout.by_rank[r]->ended) {
      result.dead_ranks.push_back(static_cast<int32_t>(r));
    }
  }
  uint64_t local_shard_bytes = 0;
  for (const auto& shard : shards) {
    struct stat st {};
    if (::stat(shard.scan.path.c_str(), &st) == 0) local_shard_bytes += static_cast<uint64_t>(st.st_size);
  }
  MPI_Allreduce(&local_shard_bytes, &result.shard_bytes, 1, MPI_UINT64_T, MPI_SUM, comm);
  struct stat st {};
  if (::stat(options.output.c_str(), &st) == 0) result.bytes = static_cast<uint64_t>(st.st_size);
  result.problems = allgather_strings(comm, problems);
  if (options.repair_clock) {
    for (auto& line : describe_repair(repair, causality)) result.problems.push_back(std::move(line));
  }
  return result;
}

}  // namespace

std::vector<std::string> expand_shard_inputs(const std::vector<std::string>& inputs) {
  return expand_folders(inputs, is_shard_file, ".shard files");
}

namespace {

// Process 0 lists the inputs for every process. Listings made apart can
// differ: a sidecar that found no shard removes the folder while slower ones
// list it, and they would wait in a collective the first never joins.
std::vector<std::string> shards_listed_once(MPI_Comm comm, const std::vector<std::string>& inputs) {
  int process = 0;
  MPI_Comm_rank(comm, &process);
  std::vector<std::string> listed;
  std::string error;
  if (process == 0) {
    try {
      listed = expand_shard_inputs(inputs);
      if (listed.empty()) throw Error("no shards to merge");
    } catch (const Error& e) {
      error = e.what();
    }
  }
  check_all(comm, error);
  return allgather_strings(comm, listed);
}

}  // namespace

MergeResult merge_shards(MPI_Comm comm, const MergeOptions& options) {
  const double started = MPI_Wtime();
  int process = 0;
  MPI_Comm_rank(comm, &process);
  schema::silence_hdf5_errors();

  if (options.output.empty()) throw Error("no output file given");
  const std::vector<std::string> inputs = shards_listed_once(comm, options.inputs);

  std::vector<OwnedShard> shards = scan_own_shards(comm, inputs);
  const JobLayout layout = agree_on_layout(comm, shards, inputs);
  const JobStrings strings = build_string_table(comm, shards);

  // 4. With --repair-clock, the shifts are found before anything is written,
  // so every event is written once, already moved.
  const auto ranks = static_cast<size_t>(layout.world_size);
  ClockRepairOutcome repair{std::vector<int64_t>(ranks, 0), std::vector<uint64_t>(ranks, 0),
                            std::vector<uint64_t>(ranks, 0), {}, false};
  if (options.repair_clock) repair = repair_clocks(comm, shards, layout.clock_bounds, options.check_memory_bytes);

  const std::string partial = options.output + ".partial";
  const HappensBeforeCheck::Result causality = write_timeline(comm, partial, options, shards, layout, strings, repair);
  std::string error;
  double derived_seconds = 0;
  if (process == 0) {
    try {
      const double deriving = MPI_Wtime();
      if (options.derive_tables) options.derive_tables(partial);
      derived_seconds = MPI_Wtime() - deriving;
      move_into_place(partial, options.output, options.replace_output);
    } catch (const Error& e) {
      error = e.what();
      ::unlink(partial.c_str());
    }
  }
  check_all(comm, error);

  MergeResult result = summarize(comm, options, shards, layout, shard_problems(shards), repair, causality);
  result.seconds = MPI_Wtime() - started;
  result.derived_seconds = derived_seconds;
  return result;
}

}  // namespace rankscope
