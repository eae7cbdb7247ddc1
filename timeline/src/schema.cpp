#include "rankscope/timeline/schema.h"

#include <cstddef>

namespace rankscope::schema {
namespace {

template <typename Enum>
Handle enum_type(int count, std::string_view (*name)(Enum)) {
  Handle type(H5Tenum_create(H5T_NATIVE_UINT8), H5Tclose);
  for (int i = 0; i < count; ++i) {
    const auto value = static_cast<uint8_t>(i);
    H5Tenum_insert(type, std::string(name(static_cast<Enum>(i))).c_str(), &value);
  }
  return type;
}

Handle text_type(size_t size) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type, size);
  H5Tset_strpad(type, H5T_STR_NULLTERM);
  return type;
}

}  // namespace

Handle event_type() {
  Handle type(H5Tcreate(H5T_COMPOUND, sizeof(Event)), H5Tclose);
  Handle kind(H5Tenum_create(H5T_NATIVE_UINT8), H5Tclose);
  for (int i = 1; i <= kEventKindCount; ++i) {
    const auto value = static_cast<uint8_t>(i);
    H5Tenum_insert(kind, std::string(event_kind_name(static_cast<EventKind>(i))).c_str(), &value);
  }
  const Handle op = enum_type<CommOp>(kCommOpCount, comm_op_name);
  const Handle datatype = enum_type<DataType>(kDataTypeCount, data_type_name);
  const Handle algorithm = enum_type<Algorithm>(kAlgorithmCount, algorithm_name);
  const Handle protocol = enum_type<Protocol>(kProtocolCount, protocol_name);
  H5Tinsert(type, "begin_ns", offsetof(Event, begin_ns), H5T_NATIVE_INT64);
  H5Tinsert(type, "end_ns", offsetof(Event, end_ns), H5T_NATIVE_INT64);
  H5Tinsert(type, "correlation_id", offsetof(Event, correlation_id), H5T_NATIVE_UINT64);
  H5Tinsert(type, "comm_hash", offsetof(Event, comm_hash), H5T_NATIVE_UINT64);
  H5Tinsert(type, "seq", offsetof(Event, seq), H5T_NATIVE_UINT64);
  H5Tinsert(type, "bytes", offsetof(Event, bytes), H5T_NATIVE_UINT64);
  H5Tinsert(type, "name_id", offsetof(Event, name_id), H5T_NATIVE_UINT32);
  H5Tinsert(type, "track", offsetof(Event, track), H5T_NATIVE_UINT16);
  H5Tinsert(type, "kind", offsetof(Event, kind), kind);
  H5Tinsert(type, "op", offsetof(Event, op), op);
  H5Tinsert(type, "peer", offsetof(Event, peer), H5T_NATIVE_INT32);
  H5Tinsert(type, "datatype", offsetof(Event, datatype), datatype);
  H5Tinsert(type, "algorithm", offsetof(Event, algorithm), algorithm);
  H5Tinsert(type, "protocol", offsetof(Event, protocol), protocol);
  H5Tinsert(type, "flags", offsetof(Event, flags), H5T_NATIVE_UINT8);
  return type;
}

