// The job's HDF5 timeline: reading it back (the merge writes it; see merge.h).
// Schema and its reasons: docs/format.md.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rankscope/model/event.h"
#include "rankscope/model/metadata.h"

namespace rankscope {

inline constexpr uint32_t kTimelineVersion = 1;
inline constexpr const char* kTimelineFormatName = "rankscope-timeline";

enum class RankStatus : uint8_t {
  kComplete = 0,  // the agent closed its shard cleanly
  kDead = 1,      // the shard ends without its end marker: the rank died or was killed
  kMissing = 2,   // no shard for this rank
  kTerminated = 3,  // a signal ended the process; the agent closed its shard first
  kAborted = 4,     // the application called MPI_Abort (its code: counter mpi_abort_code); shard closed first
  kCrashed = 5,     // a crash or abort() ended the process (counter crash_signal); shard closed first
  kExited = 6,      // ended (exit, a return from main) after MPI_Init without MPI_Finalize (counters
                    // mpi_not_finalized, exit_status); shard closed at exit
};
inline constexpr RankStatus kLastRankStatus = RankStatus::kExited;
const char* rank_status_name(RankStatus status);

// How a rank's times were put on the reference (rank 0's) clock.
struct RankClock {
  bool synced = false;     // false: its times are its local clock's
  int64_t offset_ns = 0;   // local minus reference, at the first measurement
  double drift_ppm = 0;    // mean over the measured span
  int64_t bound_ns = 0;    // largest error bound of its measurements
  int64_t repair_shift_ns = 0;  // added to all its times by merge --repair-clock
  std::vector<SyncPoint> points;
};

struct RankInfo {
  int32_t rank = -1;
  int32_t local_rank = -1;
  int32_t node_id = -1;
  RankStatus status = RankStatus::kMissing;
  int64_t pid = 0;
  uint64_t event_offset = 0;  // first row of this rank in /events
  uint64_t event_count = 0;
  int64_t first_ns = 0;       // earliest begin
  int64_t last_ns = 0;        // latest end
  int64_t last_heard_ns = 0;  // latest time any chunk of the shard was written; INT64_MIN: never
  int64_t start_wall_ns = 0;
  std::string host, gpu_uuids, launcher, agent_version, capture, shard;
  JobIdentity job;
  std::vector<uint64_t> events_by_kind;  // indexed by EventKind value - 1
  std::vector<Track> tracks;             // name_id refers to the job's string table
  Counters counters;
  RankClock clock;
  // Its capture was windowed (--delay, --duration, triggers, --steps,
  // --capture-range, --ring): its shard held in full only the events of
  // capture_windows (sorted, on the timeline's clock). False: recorded
  // throughout, as every rank of timelines written before windows were kept.
  bool capture_windowed = false;
  std::vector<std::pair<int64_t, int64_t>> capture_windows;
};

// What a reader found damaged in a timeline and left out. The events carry
// no checksum of their own beyond HDF5's per chunk (Fletcher32, in files
// written since checksums were added), so every value is also checked
// against what it can be (docs/format.md lists the checks).
struct TimelineDamage {
  struct Finding {
    std::string dataset;  // "/events"
    uint64_t row = 0;     // the first row affected
    uint64_t rows = 1;
    std::string field;    // empty when the whole rows are unreadable
    std::string problem;
  };
  static constexpr size_t kFindingsKept = 20;
  std::vector<Finding> findings;  // the kFindingsKept of the lowest rows, by dataset and row
  std::map<std::string, uint64_t> rows_left_out;  // by dataset

  uint64_t total_rows() const;
  bool empty() const { return rows_left_out.empty(); }
  // "/events row 12 op: value 65 is not an operation" and the like.
  static std::string describe(const Finding& finding);
  // One line: rows left out per dataset and the first finding.
  std::string summary() const;
};

// One rank's events as Timeline::check_events read them.
struct EventsReadOfRank {
  std::vector<uint64_t> by_kind = std::vector<uint64_t>(kEventKindCount, 0);  // indexed by EventKind value - 1

  uint64_t events() const;
};

class Timeline {
 public:
  // Opens and validates a timeline; throws Error naming the file and what is wrong.
  explicit Timeline(const std::string& path);
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;
  ~Timeline();

  const std::string& path() const { return path_; }
  int32_t world_size() const { return static_cast<int32_t>(ranks_.size()); }
  uint64_t event_count() const { return event_count_; }
  // Whether every rank's times are on rank 0's clock.
  bool clock_corrected() const { return clock_corrected_; }
  const std::vector<RankInfo>& ranks() const { return ranks_; }
  const std::vector<std::string>& strings() const { return *strings_; }
  // The same table, for what outlives this reader (an analysis's profile):
  // a job's names may be millions, and are held once.
  std::shared_ptr<const std::vector<std::string>> shared_strings() const { return strings_; }
  const std::string& string(uint32_t id) const;

