#include "rankscope/timeline/timeline.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <tuple>

#include "rankscope/model/crc32c.h"
#include "rankscope/model/error.h"
#include "rankscope/model/metadata.h"
#include "rankscope/timeline/schema.h"

namespace rankscope {

using schema::Handle;

const char* rank_status_name(RankStatus status) {
  switch (status) {
    case RankStatus::kComplete: return "complete";
    case RankStatus::kDead: return "dead";
    case RankStatus::kMissing: return "missing";
    case RankStatus::kTerminated: return "terminated";
    case RankStatus::kAborted: return "aborted";
    case RankStatus::kCrashed: return "crashed";
    case RankStatus::kExited: return "exited";
  }
  return "invalid";
}

namespace {

constexpr int64_t kMaxPid = int64_t{1} << 22;  // PID_MAX_LIMIT on 64-bit Linux
constexpr double kMaxDriftPpm = 1e6;            // a clock that runs twice as fast or stopped
constexpr const char* kDamagedName = "<damaged name>";

using RowRanges = std::vector<std::pair<uint64_t, uint64_t>>;  // [first, end) of rows

// The rows per chunk of a chunked dataset; 0 when it is contiguous (written
// before the timeline had checksums).
uint64_t chunk_rows(hid_t dataset) {
  Handle creation(H5Dget_create_plist(dataset), H5Pclose);
  if (H5Pget_layout(creation) != H5D_CHUNKED) return 0;
  hsize_t chunk[2] = {0, 0};
  return H5Pget_chunk(creation, 2, chunk) >= 1 ? chunk[0] : 0;
}

// Why the datatype stored for a dataset cannot be the `expected` one that
// rankscope writes there; empty when it can. HDF5 converts what it reads
// from the stored type to the expected one, trusting the stored description:
// damaged, it crashes the conversion or turns values into others (a member
// 16 bytes wide reads as INT64_MAX, a renamed member as zeros). Timelines of
// earlier versions lack members added since (HDF5 leaves them zero), and
// earlier enums lack later values; nothing else may differ.
std::string stored_type_problem(hid_t stored, hid_t expected) {
  const H5T_class_t kind = H5Tget_class(expected);
  if (H5Tget_class(stored) != kind) return "its class differs from the one written";
  if (kind == H5T_ENUM) {
    const Handle stored_base(H5Tget_super(stored), H5Tclose), expected_base(H5Tget_super(expected), H5Tclose);
    if (H5Tequal(stored_base, expected_base) <= 0) return "its enum's integer type differs";
    const int members = H5Tget_nmembers(stored);
    if (members < 0 || members > H5Tget_nmembers(expected)) return "its enum has more values than written";
    for (int m = 0; m < members; ++m) {
      char* name = H5Tget_member_name(stored, static_cast<unsigned>(m));
      uint64_t stored_value = 0, expected_value = 0;
      const bool same = name != nullptr && H5Tget_member_value(stored, static_cast<unsigned>(m), &stored_value) >= 0 &&
                        H5Tenum_valueof(expected, name, &expected_value) >= 0 && stored_value == expected_value;
      H5free_memory(name);
      if (!same) return "its enum value " + std::to_string(m) + " differs from the one written";
    }
    return {};
  }
  if (kind != H5T_COMPOUND) return H5Tequal(stored, expected) > 0 ? std::string() : "its size or byte order differs";
  const size_t size = H5Tget_size(stored);
  if (size > H5Tget_size(expected)) return "its rows are wider than written";
  const int members = H5Tget_nmembers(stored);
  if (members < 1 || members > H5Tget_nmembers(expected)) return "it has another number of members than written";
  for (int m = 0; m < members; ++m) {
    char* name = H5Tget_member_name(stored, static_cast<unsigned>(m));
    const int index = name == nullptr ? -1 : H5Tget_member_index(expected, name);
    const std::string member = name == nullptr ? "?" : name;
    H5free_memory(name);
    if (index < 0) return "member " + std::to_string(m) + " is named '" + member + "', which rankscope never writes";
    const Handle stored_member(H5Tget_member_type(stored, static_cast<unsigned>(m)), H5Tclose);
    const Handle expected_member(H5Tget_member_type(expected, static_cast<unsigned>(index)), H5Tclose);
    if (H5Tget_member_offset(stored, static_cast<unsigned>(m)) + H5Tget_size(stored_member) > size) {
      return "member " + member + " lies past the end of its row";
    }
    if (std::string problem = stored_type_problem(stored_member, expected_member); !problem.empty()) {
      return "member " + member + ": " + problem;
    }
  }
  return {};
}

// The rows of a chunked dataset whose chunks its chunk index does not list:
// HDF5 would read them as zeros.
RowRanges rows_without_chunk(hid_t dataset, uint64_t rows, uint64_t rows_per_chunk) {
  if (rows_per_chunk == 0 || rows == 0) return {};
  const uint64_t expected = (rows + rows_per_chunk - 1) / rows_per_chunk;
  // HDF5 1.10 wants the dataset's space here, not H5S_ALL.
  const Handle space(H5Dget_space(dataset), H5Sclose);
  hsize_t listed = 0;
  if (H5Dget_num_chunks(dataset, space, &listed) >= 0 && listed == expected) return {};
  std::vector<bool> present(expected, false);
  for (hsize_t i = 0; i < listed; ++i) {
    hsize_t offset[2] = {0, 0};
    unsigned filters = 0;
    haddr_t address = 0;
    hsize_t bytes = 0;
    if (H5Dget_chunk_info(dataset, space, i, offset, &filters, &address, &bytes) >= 0 &&
        offset[0] % rows_per_chunk == 0 && offset[0] / rows_per_chunk < expected) {
      present[offset[0] / rows_per_chunk] = true;
    }
  }
  RowRanges missing;
  for (uint64_t c = 0; c < expected; ++c) {
    if (present[c]) continue;
    const uint64_t first = c * rows_per_chunk, end = std::min(rows, first + rows_per_chunk);
    if (!missing.empty() && missing.back().second == first) {
      missing.back().second = end;
    } else {
      missing.emplace_back(first, end);
    }
  }
  return missing;
}

// Reads rows [first, first + count) of a dataset of `columns` values per row
// into `out`. When HDF5 refuses (a chunk's checksum does not match, or the
// file is cut short) it reads chunk by chunk and returns the rows of the
// chunks it could not read; their place in `out` is left as it was.
RowRanges read_rows(hid_t dataset, hid_t type, uint64_t first, uint64_t count, uint64_t columns, uint64_t rows_per_chunk,
                    void* out, size_t row_bytes) {
  const auto read = [&](uint64_t from, uint64_t n) {
    Handle file_space(H5Dget_space(dataset), H5Sclose);
    const hsize_t start[2] = {from, 0}, extent[2] = {n, columns};
    H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, nullptr, extent, nullptr);
    const hsize_t elements = n * columns;
    Handle memory_space(H5Screate_simple(1, &elements, nullptr), H5Sclose);
    void* at = static_cast<char*>(out) + (from - first) * row_bytes;
    return H5Dread(dataset, type, memory_space, file_space, H5P_DEFAULT, at) >= 0;
  };
  if (count == 0 || read(first, count)) return {};
  if (rows_per_chunk == 0) return {{first, first + count}};
  RowRanges unreadable;
  for (uint64_t from = first; from < first + count;) {
    const uint64_t end = std::min(first + count, (from / rows_per_chunk + 1) * rows_per_chunk);
    if (!read(from, end - from)) {
      if (!unreadable.empty() && unreadable.back().second == from) {
        unreadable.back().second = end;
      } else {
        unreadable.emplace_back(from, end);
      }
    }
    from = end;
  }
  return unreadable;
}

// A whole table, with the rows that could not be read flagged.
template <typename Row>
struct Table {
  std::vector<Row> rows;
  std::vector<bool> unreadable;
};

class Reader {
 public:
  Reader(hid_t file, const std::string& path) : file_(file), path_(path) {}