Handle rank_row_type() {
  Handle type(H5Tcreate(H5T_COMPOUND, sizeof(RankRow)), H5Tclose);
  Handle status(H5Tenum_create(H5T_NATIVE_UINT8), H5Tclose);
  for (uint8_t value = 0; value <= static_cast<uint8_t>(kLastRankStatus); ++value) {
    H5Tenum_insert(status, rank_status_name(static_cast<RankStatus>(value)), &value);
  }
  H5Tinsert(type, "rank", offsetof(RankRow, rank), H5T_NATIVE_INT32);
  H5Tinsert(type, "local_rank", offsetof(RankRow, local_rank), H5T_NATIVE_INT32);
  H5Tinsert(type, "node_id", offsetof(RankRow, node_id), H5T_NATIVE_INT32);
  H5Tinsert(type, "status", offsetof(RankRow, status), status);
  H5Tinsert(type, "pid", offsetof(RankRow, pid), H5T_NATIVE_INT64);
  H5Tinsert(type, "event_offset", offsetof(RankRow, event_offset), H5T_NATIVE_UINT64);
  H5Tinsert(type, "event_count", offsetof(RankRow, event_count), H5T_NATIVE_UINT64);
  H5Tinsert(type, "track_offset", offsetof(RankRow, track_offset), H5T_NATIVE_UINT64);
  H5Tinsert(type, "track_count", offsetof(RankRow, track_count), H5T_NATIVE_UINT64);
  H5Tinsert(type, "counter_offset", offsetof(RankRow, counter_offset), H5T_NATIVE_UINT64);
  H5Tinsert(type, "counter_count", offsetof(RankRow, counter_count), H5T_NATIVE_UINT64);
  H5Tinsert(type, "first_ns", offsetof(RankRow, first_ns), H5T_NATIVE_INT64);
  H5Tinsert(type, "last_ns", offsetof(RankRow, last_ns), H5T_NATIVE_INT64);
  H5Tinsert(type, "last_heard_ns", offsetof(RankRow, last_heard_ns), H5T_NATIVE_INT64);
  H5Tinsert(type, "start_wall_ns", offsetof(RankRow, start_wall_ns), H5T_NATIVE_INT64);
  H5Tinsert(type, "host", offsetof(RankRow, host), text_type(sizeof(RankRow::host)));
  H5Tinsert(type, "gpu_uuids", offsetof(RankRow, gpu_uuids), text_type(sizeof(RankRow::gpu_uuids)));
  H5Tinsert(type, "launcher", offsetof(RankRow, launcher), text_type(sizeof(RankRow::launcher)));
  H5Tinsert(type, "agent_version", offsetof(RankRow, agent_version), text_type(sizeof(RankRow::agent_version)));
  H5Tinsert(type, "capture", offsetof(RankRow, capture), text_type(sizeof(RankRow::capture)));
  H5Tinsert(type, "shard", offsetof(RankRow, shard), text_type(sizeof(RankRow::shard)));
  H5Tinsert(type, "job_id", offsetof(RankRow, job_id), text_type(sizeof(RankRow::job_id)));
  H5Tinsert(type, "job_start_wall_ns", offsetof(RankRow, job_start_wall_ns), H5T_NATIVE_INT64);
  H5Tinsert(type, "checksum_offset", offsetof(RankRow, checksum_offset), H5T_NATIVE_UINT64);
  H5Tinsert(type, "windowed", offsetof(RankRow, windowed), H5T_NATIVE_UINT8);
  H5Tinsert(type, "window_offset", offsetof(RankRow, window_offset), H5T_NATIVE_UINT64);
  H5Tinsert(type, "window_count", offsetof(RankRow, window_count), H5T_NATIVE_UINT64);
  return type;
}

Handle track_row_type() {
  Handle type(H5Tcreate(H5T_COMPOUND, sizeof(TrackRow)), H5Tclose);
  Handle track_type(H5Tenum_create(H5T_NATIVE_UINT8), H5Tclose);
  for (uint8_t value = 1; value <= static_cast<uint8_t>(kLastTrackType); ++value) {
    H5Tenum_insert(track_type, std::string(track_type_name(static_cast<TrackType>(value))).c_str(), &value);
  }
  H5Tinsert(type, "rank", offsetof(TrackRow, rank), H5T_NATIVE_INT32);
  H5Tinsert(type, "id", offsetof(TrackRow, id), H5T_NATIVE_UINT32);
  H5Tinsert(type, "os_id", offsetof(TrackRow, os_id), H5T_NATIVE_UINT64);
  H5Tinsert(type, "name_id", offsetof(TrackRow, name_id), H5T_NATIVE_UINT32);
  H5Tinsert(type, "device", offsetof(TrackRow, device), H5T_NATIVE_INT16);
  H5Tinsert(type, "type", offsetof(TrackRow, type), track_type);
  return type;
}

Handle counter_row_type() {
  Handle type(H5Tcreate(H5T_COMPOUND, sizeof(CounterRow)), H5Tclose);
  H5Tinsert(type, "rank", offsetof(CounterRow, rank), H5T_NATIVE_INT32);
  H5Tinsert(type, "name_id", offsetof(CounterRow, name_id), H5T_NATIVE_UINT32);
  H5Tinsert(type, "value", offsetof(CounterRow, value), H5T_NATIVE_UINT64);
  return type;
}

Handle clock_row_type() {
  Handle type(H5Tcreate(H5T_COMPOUND, sizeof(ClockRow)), H5Tclose);
  H5Tinsert(type, "rank", offsetof(ClockRow, rank), H5T_NATIVE_INT32);
  H5Tinsert(type, "synced", offsetof(ClockRow, synced), H5T_NATIVE_UINT8);
  H5Tinsert(type, "offset_ns", offsetof(ClockRow, offset_ns), H5T_NATIVE_INT64);
  H5Tinsert(type, "drift_ppm", offsetof(ClockRow, drift_ppm), H5T_NATIVE_DOUBLE);
  H5Tinsert(type, "bound_ns", offsetof(ClockRow, bound_ns), H5T_NATIVE_INT64);
  H5Tinsert(type, "point_offset", offsetof(ClockRow, point_offset), H5T_NATIVE_UINT64);
  H5Tinsert(type, "point_count", offsetof(ClockRow, point_count), H5T_NATIVE_UINT64);
  H5Tinsert(type, "repair_shift_ns", offsetof(ClockRow, repair_shift_ns), H5T_NATIVE_INT64);
  return type;
}