  // Reads the rank's events [first, first + count) into `out`, leaving out
  // the damaged ones (recorded in damage()): `out` may hold fewer. Threads
  // may read at once (different ranks, say): HDF5 is called by one at a
  // time, each checks its own rows' checksums and values.
  void read_events(int32_t rank, uint64_t first, uint64_t count, std::vector<Event>& out) const;

  // Streams one rank's events in time order, `block` rows at a time: visit(events).
  template <typename Visit>
  void for_each_event_block(int32_t rank, Visit&& visit, uint64_t block = 1 << 18) const {
    const RankInfo& info = ranks_.at(static_cast<size_t>(rank));
    std::vector<Event> buffer;
    for (uint64_t done = 0; done < info.event_count; done += block) {
      read_events(rank, done, std::min<uint64_t>(block, info.event_count - done), buffer);
      visit(static_cast<const std::vector<Event>&>(buffer));
    }
  }

  // Reads every event, so that damage() covers the whole file. Gives what
  // was read of each rank (index = rank): damaged events left out.
  std::vector<EventsReadOfRank> check_events() const;
  // Damage found so far: the small tables are checked on opening, events as they are read.
  TimelineDamage damage() const;
  // What this reader found damaged, for another reader of the same file to
  // join (the processes of `mpirun rankscope report` each read some ranks):
  // joined, each holds what one reader of every rank would have found.
  struct DamageSeen {
    std::vector<TimelineDamage::Finding> findings;  // those kept
    std::map<std::string, std::map<uint64_t, uint64_t>> rows;  // by dataset: runs [first, end)
  };
  DamageSeen damage_seen() const;
  void join_damage(const DamageSeen& other) const;
  // Whether the timeline carries checksums of its events (/event_checksums;
  // files written before them do not).
  bool checksummed() const { return checksummed_; }
  // Whether HDF5 checksums the file's own metadata (object headers with
  // their datatypes and shapes, chunk indexes): file format 1.10, which
  // timelines are written in since rankscope asked for it.
  bool metadata_checksummed() const { return metadata_checksummed_; }

 private:
  std::string path_;
  int64_t file_ = -1;  // hid_t, kept out of this header
  int64_t events_ = -1;
  int64_t event_type_ = -1;
  uint64_t event_count_ = 0;
  uint64_t events_chunk_rows_ = 0;  // 0: contiguous
  // /events stored contiguously, each row as Event lies in memory: read by
  // pread() from here, on any thread at once, without HDF5 (which takes
  // one call at a time). -1: through HDF5 (another layout, or cut short).
  int events_fd_ = -1;
  uint64_t events_file_offset_ = 0;
  bool checksummed_ = false;        // /event_checksums is there
  bool metadata_checksummed_ = false;
  std::vector<uint32_t> event_checksums_;
  std::vector<bool> event_checksum_unreadable_;
  // A block's checksum is checked the first time the block is read: an
  // analysis that reads the events twice pays for it once (its values are
  // checked at every read). Written by whichever thread reads the block.
  std::unique_ptr<std::atomic<bool>[]> event_checksum_verified_;
  std::vector<uint64_t> checksum_offsets_;  // per rank, into event_checksums_
  bool clock_corrected_ = false;
  void note_damage(TimelineDamage::Finding finding) const;
  // These two with damage_mutex_ held. The rows not noted before: their count.
  uint64_t note_damaged_rows(const std::string& dataset, uint64_t first, uint64_t end) const;
  void keep_finding(TimelineDamage::Finding finding) const;
  void open_events_directly();
  // Rows [first, first + count) of /events into `rows`: the runs that could not be read.
  std::vector<std::pair<uint64_t, uint64_t>> read_event_rows(uint64_t first, uint64_t count, Event* rows) const;
  // Debian's HDF5 is built without its thread-safe option: one call at a time.
  mutable std::mutex hdf5_mutex_;
  mutable std::mutex damage_mutex_;  // events may be read on several threads
  mutable TimelineDamage damage_;
  mutable std::map<std::string, std::map<uint64_t, uint64_t>> damaged_rows_;  // by dataset: runs [first, end)
  std::vector<RankInfo> ranks_;
  std::shared_ptr<const std::vector<std::string>> strings_ = std::make_shared<const std::vector<std::string>>();
};

}  // namespace rankscope