  // The dataset, once its stored datatype is known to be `expected` (or an
  // earlier version of it): nothing is read through a damaged description.
  Handle open(const char* name, hid_t expected) const {
    if (H5Lexists(file_, name, H5P_DEFAULT) <= 0) throw Error(path_ + ": dataset /" + name + " is missing");
    Handle dataset(H5Dopen2(file_, name, H5P_DEFAULT), H5Dclose);
    if (!dataset.valid()) throw Error(path_ + ": dataset /" + name + " cannot be opened");
    const Handle stored(H5Dget_type(dataset), H5Tclose);
    if (!stored.valid()) throw Error(path_ + ": dataset /" + name + ": its datatype is unreadable (damaged?)");
    if (const std::string problem = stored_type_problem(stored, expected); !problem.empty()) {
      throw Error(path_ + ": dataset /" + name + ": " + problem + " (damaged?)");
    }
    return dataset;
  }

  std::vector<hsize_t> dims(hid_t dataset) const {
    Handle space(H5Dget_space(dataset), H5Sclose);
    std::vector<hsize_t> out(static_cast<size_t>(std::max(0, H5Sget_simple_extent_ndims(space))));
    H5Sget_simple_extent_dims(space, out.data(), nullptr);
    return out;
  }

  // The values in each row of a table: 1 for a 1-column table.
  uint64_t columns(const char* name, hid_t expected) const {
    const std::vector<hsize_t> shape = dims(open(name, expected));
    return shape.size() == 2 ? shape[1] : 1;
  }

