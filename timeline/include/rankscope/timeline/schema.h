// The timeline's HDF5 types and row layouts, shared by the merge (writer) and
// Timeline (reader) so the two cannot disagree.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <utility>

#include "rankscope/model/event.h"
#include "rankscope/timeline/collectives.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope::schema {

static_assert(sizeof(hid_t) == sizeof(int64_t));

inline constexpr const char* kEvents = "events";
inline constexpr const char* kRanks = "ranks";
inline constexpr const char* kEventCounts = "event_counts";
inline constexpr const char* kTracks = "tracks";
inline constexpr const char* kCounters = "counters";
inline constexpr const char* kClock = "clock";
inline constexpr const char* kClockPoints = "clock_points";
inline constexpr const char* kStringBytes = "strings/bytes";
inline constexpr const char* kStringOffsets = "strings/offsets";
inline constexpr const char* kEventChecksums = "event_checksums";
// Written since capture windows were recorded; a timeline without it
// recorded every rank throughout.
inline constexpr const char* kCaptureWindows = "capture_windows";

// /events carries a CRC-32C of every kEventChecksumRows rows of a rank (the
// last block of a rank may be shorter), in /event_checksums from the rank's
// checksum_offset: each merge process computes its own ranks' as it writes them.
inline constexpr uint64_t kEventChecksumRows = 1 << 14;

struct RankRow {
  int32_t rank;
  int32_t local_rank;
  int32_t node_id;
  uint8_t status;  // RankStatus
  int64_t pid;
  uint64_t event_offset;
  uint64_t event_count;
  uint64_t track_offset;
  uint64_t track_count;
  uint64_t counter_offset;
  uint64_t counter_count;
  int64_t first_ns;
  int64_t last_ns;
  int64_t last_heard_ns;
  int64_t start_wall_ns;
  char host[64];
  char gpu_uuids[256];
  char launcher[32];
  char agent_version[32];
  char capture[128];
  char shard[256];
  // Added without a version change; older timelines read as an unknown job.
  char job_id[128];
  int64_t job_start_wall_ns;
  uint64_t checksum_offset;  // the rank's first row in /event_checksums
  // Added without a version change (older timelines: 0, recorded throughout).
  uint8_t windowed;          // 1: its capture was windowed, its spans in /capture_windows
  uint64_t window_offset;    // its first row in /capture_windows
  uint64_t window_count;
};

// A span of the reference clock whose events the rank's shard held in full
// (model/capture_windows.h).
struct CaptureWindowRow {
  int32_t rank;
  int64_t from_ns;
  int64_t until_ns;
};

struct TrackRow {
  int32_t rank;
  uint32_t id;
  uint64_t os_id;
  uint32_t name_id;
  int16_t device;
  uint8_t type;  // TrackType
};

struct CounterRow {
  int32_t rank;
  uint32_t name_id;
  uint64_t value;
};

struct ClockRow {
  int32_t rank;
  uint8_t synced;      // the rank's events were put on the reference clock
  int64_t offset_ns;   // at the first measurement: local minus reference
  double drift_ppm;    // mean over the measured span
  int64_t bound_ns;    // the largest bound of its measurements
  uint64_t point_offset;
  uint64_t point_count;
  int64_t repair_shift_ns;  // added to every time of the rank by merge --repair-clock
};

struct ClockPointRow {
  int32_t rank;
  int64_t local_ns;
  int64_t offset_ns;
  int64_t bound_ns;
};

// Owns one HDF5 identifier and closes it with the right function.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, -1)), closer_(other.closer_) {}
  Handle& operator=(Handle&& other) noexcept {
    reset();
    id_ = std::exchange(other.id_, -1);
    closer_ = other.closer_;
    return *this;
  }
  ~Handle() { reset(); }
  void reset() {
    if (id_ >= 0 && closer_) closer_(id_);
    id_ = -1;
  }
  hid_t get() const { return id_; }
  hid_t release() { return std::exchange(id_, -1); }
  bool valid() const { return id_ >= 0; }
  operator hid_t() const { return id_; }

 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

Handle event_type();
Handle rank_row_type();
Handle track_row_type();
Handle counter_row_type();
Handle clock_row_type();
Handle clock_point_row_type();
Handle capture_window_row_type();
Handle collective_row_type();
Handle participant_row_type();

// HDF5's own error stack printing is replaced by our messages.
void silence_hdf5_errors();

// Copies `text` into a fixed-size field, cutting it if needed.
template <size_t N>
void set_text(char (&field)[N], const std::string& text) {
  const size_t n = std::min(text.size(), N - 1);
  text.copy(field, n);
  field[n] = '\0';
}

}  // namespace rankscope::schema
