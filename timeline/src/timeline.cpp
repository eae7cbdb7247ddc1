#include "rankscope/timeline/timeline.h"

#include <unistd.h>

#include <cerrno>

#include "rankscope/model/error.h"
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
  }
  return "invalid";
}

namespace {

class Reader {
 public:
  Reader(hid_t file, const std::string& path) : file_(file), path_(path) {}

  Handle open(const char* name) const {
    if (H5Lexists(file_, name, H5P_DEFAULT) <= 0) throw Error(path_ + ": dataset /" + name + " is missing");
    Handle dataset(H5Dopen2(file_, name, H5P_DEFAULT), H5Dclose);
    if (!dataset.valid()) throw Error(path_ + ": dataset /" + name + " cannot be opened");
    return dataset;
  }

  std::vector<hsize_t> dims(hid_t dataset) const {
    Handle space(H5Dget_space(dataset), H5Sclose);
    std::vector<hsize_t> out(static_cast<size_t>(std::max(0, H5Sget_simple_extent_ndims(space))));
    H5Sget_simple_extent_dims(space, out.data(), nullptr);
    return out;
  }

  template <typename Row>
  std::vector<Row> read_all(const char* name, hid_t type, size_t row_width = 1) const {
    Handle dataset = open(name);
    const std::vector<hsize_t> shape = dims(dataset);
    hsize_t elements = 1;
    for (hsize_t d : shape) elements *= d;
    if (shape.empty() || elements % row_width != 0) throw Error(path_ + ": dataset /" + name + " has the wrong shape");
    std::vector<Row> rows(elements);
    if (elements > 0 && H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()) < 0) {
      throw Error(path_ + ": dataset /" + name + " cannot be read (is it of the right type?)");
    }
    return rows;
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
    int64_t value = 0;
    if (H5Aread(attribute, H5T_NATIVE_INT64, &value) < 0) throw Error(path_ + ": attribute " + name + " is unreadable");
    return value;
  }

 private:
  hid_t file_;
  const std::string& path_;
};

}  // namespace