  // Rows of `columns` values each; a row of a 1-column table is one Row.
  template <typename Row>
  Table<Row> read_table(const char* name, hid_t type, const std::function<void(TimelineDamage::Finding)>& note,
                        uint64_t columns = 1) const {
    Handle dataset = open(name, type);
    const std::vector<hsize_t> shape = dims(dataset);
    if (shape.empty() || shape.size() > 2 || (shape.size() == 2 ? shape[1] : 1) != columns) {
      throw Error(path_ + ": dataset /" + name + " has the wrong shape");
    }
    // Each row is read into memory: a row count beyond the file's size is damage, not a table.
    if (shape[0] * columns * H5Tget_size(type) > file_bytes()) {
      throw Error(path_ + ": dataset /" + name + " claims " + std::to_string(shape[0]) +
                  " rows, more than the file can hold (damaged?)");
    }
    Table<Row> table;
    table.rows.resize(shape[0] * columns);
    table.unreadable.assign(shape[0], false);
    const uint64_t rows_per_chunk = chunk_rows(dataset);
    for (const auto& [first, end] : read_rows(dataset, type, 0, shape[0], columns, rows_per_chunk,
                                              table.rows.data(), sizeof(Row) * columns)) {
      note({std::string("/") + name, first, end - first, "", "unreadable (checksum mismatch or cut short)"});
      for (uint64_t row = first; row < end; ++row) table.unreadable[row] = true;
    }
    for (const auto& [first, end] : rows_without_chunk(dataset, shape[0], rows_per_chunk)) {
      note({std::string("/") + name, first, end - first, "", "not in the dataset's chunk index (damaged?)"});
      for (uint64_t row = first; row < end; ++row) table.unreadable[row] = true;
    }
    return table;
  }

  std::string text_attribute(const char* name) const {
    if (H5Aexists(file_, name) <= 0) return {};
    Handle attribute(H5Aopen(file_, name, H5P_DEFAULT), H5Aclose);
    Handle stored(H5Aget_type(attribute), H5Tclose);
    if (H5Tget_class(stored) != H5T_STRING) return {};
    std::string value(H5Tget_size(stored), '\0');
    Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(type, value.size());
    H5Aread(attribute, type, value.data());
    value.resize(value.find('\0') == std::string::npos ? value.size() : value.find('\0'));
    return value;
  }

  int64_t int_attribute(const char* name) const {
    if (H5Aexists(file_, name) <= 0) throw Error(path_ + ": attribute " + name + " is missing");
    Handle attribute(H5Aopen(file_, name, H5P_DEFAULT), H5Aclose);
    const Handle stored(H5Aget_type(attribute), H5Tclose);
    if (H5Tget_class(stored) != H5T_INTEGER || H5Tget_size(stored) > sizeof(int64_t)) {
      throw Error(path_ + ": attribute " + name + " is not the integer written (damaged?)");
    }
    int64_t value = 0;
    if (H5Aread(attribute, H5T_NATIVE_INT64, &value) < 0) throw Error(path_ + ": attribute " + name + " is unreadable");
    return value;
  }

  uint64_t file_bytes() const {
    hsize_t size = 0;
    H5Fget_filesize(file_, &size);
    return size;
  }