Handle clock_point_row_type() {
  Handle type(H5Tcreate(H5T_COMPOUND, sizeof(ClockPointRow)), H5Tclose);
  H5Tinsert(type, "rank", offsetof(ClockPointRow, rank), H5T_NATIVE_INT32);
  H5Tinsert(type, "local_ns", offsetof(ClockPointRow, local_ns), H5T_NATIVE_INT64);
  H5Tinsert(type, "offset_ns", offsetof(ClockPointRow, offset_ns), H5T_NATIVE_INT64);
  H5Tinsert(type, "bound_ns", offsetof(ClockPointRow, bound_ns), H5T_NATIVE_INT64);
  return type;
}

Handle capture_window_row_type() {
  Handle type(H5Tcreate(H5T_COMPOUND, sizeof(CaptureWindowRow)), H5Tclose);
  H5Tinsert(type, "rank", offsetof(CaptureWindowRow, rank), H5T_NATIVE_INT32);
  H5Tinsert(type, "from_ns", offsetof(CaptureWindowRow, from_ns), H5T_NATIVE_INT64);
  H5Tinsert(type, "until_ns", offsetof(CaptureWindowRow, until_ns), H5T_NATIVE_INT64);
  return type;
}

void silence_hdf5_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

Handle collective_row_type() {
  Handle type(H5Tcreate(H5T_COMPOUND, sizeof(CollectiveRow)), H5Tclose);
  const Handle op = enum_type<CommOp>(kCommOpCount, comm_op_name);
  const Handle datatype = enum_type<DataType>(kDataTypeCount, data_type_name);
  const Handle algorithm = enum_type<Algorithm>(kAlgorithmCount, algorithm_name);
  const Handle protocol = enum_type<Protocol>(kProtocolCount, protocol_name);
  H5Tinsert(type, "comm_hash", offsetof(CollectiveRow, comm_hash), H5T_NATIVE_UINT64);
  H5Tinsert(type, "seq", offsetof(CollectiveRow, seq), H5T_NATIVE_UINT64);
  H5Tinsert(type, "bytes", offsetof(CollectiveRow, bytes), H5T_NATIVE_UINT64);
  H5Tinsert(type, "first_participant", offsetof(CollectiveRow, first_participant), H5T_NATIVE_UINT64);
  H5Tinsert(type, "participant_count", offsetof(CollectiveRow, participant_count), H5T_NATIVE_UINT32);
  H5Tinsert(type, "name_id", offsetof(CollectiveRow, name_id), H5T_NATIVE_UINT32);
  H5Tinsert(type, "step", offsetof(CollectiveRow, step), H5T_NATIVE_INT32);
  H5Tinsert(type, "op", offsetof(CollectiveRow, op), op);
  H5Tinsert(type, "source", offsetof(CollectiveRow, source), H5T_NATIVE_UINT8);
  H5Tinsert(type, "nonblocking", offsetof(CollectiveRow, nonblocking), H5T_NATIVE_UINT8);
  H5Tinsert(type, "datatype", offsetof(CollectiveRow, datatype), datatype);
  H5Tinsert(type, "algorithm", offsetof(CollectiveRow, algorithm), algorithm);
  H5Tinsert(type, "protocol", offsetof(CollectiveRow, protocol), protocol);
  return type;
}

Handle participant_row_type() {
  Handle type(H5Tcreate(H5T_COMPOUND, sizeof(ParticipantRow)), H5Tclose);
  H5Tinsert(type, "rank", offsetof(ParticipantRow, rank), H5T_NATIVE_INT32);
  H5Tinsert(type, "enqueue_ns", offsetof(ParticipantRow, enqueue_ns), H5T_NATIVE_INT64);
  H5Tinsert(type, "arrival_ns", offsetof(ParticipantRow, arrival_ns), H5T_NATIVE_INT64);
  H5Tinsert(type, "start_ns", offsetof(ParticipantRow, start_ns), H5T_NATIVE_INT64);
  H5Tinsert(type, "end_ns", offsetof(ParticipantRow, end_ns), H5T_NATIVE_INT64);
  H5Tinsert(type, "wait_ns", offsetof(ParticipantRow, wait_ns), H5T_NATIVE_INT64);
  H5Tinsert(type, "exposed_wait_ns", offsetof(ParticipantRow, exposed_wait_ns), H5T_NATIVE_INT64);
  H5Tinsert(type, "exposed_transfer_ns", offsetof(ParticipantRow, exposed_transfer_ns), H5T_NATIVE_INT64);
  return type;
}

}  // namespace rankscope::schema