Timeline::Timeline(const std::string& path) : path_(path) {
  schema::silence_hdf5_errors();
  if (::access(path.c_str(), R_OK) != 0) throw Error("cannot read " + path + ": " + errno_text(errno));
  if (H5Fis_hdf5(path.c_str()) <= 0) throw Error(path + " is not an HDF5 file");
  file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file_ < 0) throw Error("cannot open " + path + " as HDF5 (damaged or cut short?)");
  try {
    const Reader reader(file_, path_);
    if (reader.text_attribute("format") != kTimelineFormatName) {
      throw Error(path + " is an HDF5 file but not a rankscope timeline (no format attribute \"" +
                  kTimelineFormatName + "\")");
    }
    const int64_t version = reader.int_attribute("format_version");
    if (version != kTimelineVersion) {
      throw Error(path + ": timeline format version " + std::to_string(version) +
                  " is not supported; this rankscope reads version " + std::to_string(kTimelineVersion));
    }

    const std::vector<char> bytes = reader.read_all<char>(schema::kStringBytes, H5T_NATIVE_CHAR);
    const std::vector<uint64_t> offsets = reader.read_all<uint64_t>(schema::kStringOffsets, H5T_NATIVE_UINT64);
    for (size_t i = 0; i + 1 < offsets.size(); ++i) {
      if (offsets[i] > offsets[i + 1] || offsets[i + 1] > bytes.size()) {
        throw Error(path + ": /strings/offsets is inconsistent at entry " + std::to_string(i));
      }
      strings_.emplace_back(bytes.data() + offsets[i], offsets[i + 1] - offsets[i]);
    }

    const auto rows = reader.read_all<schema::RankRow>(schema::kRanks, schema::rank_row_type());
    const auto counts = reader.read_all<uint64_t>(schema::kEventCounts, H5T_NATIVE_UINT64, kEventKindCount);
    const auto tracks = reader.read_all<schema::TrackRow>(schema::kTracks, schema::track_row_type());
    const auto counters = reader.read_all<schema::CounterRow>(schema::kCounters, schema::counter_row_type());
    // Timelines written before /clock had repair_shift_ns lack the member;
    // HDF5 leaves it as read_all zeroed it: no shift.
    const auto clocks = reader.read_all<schema::ClockRow>(schema::kClock, schema::clock_row_type());
    const auto points = reader.read_all<schema::ClockPointRow>(schema::kClockPoints, schema::clock_point_row_type());
    clock_corrected_ = reader.int_attribute("clock_corrected") != 0;
    if (clocks.size() != rows.size()) throw Error(path + ": /clock does not match /ranks");
    events_ = reader.open(schema::kEvents).release();
    event_type_ = schema::event_type().release();
    event_count_ = reader.dims(events_).at(0);
    if (counts.size() != rows.size() * kEventKindCount) throw Error(path + ": /event_counts does not match /ranks");

    for (size_t r = 0; r < rows.size(); ++r) {
      const schema::RankRow& row = rows[r];
      const std::string where = path + ": /ranks row " + std::to_string(r);
      if (row.rank != static_cast<int32_t>(r)) throw Error(where + " holds rank " + std::to_string(row.rank));
      if (row.event_offset + row.event_count > event_count_ || row.event_offset + row.event_count < row.event_offset ||
          row.track_offset + row.track_count > tracks.size() ||
          row.counter_offset + row.counter_count > counters.size()) {
        throw Error(where + " points past the end of /events, /tracks or /counters");
      }
      RankInfo info;
      info.rank = row.rank;
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
      info.host = row.host;
      info.gpu_uuids = row.gpu_uuids;
      info.launcher = row.launcher;
      info.agent_version = row.agent_version;
      info.capture = row.capture;
      info.shard = row.shard;
      info.job = {row.job_id, row.job_start_wall_ns};
      info.events_by_kind.assign(counts.begin() + static_cast<long>(r * kEventKindCount),
                                 counts.begin() + static_cast<long>((r + 1) * kEventKindCount));
      for (uint64_t i = row.track_offset; i < row.track_offset + row.track_count; ++i) {
        const schema::TrackRow& t = tracks[i];
        info.tracks.push_back({t.os_id, t.id, t.name_id, t.device, static_cast<TrackType>(t.type), 0, 0});
      }
      for (uint64_t i = row.counter_offset; i < row.counter_offset + row.counter_count; ++i) {
        info.counters.set(string(counters[i].name_id), counters[i].value);
      }
      const schema::ClockRow& clock = clocks[r];
      if (clock.point_offset + clock.point_count > points.size()) {
        throw Error(path + ": /clock row " + std::to_string(r) + " points past the end of /clock_points");
      }
      info.clock = {clock.synced != 0, clock.offset_ns, clock.drift_ppm, clock.bound_ns, clock.repair_shift_ns, {}};
      for (uint64_t i = clock.point_offset; i < clock.point_offset + clock.point_count; ++i) {
        info.clock.points.push_back({points[i].local_ns, points[i].offset_ns, points[i].bound_ns});
      }
      ranks_.push_back(std::move(info));
    }
  } catch (...) {
    if (events_ >= 0) H5Dclose(events_);
    if (event_type_ >= 0) H5Tclose(event_type_);
    H5Fclose(file_);
    throw;
  }
}

Timeline::~Timeline() {
  H5Dclose(events_);
  H5Tclose(event_type_);
  H5Fclose(file_);
}

const std::string& Timeline::string(uint32_t id) const {
  if (id >= strings_.size()) throw Error(path_ + ": string id " + std::to_string(id) + " is out of range");
  return strings_[id];
}

void Timeline::read_events(uint64_t first, uint64_t count, std::vector<Event>& out) const {
  if (first + count > event_count_ || first + count < first) {
    throw Error(path_ + ": events " + std::to_string(first) + "+" + std::to_string(count) + " are out of range");
  }
  out.resize(count);
  if (count == 0) return;
  Handle file_space(H5Dget_space(events_), H5Sclose);
  const hsize_t start = first, n = count;
  H5Sselect_hyperslab(file_space, H5S_SELECT_SET, &start, nullptr, &n, nullptr);
  Handle memory_space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  if (H5Dread(events_, event_type_, memory_space, file_space, H5P_DEFAULT, out.data()) < 0) {
    throw Error(path_ + ": reading events " + std::to_string(first) + "-" + std::to_string(first + count) +
                " failed (file damaged?)");
  }
}

}  // namespace rankscope