 private:
  hid_t file_;
  const std::string& path_;
};

template <size_t N>
std::string fixed_text(const char (&field)[N]) {
  return std::string(field, ::strnlen(field, N));
}

// What is wrong with one row of /ranks, as {field, problem}; empty when sound.
std::pair<std::string, std::string> rank_row_problem(const schema::RankRow& row, size_t r, int32_t world_size,
                                                     uint64_t events, size_t tracks, size_t counters) {
  const auto outside = [](int64_t value) { return "value " + std::to_string(value) + " is out of range"; };
  if (row.rank != static_cast<int32_t>(r)) return {"rank", "holds rank " + std::to_string(row.rank)};
  if (row.status > static_cast<uint8_t>(kLastRankStatus)) return {"status", outside(row.status)};
  if (row.pid < 0 || row.pid > kMaxPid) return {"pid", outside(row.pid)};
  if (row.local_rank < -1 || row.local_rank >= world_size) return {"local_rank", outside(row.local_rank)};
  if (row.node_id < -1 || row.node_id >= world_size) return {"node_id", outside(row.node_id)};
  if (row.event_offset > events || row.event_count > events - row.event_offset) {
    return {"event_count", "rows " + std::to_string(row.event_offset) + "+" + std::to_string(row.event_count) +
                               " lie past the end of /events"};
  }
  if (row.track_offset > tracks || row.track_count > tracks - row.track_offset) {
    return {"track_count", "points past the end of /tracks"};
  }
  if (row.counter_offset > counters || row.counter_count > counters - row.counter_offset) {
    return {"counter_count", "points past the end of /counters"};
  }
  if (row.event_count > 0 && row.first_ns > row.last_ns) return {"first_ns", "after last_ns"};
  return {};
}

// What is wrong with one row of /tracks; empty when sound.
std::string track_row_problem(const schema::TrackRow& t, int32_t rank, size_t strings) {
  if (t.rank != rank) return "holds rank " + std::to_string(t.rank);
  if (t.id > UINT16_MAX) return "id " + std::to_string(t.id) + " is beyond what an event can name";
  if (t.type < 1 || t.type > static_cast<uint8_t>(kLastTrackType)) {
    return "type " + std::to_string(t.type) + " is not a track type";
  }
  if (t.name_id >= strings) return "name_id " + std::to_string(t.name_id) + " is not in the string table";
  return {};
}

// The field of one event of a rank that is damaged, with what is wrong in
// `problem`; nullptr when the event is sound (then nothing is allocated:
// every event read passes here).
const char* damaged_field(const Event& e, const RankInfo& rank, size_t strings, std::string& problem) {
  const auto not_a = [&](unsigned value, const char* what) {
    problem = "value " + std::to_string(value) + " is not " + what;
  };
  const auto kind = static_cast<unsigned>(e.kind);
  if (kind < 1 || kind > kEventKindCount) return not_a(kind, "an event kind"), "kind";
  if (static_cast<unsigned>(e.op) >= kCommOpCount) return not_a(static_cast<unsigned>(e.op), "an operation"), "op";
  if (static_cast<unsigned>(e.datatype) >= kDataTypeCount) {
    return not_a(static_cast<unsigned>(e.datatype), "a data type"), "datatype";
  }
  if (static_cast<unsigned>(e.algorithm) >= kAlgorithmCount) {
    return not_a(static_cast<unsigned>(e.algorithm), "an algorithm"), "algorithm";
  }
  if (static_cast<unsigned>(e.protocol) >= kProtocolCount) {
    return not_a(static_cast<unsigned>(e.protocol), "a protocol"), "protocol";
  }
  if (e.flags >= kFlagPolling << 1) return not_a(e.flags, "a set of known flags"), "flags";
  if (e.name_id >= strings) return not_a(e.name_id, "in the string table"), "name_id";
  if (e.end_ns < e.begin_ns) return problem = "before begin_ns", "end_ns";
  if (e.begin_ns < rank.first_ns || e.end_ns > rank.last_ns) {
    problem = "outside the rank's recorded span [" + std::to_string(rank.first_ns) + ", " +
              std::to_string(rank.last_ns) + "] ns";
    return e.begin_ns < rank.first_ns ? "begin_ns" : "end_ns";
  }
  return nullptr;
}

using Note = std::function<void(TimelineDamage::Finding)>;

// The string table; a string whose bytes or offsets are damaged reads as
// kDamagedName.
std::vector<std::string> read_strings(const Reader& reader, const Note& note) {
  const auto bytes = reader.read_table<char>(schema::kStringBytes, H5T_NATIVE_CHAR, note);
  const auto offsets = reader.read_table<uint64_t>(schema::kStringOffsets, H5T_NATIVE_UINT64, note);
  std::vector<std::string> strings;
  for (size_t i = 0; i + 1 < offsets.rows.size(); ++i) {
    const uint64_t begin = offsets.rows[i], end = offsets.rows[i + 1];
    bool damaged = offsets.unreadable[i] || offsets.unreadable[i + 1];
    if (!damaged && (begin > end || end > bytes.rows.size())) {
      note({std::string("/") + schema::kStringOffsets, i + 1, 1, "", "offset " + std::to_string(end) +
                " does not fit the string table"});
      damaged = true;
    }
    for (uint64_t b = begin; !damaged && b < end; ++b) damaged = bytes.unreadable[b];
    strings.push_back(damaged ? kDamagedName : std::string(bytes.rows.data() + begin, end - begin));
  }
  return strings;
}

// A rank's clock; a damaged row reads as "not synced", damaged measurements are left out.
RankClock read_clock(int32_t rank, const schema::ClockRow& clock, bool unreadable,
                     const Table<schema::ClockPointRow>& points, const Note& note) {
  std::string problem;
  if (clock.rank != rank) problem = "holds rank " + std::to_string(clock.rank);
  else if (clock.bound_ns < 0) problem = "bound_ns is negative";
  else if (!std::isfinite(clock.drift_ppm) || std::fabs(clock.drift_ppm) > kMaxDriftPpm) problem = "drift_ppm is impossible";
  else if (clock.point_offset > points.rows.size() || clock.point_count > points.rows.size() - clock.point_offset) {
    problem = "points past the end of /clock_points";
  }
  if (!problem.empty()) note({std::string("/") + schema::kClock, static_cast<uint64_t>(rank), 1, "", problem});
  if (unreadable || !problem.empty()) return {};
  // A bound of kUnknownClockBoundNs says nothing is known: an imported rank moved only by its base time.
  RankClock out{clock.synced != 0 && clock.bound_ns < kUnknownClockBoundNs, clock.offset_ns, clock.drift_ppm,
                clock.bound_ns, clock.repair_shift_ns, {}};
  for (uint64_t i = clock.point_offset; i < clock.point_offset + clock.point_count; ++i) {
    const schema::ClockPointRow& p = points.rows[i];
    if (points.unreadable[i]) continue;
    if (p.rank != rank || p.bound_ns < 0) {
      note({std::string("/") + schema::kClockPoints, i, 1, "", p.rank != rank ? "holds rank " + std::to_string(p.rank) : "bound_ns is negative"});
      continue;
    }
    out.points.push_back({p.local_ns, p.offset_ns, p.bound_ns});
  }
  return out;
}

// A windowed rank's spans; damaged ones are left out, so that the steps
// inside them read as cut rather than as whole.
void read_capture_windows(const schema::RankRow& row, const Table<schema::CaptureWindowRow>& windows, const Note& note,
                          RankInfo& info) {
  if (row.windowed == 0) return;
  info.capture_windowed = true;
  const std::string dataset = std::string("/") + schema::kCaptureWindows;
  if (row.windowed != 1 || row.window_offset > windows.rows.size() ||
      row.window_count > windows.rows.size() - row.window_offset) {
    note({"/ranks", static_cast<uint64_t>(info.rank), 1, "window_offset",
          "points past the end of " + dataset + "; every step of the rank reads as cut by its capture windows"});
    return;
  }
  for (uint64_t i = row.window_offset; i < row.window_offset + row.window_count; ++i) {
    const schema::CaptureWindowRow& w = windows.rows[i];
    if (windows.unreadable[i]) continue;
    const int64_t previous_until = info.capture_windows.empty() ? INT64_MIN : info.capture_windows.back().second;
    if (w.rank != info.rank || w.from_ns >= w.until_ns || w.from_ns < previous_until) {
      note({dataset, i, 1, "", w.rank != info.rank ? "holds rank " + std::to_string(w.rank)
                               : w.from_ns >= w.until_ns ? "ends before it begins"
                                                         : "overlaps the window before it"});
      continue;
    }
    info.capture_windows.emplace_back(w.from_ns, w.until_ns);
  }
}

}  // namespace

uint64_t TimelineDamage::total_rows() const {
  uint64_t total = 0;
  for (const auto& [dataset, rows] : rows_left_out) total += rows;
  return total;
}

std::string TimelineDamage::describe(const Finding& finding) {
  std::string text = finding.dataset + " row " + std::to_string(finding.row);
  if (finding.rows > 1) text += "-" + std::to_string(finding.row + finding.rows - 1);
  if (!finding.field.empty()) text += " " + finding.field;
  return text + ": " + finding.problem;
}

std::string TimelineDamage::summary() const {
  std::string text;
  for (const auto& [dataset, rows] : rows_left_out) {
    text += (text.empty() ? "" : ", ") + std::to_string(rows) + " rows of " + dataset;
  }
  text += " damaged and left out";
  if (!findings.empty()) text += " (first: " + describe(findings.front()) + ")";
  return text;
}

uint64_t Timeline::note_damaged_rows(const std::string& dataset, uint64_t new_first, uint64_t new_end) const {
  // Rows are read more than once (each analysis reads them): each damaged row counts once.
  std::map<uint64_t, uint64_t>& runs = damaged_rows_[dataset];
  uint64_t first = new_first, end = new_end, already = 0;
  auto next = runs.upper_bound(first);
  if (next != runs.begin() && std::prev(next)->second >= first) --next;
  while (next != runs.end() && next->first <= end) {
    const uint64_t overlap_first = std::max(new_first, next->first), overlap_end = std::min(new_end, next->second);
    if (overlap_end > overlap_first) already += overlap_end - overlap_first;
    first = std::min(first, next->first);
    end = std::max(end, next->second);
    next = runs.erase(next);
  }
  runs.emplace(first, end);
  const uint64_t added = new_end - new_first - already;
  if (added > 0) damage_.rows_left_out[dataset] += added;
  return added;
}

void Timeline::note_damage(TimelineDamage::Finding finding) const {
  std::lock_guard<std::mutex> lock(damage_mutex_);
  if (note_damaged_rows(finding.dataset, finding.row, finding.row + finding.rows) == 0) return;
  keep_finding(std::move(finding));
}

// The findings of the lowest rows are kept, whichever thread or process
// found them first: what is kept does not depend on the order of reading.
void Timeline::keep_finding(TimelineDamage::Finding finding) const {
  std::vector<TimelineDamage::Finding>& kept = damage_.findings;
  const auto before = [](const TimelineDamage::Finding& a, const TimelineDamage::Finding& b) {
    return std::tie(a.dataset, a.row) < std::tie(b.dataset, b.row);
  };
  const auto at = std::upper_bound(kept.begin(), kept.end(), finding, before);
  if (kept.size() == TimelineDamage::kFindingsKept) {
    if (at == kept.end()) return;
    kept.pop_back();
  }
  kept.insert(at, std::move(finding));
}

Timeline::DamageSeen Timeline::damage_seen() const {
  std::lock_guard<std::mutex> lock(damage_mutex_);
  return {damage_.findings, damaged_rows_};
}

void Timeline::join_damage(const DamageSeen& other) const {
  std::lock_guard<std::mutex> lock(damage_mutex_);
  // The findings first, while their rows are still new here; then the rows without one kept.
  for (const TimelineDamage::Finding& finding : other.findings) {
    if (note_damaged_rows(finding.dataset, finding.row, finding.row + finding.rows) > 0) keep_finding(finding);
  }
  for (const auto& [dataset, runs] : other.rows) {
    for (const auto& [first, end] : runs) note_damaged_rows(dataset, first, end);
  }
}

TimelineDamage Timeline::damage() const {
  std::lock_guard<std::mutex> lock(damage_mutex_);
  return damage_;
}

Timeline::Timeline(const std::string& path) : path_(path) {
  schema::silence_hdf5_errors();
  if (::access(path.c_str(), R_OK) != 0) throw Error("cannot read " + path + ": " + errno_text(errno));
  if (H5Fis_hdf5(path.c_str()) <= 0) throw Error(path + " is not an HDF5 file");
  file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file_ < 0) throw Error("cannot open " + path + " as HDF5 (damaged or cut short?)");
  H5F_info2_t file_info{};
  // Superblock version 3 comes with the 1.10 format's checksummed object headers and chunk indexes.
  metadata_checksummed_ = H5Fget_info2(file_, &file_info) >= 0 && file_info.super.version >= 3;
  try {
    const Reader reader(file_, path_);
    const auto note = [this](TimelineDamage::Finding finding) { note_damage(std::move(finding)); };
    if (reader.text_attribute("format") != kTimelineFormatName) {
      throw Error(path + " is an HDF5 file but not a rankscope timeline (no format attribute \"" +
                  kTimelineFormatName + "\")");
    }
    const int64_t version = reader.int_attribute("format_version");
    if (version != kTimelineVersion) {
      throw Error(path + ": timeline format version " + std::to_string(version) +
                  " is not supported; this rankscope reads version " + std::to_string(kTimelineVersion));
    }

    strings_ = std::make_shared<const std::vector<std::string>>(read_strings(reader, note));
    const auto rows = reader.read_table<schema::RankRow>(schema::kRanks, schema::rank_row_type(), note);
    // Timelines written before the torch kinds have two columns fewer.
    const uint64_t kinds = reader.columns(schema::kEventCounts, H5T_NATIVE_UINT64) == kEventKindCountBeforeTorch
                               ? kEventKindCountBeforeTorch
                               : kEventKindCount;
    const auto counts = reader.read_table<uint64_t>(schema::kEventCounts, H5T_NATIVE_UINT64, note, kinds);
    const auto tracks = reader.read_table<schema::TrackRow>(schema::kTracks, schema::track_row_type(), note);
    const auto counters = reader.read_table<schema::CounterRow>(schema::kCounters, schema::counter_row_type(), note);
    // Timelines written before /clock had repair_shift_ns lack the member;
    // HDF5 leaves it as the table was zeroed: no shift.
    const auto clocks = reader.read_table<schema::ClockRow>(schema::kClock, schema::clock_row_type(), note);
    const auto points = reader.read_table<schema::ClockPointRow>(schema::kClockPoints, schema::clock_point_row_type(), note);
    clock_corrected_ = reader.int_attribute("clock_corrected") != 0;
    if (clocks.rows.size() != rows.rows.size()) throw Error(path + ": /clock does not match /ranks");
    event_type_ = schema::event_type().release();
    events_ = reader.open(schema::kEvents, event_type_).release();
    event_count_ = reader.dims(events_).at(0);
    events_chunk_rows_ = chunk_rows(events_);
    open_events_directly();
    if (H5Lexists(file_, schema::kEventChecksums, H5P_DEFAULT) > 0) {
      auto checksums = reader.read_table<uint32_t>(schema::kEventChecksums, H5T_NATIVE_UINT32, note);
      event_checksums_ = std::move(checksums.rows);
      event_checksum_unreadable_ = std::move(checksums.unreadable);
      event_checksum_verified_ = std::make_unique<std::atomic<bool>[]>(event_checksums_.size());
      checksummed_ = true;
    }
    Table<schema::CaptureWindowRow> windows;
    if (H5Lexists(file_, schema::kCaptureWindows, H5P_DEFAULT) > 0) {
      windows = reader.read_table<schema::CaptureWindowRow>(schema::kCaptureWindows, schema::capture_window_row_type(),
                                                           note);
    }
    if (counts.rows.size() != rows.rows.size() * kinds) {
      throw Error(path + ": /event_counts does not match /ranks");
    }

    const auto world_size = static_cast<int32_t>(rows.rows.size());
    for (size_t r = 0; r < rows.rows.size(); ++r) {
      RankInfo info;
      info.rank = static_cast<int32_t>(r);
      const schema::RankRow& row = rows.rows[r];
      const auto [field, problem] =
          rows.unreadable[r]
              ? std::pair<std::string, std::string>{}
              : rank_row_problem(row, r, world_size, event_count_, tracks.rows.size(), counters.rows.size());
      const uint64_t blocks = (row.event_count + schema::kEventChecksumRows - 1) / schema::kEventChecksumRows;
      if (!rows.unreadable[r] && problem.empty() && checksummed_ &&
          (row.checksum_offset > event_checksums_.size() || blocks > event_checksums_.size() - row.checksum_offset)) {
        note({"/ranks", r, 1, "checksum_offset", "points past the end of /event_checksums; the rank reads as missing"});
        checksum_offsets_.push_back(0);
        ranks_.push_back(std::move(info));
        continue;
      }
      checksum_offsets_.push_back(rows.unreadable[r] || !problem.empty() ? 0 : row.checksum_offset);
      if (rows.unreadable[r] || !problem.empty()) {
        // Nothing of the rank can be placed without its row: it reads as missing.
        if (!problem.empty()) note({"/ranks", r, 1, field, problem + "; the rank reads as missing"});
        ranks_.push_back(std::move(info));
        continue;
      }
      info.local_rank = row.local_rank;
      info.node_id = row.node_id;
      info.status = static_cast<RankStatus>(row.status);
      info.pid = row.pid;
      info.event_offset = row.event_offset;
      info.event_count = row.event_count;
      info.first_ns = row.first_ns;
      info.last_ns = row.last_ns;
      info.last_heard_ns = row.last_heard_ns;
      info.start_wall_ns = row.start_wall_ns;
      info.host = fixed_text(row.host);
      info.gpu_uuids = fixed_text(row.gpu_uuids);
      info.launcher = fixed_text(row.launcher);
      info.agent_version = fixed_text(row.agent_version);
      info.capture = fixed_text(row.capture);
      info.shard = fixed_text(row.shard);
      info.job = {fixed_text(row.job_id), row.job_start_wall_ns};

      info.events_by_kind.assign(counts.rows.begin() + static_cast<long>(r * kinds),
                                 counts.rows.begin() + static_cast<long>((r + 1) * kinds));
      info.events_by_kind.resize(kEventKindCount, 0);
      uint64_t counted = 0;
      bool overflow = false;
      for (uint64_t n : info.events_by_kind) overflow |= __builtin_add_overflow(counted, n, &counted);
      if (!counts.unreadable[r] && (overflow || counted != info.event_count)) {
        note({"/event_counts", r, 1, "", "adds up to " + std::to_string(counted) + " events, not the rank's " +
                                              std::to_string(info.event_count) + "; read as unknown"});
      }
      if (counts.unreadable[r] || overflow || counted != info.event_count) info.events_by_kind.assign(kEventKindCount, 0);

      for (uint64_t i = row.track_offset; i < row.track_offset + row.track_count; ++i) {
        const schema::TrackRow& t = tracks.rows[i];
        if (tracks.unreadable[i]) continue;
        // Events name their track by id; those of a track left out are shown as their thread's.
        if (const std::string problem = track_row_problem(t, info.rank, strings_->size()); !problem.empty()) {
          note({"/tracks", i, 1, "", problem});
          continue;
        }
        info.tracks.push_back({t.os_id, t.id, t.name_id, t.device, static_cast<TrackType>(t.type), 0, 0});
      }
      for (uint64_t i = row.counter_offset; i < row.counter_offset + row.counter_count; ++i) {
        const schema::CounterRow& c = counters.rows[i];
        if (counters.unreadable[i]) continue;
        if (c.rank != info.rank || c.name_id >= strings_->size()) {
          note({"/counters", i, 1, c.rank != info.rank ? "rank" : "name_id",
                c.rank != info.rank ? "holds rank " + std::to_string(c.rank) : "not in the string table"});
          continue;
        }
        info.counters.set((*strings_)[c.name_id], c.value);
      }
      info.clock = read_clock(info.rank, clocks.rows[r], clocks.unreadable[r], points, note);
      read_capture_windows(row, windows, note, info);
      ranks_.push_back(std::move(info));
    }
  } catch (...) {
    if (events_fd_ >= 0) ::close(events_fd_);
    if (events_ >= 0) H5Dclose(events_);
    if (event_type_ >= 0) H5Tclose(event_type_);
    H5Fclose(file_);
    throw;
  }
}

Timeline::~Timeline() {
  if (events_fd_ >= 0) ::close(events_fd_);
  H5Dclose(events_);
  H5Tclose(event_type_);
  H5Fclose(file_);
}

const std::string& Timeline::string(uint32_t id) const {
  if (id >= strings_->size()) throw Error(path_ + ": string id " + std::to_string(id) + " is out of range");
  return (*strings_)[id];
}

void Timeline::open_events_directly() {
  if (events_chunk_rows_ != 0 || event_count_ == 0) return;
  const haddr_t offset = H5Dget_offset(events_);
  const Handle stored(H5Dget_type(events_), H5Tclose);
  // A user block before HDF5's data (h5jam) would move every address.
  const Handle creation(H5Fget_create_plist(file_), H5Pclose);
  hsize_t user_block = 1, file_bytes = 0;
  if (offset == HADDR_UNDEF || !stored.valid() || H5Tequal(stored, event_type_) <= 0 || !creation.valid() ||
      H5Pget_userblock(creation, &user_block) < 0 || user_block != 0 || H5Fget_filesize(file_, &file_bytes) < 0 ||
      offset + event_count_ * sizeof(Event) > file_bytes) {
    return;
  }
  events_fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  events_file_offset_ = offset;
}

RowRanges Timeline::read_event_rows(uint64_t first, uint64_t count, Event* rows) const {
  if (events_fd_ < 0) {
    std::lock_guard<std::mutex> lock(hdf5_mutex_);
    return read_rows(events_, event_type_, first, count, 1, events_chunk_rows_, rows, sizeof(Event));
  }
  char* at = reinterpret_cast<char*>(rows);
  size_t left = count * sizeof(Event);
  off_t from = static_cast<off_t>(events_file_offset_ + first * sizeof(Event));
  while (left > 0) {
    const ssize_t got = ::pread(events_fd_, at, left, from);
    if (got < 0 && errno == EINTR) continue;
    // As HDF5 reports a contiguous dataset it cannot read: the whole run.
    if (got <= 0) return {{first, first + count}};
    at += got;
    from += got;
    left -= static_cast<size_t>(got);
  }
  return {};
}

void Timeline::read_events(int32_t rank, uint64_t first, uint64_t count, std::vector<Event>& out) const {
  const RankInfo& info = ranks_.at(static_cast<size_t>(rank));
  if (first > info.event_count || count > info.event_count - first) {
    throw Error(path_ + ": events " + std::to_string(first) + "+" + std::to_string(count) + " of rank " +
                std::to_string(rank) + " are out of range");
  }
  // A block at a time, so that reading, checking its checksum and checking
  // its values find it in the CPU's cache. With checksums, whole blocks are
  // read and checked, then cut to the rows asked for; a block whose
  // checksum an earlier read verified gives only those rows.
  const uint64_t block = schema::kEventChecksumRows;
  const uint64_t from = checksummed_ ? first / block * block : first;
  const uint64_t to = checksummed_ ? std::min(info.event_count, (first + count + block - 1) / block * block) : first + count;
  out.resize(to - from);
  const std::string dataset = std::string("/") + schema::kEvents;
  std::string problem;
  size_t kept = 0;
  for (uint64_t block_begin = from; block_begin < to;) {
    const uint64_t block_end = std::min(to, (block_begin / block + 1) * block);
    const size_t index = checksummed_ ? checksum_offsets_[static_cast<size_t>(rank)] + block_begin / block : 0;
    const bool verified = checksummed_ && event_checksum_verified_[index].load(std::memory_order_relaxed);
    const uint64_t begin = verified ? std::max(block_begin, first) : block_begin;
    const uint64_t end = verified ? std::min(block_end, first + count) : block_end;
    const uint64_t begin_row = info.event_offset + begin, end_row = info.event_offset + end;
    Event* rows = out.data() + (begin - from);
    const RowRanges unreadable = read_event_rows(begin_row, end - begin, rows);
    for (const auto& [bad_begin, bad_end] : unreadable) {
      note_damage({dataset, bad_begin, bad_end - bad_begin, "", "unreadable (the file is damaged or cut short there)"});
    }
    if (checksummed_) {
      const char* broken = !unreadable.empty()                        ? "its checksum cannot be checked"
                           : event_checksum_unreadable_[index]         ? "its checksum is unreadable"
                           : verified                                  ? nullptr
                           : crc32c(rows, (end - begin) * sizeof(Event)) != event_checksums_[index] ? "checksum mismatch"
                                                                                                 : nullptr;
      if (broken) {
        note_damage({dataset, begin_row, end_row - begin_row, "", broken});
        block_begin = block_end;
        continue;
      }
      event_checksum_verified_[index].store(true, std::memory_order_relaxed);
    }
    auto next_unreadable = unreadable.begin();
    for (uint64_t row = std::max(begin, first) + info.event_offset; row < std::min(end, first + count) + info.event_offset;
         ++row) {
      while (next_unreadable != unreadable.end() && next_unreadable->second <= row) ++next_unreadable;
      if (next_unreadable != unreadable.end() && next_unreadable->first <= row) {
        row = next_unreadable->second - 1;
        continue;
      }
      const size_t at = row - info.event_offset - from;
      if (const char* field = damaged_field(out[at], info, strings_->size(), problem)) {
        note_damage({dataset, row, 1, field, problem});
        continue;
      }
      if (kept != at) out[kept] = out[at];
      ++kept;
    }
    block_begin = block_end;
  }
  out.resize(kept);
}

uint64_t EventsReadOfRank::events() const {
  uint64_t total = 0;
  for (const uint64_t n : by_kind) total += n;
  return total;
}

// Blocks of 1 MiB, as the reader checks them, so that counting finds each in cache.
constexpr uint64_t kCheckBlockRows = (1 << 20) / sizeof(Event);

std::vector<EventsReadOfRank> Timeline::check_events() const {
  std::vector<EventsReadOfRank> read(ranks_.size());
  for (const RankInfo& rank : ranks_) {
    EventsReadOfRank& of_rank = read[static_cast<size_t>(rank.rank)];
    for_each_event_block(rank.rank, [&](const std::vector<Event>& events) {
      // Every kind read is valid: the reader left out rows of any other.
      uint64_t* counts = of_rank.by_kind.data();
      for (const Event& event : events) ++counts[static_cast<size_t>(event.kind) - 1];
    }, kCheckBlockRows);
  }
  return read;
}

}  // namespace rankscope
