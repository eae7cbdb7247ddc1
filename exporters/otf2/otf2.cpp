// OTF2 archives, for Vampir and Scalasca: a location group per rank (and
// one per rank's GPU work), a location per lane of the walk (a host
// thread's first lane, the lanes its overlapping events spill into, each
// stream's and communicator's lanes), a region per event name and kind,
// Enter/Leave per slice, MPI message and collective records with the
// communicators they name, timestamps on the timeline's clock. Layout and
// what is left out: docs/export.md, "OTF2 archives".
#include <algorithm>
#include <cstdio>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "export_walk.h"
#include "export_writers.h"
#include "otf2_archive.h"
#include "otf2_mpi.h"

namespace rankscope::export_detail {
namespace {

constexpr const char* kArchiveName = "traces";  // DIR/traces.otf2, DIR/traces.def, DIR/traces/

OTF2_Paradigm paradigm_of(EventKind kind) {
  switch (kind) {
    case EventKind::kMpiCall: case EventKind::kMpiCollective: case EventKind::kMpiP2p:
      return OTF2_PARADIGM_MPI;
    // NCCL is CUDA's communication library: its enqueues are host calls into it, its operations GPU work.
    case EventKind::kCudaApi: case EventKind::kGpuKernel: case EventKind::kGpuMemcpy: case EventKind::kGpuMemset:
    case EventKind::kGpuSync: case EventKind::kNcclCollectiveEnqueue: case EventKind::kNcclCollectiveGpu:
    case EventKind::kNcclP2pEnqueue: case EventKind::kNcclP2pGpu:
      return OTF2_PARADIGM_CUDA;
    default:
      return OTF2_PARADIGM_USER;
  }
}

OTF2_RegionRole collective_role(CommOp op) {
  switch (op) {
    case CommOp::kBarrier: return OTF2_REGION_ROLE_BARRIER;
    case CommOp::kBroadcast: case CommOp::kScatter: return OTF2_REGION_ROLE_COLL_ONE2ALL;
    case CommOp::kReduce: case CommOp::kGather: return OTF2_REGION_ROLE_COLL_ALL2ONE;
    case CommOp::kAllReduce: case CommOp::kAllGather: case CommOp::kReduceScatter: case CommOp::kAllToAll:
      return OTF2_REGION_ROLE_COLL_ALL2ALL;
    default: return OTF2_REGION_ROLE_COLL_OTHER;
  }
}

OTF2_RegionRole role_of(EventKind kind, CommOp op, bool instant) {
  if (instant) return OTF2_REGION_ROLE_ARTIFICIAL;  // a mark written as a region of no duration
  switch (kind) {
    case EventKind::kMpiCollective: case EventKind::kNcclCollectiveEnqueue: case EventKind::kNcclCollectiveGpu:
    case EventKind::kTorchCollective:
      return collective_role(op);
    case EventKind::kMpiP2p: case EventKind::kNcclP2pEnqueue: case EventKind::kNcclP2pGpu:
      return OTF2_REGION_ROLE_POINT2POINT;
    case EventKind::kGpuMemcpy: return OTF2_REGION_ROLE_DATA_TRANSFER;
    case EventKind::kGpuSync: case EventKind::kTorchWait: return OTF2_REGION_ROLE_TASK_WAIT;
    default: return OTF2_REGION_ROLE_FUNCTION;
  }
}

// OTF2_UNDEFINED_TYPE where OTF2 has no collective of the operation.
OTF2_CollectiveOp collective_op(CommOp op) {
  switch (op) {
    case CommOp::kAllReduce: return OTF2_COLLECTIVE_OP_ALLREDUCE;
    case CommOp::kAllGather: return OTF2_COLLECTIVE_OP_ALLGATHER;
    case CommOp::kReduceScatter: return OTF2_COLLECTIVE_OP_REDUCE_SCATTER;
    case CommOp::kBroadcast: return OTF2_COLLECTIVE_OP_BCAST;
    case CommOp::kReduce: return OTF2_COLLECTIVE_OP_REDUCE;
    case CommOp::kAllToAll: return OTF2_COLLECTIVE_OP_ALLTOALL;
    case CommOp::kGather: return OTF2_COLLECTIVE_OP_GATHER;
    case CommOp::kScatter: return OTF2_COLLECTIVE_OP_SCATTER;
    case CommOp::kBarrier: return OTF2_COLLECTIVE_OP_BARRIER;
    case CommOp::kScan: return OTF2_COLLECTIVE_OP_SCAN;
    case CommOp::kExscan: return OTF2_COLLECTIVE_OP_EXSCAN;
    default: return OTF2_UNDEFINED_TYPE;
  }
}

bool is_rooted(CommOp op) {
  return op == CommOp::kBroadcast || op == CommOp::kReduce || op == CommOp::kGather || op == CommOp::kScatter;
}

// What a slice's Leave is preceded by: the record of what completed there.
enum class EndRecord : uint8_t { kNone, kRecv, kIrecv, kIsendComplete, kCollectiveEnd };

struct OpenSlice {
  OTF2_RegionRef region;
  EndRecord record = EndRecord::kNone;
  OTF2_CollectiveOp op = OTF2_UNDEFINED_TYPE;
  uint32_t communicator = 0;
  uint32_t peer = 0;  // the sender (receives) or root (collectives), within the communicator
  uint32_t tag = 0;
  uint64_t bytes_sent = 0, bytes_received = 0;
  uint64_t request = 0;
};

struct LocationDef {
  OTF2_StringRef name;
  uint32_t rank_position;  // in the plan's ranks: the archive's MPI rank
  bool thread = false;     // a host thread's first lane
  bool accelerator = false;
  bool has_mpi = false;    // holds MPI records
  uint64_t records = 0;
};

struct LiveLocation {  // a location of the rank being written
  OTF2_LocationRef id;
  OTF2_EvtWriter* writer;
  bool overlap = false;  // a host thread's extra lane
  std::vector<OpenSlice> open;
  uint64_t next_request = 1;
};

struct RegionDef {
  OTF2_StringRef name;
  OTF2_RegionRole role;
  OTF2_Paradigm paradigm;
};

struct RankDef {
  int32_t rank;
  OTF2_SystemTreeNodeRef node;
  OTF2_StringRef name;
};

// Counted and stored as archive properties (docs/export.md).
struct Otf2Notes {
  uint64_t overlap_lanes = 0, overlap_slices = 0, incomplete = 0, messages = 0, messages_left_out = 0,
           collectives = 0, collectives_left_out = 0;
};

class Otf2Sink {
 public:
  Otf2Sink(const Timeline& timeline, const MpiLayout& mpi, Otf2Archive& archive)
      : timeline_(timeline), mpi_(mpi), archive_(archive) {}

  void begin_rank(const RankOut& rank) {
    close_rank();
    const std::string& host = timeline_.ranks()[static_cast<size_t>(rank.rank)].host;
    const auto [node, added] = hosts_.try_emplace(host.empty() ? "unknown host" : host, 0);
    if (added) node->second = static_cast<OTF2_SystemTreeNodeRef>(hosts_.size());  // 0 is the job's node
    ranks_.push_back({rank.rank, node->second, add_string("rank " + std::to_string(rank.rank))});
  }

  void declare_lane(const RankOut&, const LaneOut& lane, int64_t) {
    const auto id = static_cast<OTF2_LocationRef>(locations_.size());
    const std::string name = lane.lane == 0 ? lane.name : lane.name + " (lane " + std::to_string(lane.lane + 1) + ")";
    locations_.push_back({add_string(name), static_cast<uint32_t>(ranks_.size() - 1), lane.thread});
    LiveLocation live{id, archive_.open_events(id), lane.of_thread && lane.lane > 0, {}, 1};
    notes_.overlap_lanes += live.overlap ? 1 : 0;
    live_.emplace(lane.uuid, std::move(live));
  }

  // Counters are left out (docs/export.md): OTF2 holds them as metrics, with definitions of their own.
  void declare_counter(const RankOut&, const CounterOut&, int64_t) {}
  void counter(const RankOut&, const CounterOut&, int64_t, int64_t) {}

  void slice(const RankOut& rank, const LaneOut& lane, const Event& e, std::span<const FlowEnd>) {
    LiveLocation& live = live_.at(lane.uuid);
    LocationDef& def = locations_[live.id];
    def.accelerator |= !lane.of_thread && is_gpu_side(e.kind);
    notes_.overlap_slices += live.overlap ? 1 : 0;
    OpenSlice open{region(e, false)};
    enter(live, e.begin_ns, open.region);
    if ((e.flags & kFlagIncomplete) != 0) {
      ++notes_.incomplete;  // the operation never completed: no record says it did
    } else if (e.kind == EventKind::kMpiCollective) {
      collective_begin(live, e, open);
    } else if (e.kind == EventKind::kMpiP2p && (e.op == CommOp::kSend || e.op == CommOp::kRecv)) {
      message_begin(live, rank.rank, !lane.of_thread, e, open);
    }
    live.open.push_back(open);
    ++events_written_;
  }

  void slice_end(const RankOut&, const LaneOut& lane, int64_t end_ns) {
    LiveLocation& live = live_.at(lane.uuid);
    const OpenSlice open = live.open.back();
    live.open.pop_back();
    end_record(live, end_ns, open);
    leave(live, end_ns, open.region);
  }

  // Written as a region entered and left at the same time, on the lane's first location.
  void instant(const RankOut&, const LaneOut& lane, const Event& e) {
    LiveLocation& live = live_.at(lane.uuid);
    const OTF2_RegionRef instant_region = region(e, true);
    enter(live, e.begin_ns, instant_region);
    leave(live, e.begin_ns, instant_region);
    ++events_written_;
  }

  // Closes the last rank, writes the definitions and properties, closes the archive.
  void finish(const Plan& plan) {
    close_rank();
    write_definitions();
    int64_t bound_ns = 0;
    for (const RankPlan& rank : plan.ranks) {
      bound_ns = std::max(bound_ns, timeline_.ranks()[static_cast<size_t>(rank.rank)].clock.bound_ns);
    }
    archive_.set_property("RANKSCOPE::CLOCK_BOUND_NS", std::to_string(bound_ns));
    archive_.set_property("RANKSCOPE::CLOCK_CORRECTED", timeline_.clock_corrected());
    archive_.set_property("RANKSCOPE::OVERLAP_LANES", std::to_string(notes_.overlap_lanes));
    archive_.set_property("RANKSCOPE::OVERLAP_SLICES", std::to_string(notes_.overlap_slices));
    archive_.set_property("RANKSCOPE::INCOMPLETE_EVENTS", std::to_string(notes_.incomplete));
    archive_.set_property("RANKSCOPE::MESSAGES", std::to_string(notes_.messages));
    archive_.set_property("RANKSCOPE::MESSAGES_LEFT_OUT", std::to_string(notes_.messages_left_out));
    archive_.set_property("RANKSCOPE::COLLECTIVES", std::to_string(notes_.collectives));
    archive_.set_property("RANKSCOPE::COLLECTIVES_LEFT_OUT", std::to_string(notes_.collectives_left_out));
    archive_.close();
  }

  uint64_t events_written() const { return events_written_; }

 private:
  OTF2_StringRef add_string(std::string text) {
    strings_.push_back(std::move(text));
    return static_cast<OTF2_StringRef>(strings_.size() - 1);
  }

  OTF2_StringRef name_string(uint32_t name_id) {
    const auto [found, added] = name_strings_.try_emplace(name_id, 0);
    if (!added) return found->second;
    found->second = add_string(name_id < timeline_.strings().size() ? timeline_.string(name_id) : "(unnamed)");
    return found->second;
  }

  // One region per name and kind (an instant's region is apart from a slice's of the same name).
  OTF2_RegionRef region(const Event& e, bool instant) {
    const uint64_t key = uint64_t{e.name_id} << 16 | uint64_t{static_cast<uint8_t>(e.kind)} << 1 | (instant ? 1 : 0);
    const auto [found, added] = regions_by_key_.try_emplace(key, static_cast<OTF2_RegionRef>(regions_.size()));
    if (added) regions_.push_back({name_string(e.name_id), role_of(e.kind, e.op, instant), paradigm_of(e.kind)});
    return found->second;
  }

  void enter(LiveLocation& live, int64_t ns, OTF2_RegionRef region) {
    archive_.check(OTF2_EvtWriter_Enter(live.writer, nullptr, timestamp(ns), region), "write an Enter record");
    ++locations_[live.id].records;
  }
  void leave(LiveLocation& live, int64_t ns, OTF2_RegionRef region) {
    archive_.check(OTF2_EvtWriter_Leave(live.writer, nullptr, timestamp(ns), region), "write a Leave record");
    ++locations_[live.id].records;
  }

  OTF2_TimeStamp timestamp(int64_t ns) {  // never negative: write_otf2 refused those ranks
    first_ns_ = std::min(first_ns_, ns);
    last_ns_ = std::max(last_ns_, ns);
    return static_cast<OTF2_TimeStamp>(ns);
  }

  void mpi_record(LiveLocation& live, OTF2_ErrorCode code, const char* doing) {
    archive_.check(code, doing);
    LocationDef& def = locations_[live.id];
    ++def.records;
    def.has_mpi = true;
  }

  // MpiCollectiveBegin now, MpiCollectiveEnd at the slice's end, when OTF2
  // knows the operation and the communicator is known.
  void collective_begin(LiveLocation& live, const Event& e, OpenSlice& open) {
    const uint32_t communicator = mpi_.communicator(e.comm_hash);
    const OTF2_CollectiveOp op = collective_op(e.op);
    if (communicator == kNoRank || op == OTF2_UNDEFINED_TYPE) {
      ++notes_.collectives_left_out;
      return;
    }
    const uint32_t root = is_rooted(e.op) ? mpi_.rank_in(communicator, e.peer) : kNoRank;
    open.record = EndRecord::kCollectiveEnd;
    open.op = op;
    open.communicator = communicator;
    open.peer = root == kNoRank ? OTF2_UNDEFINED_UINT32 : root;
    const bool is_root = root != kNoRank && e.peer == ranks_.back().rank;
    const bool one_to_all = e.op == CommOp::kBroadcast || e.op == CommOp::kScatter;
    const bool all_to_one = e.op == CommOp::kReduce || e.op == CommOp::kGather;
    // The root of a one-to-all only sends, of an all-to-one only receives; a barrier moves nothing.
    const bool sends = e.op != CommOp::kBarrier && !(is_root ? all_to_one : one_to_all);
    const bool receives = e.op != CommOp::kBarrier && !(is_root ? one_to_all : all_to_one);
    open.bytes_sent = sends ? e.bytes : 0;
    open.bytes_received = receives ? e.bytes : 0;
    mpi_record(live, OTF2_EvtWriter_MpiCollectiveBegin(live.writer, nullptr, timestamp(e.begin_ns)),
               "write an MpiCollectiveBegin record");
    ++notes_.collectives;
  }

  // A send's record at its begin; a receive's at its end, when the message
  // arrived. An operation on a communicator's track (not the thread's) is
  // nonblocking: Isend and its completion, Irecv's request and the Irecv.
  void message_begin(LiveLocation& live, int32_t rank, bool nonblocking, const Event& e, OpenSlice& open) {
    const uint32_t communicator = mpi_.communicator(e.comm_hash);
    const uint32_t peer = communicator == kNoRank ? kNoRank : mpi_.rank_in(communicator, e.peer);
    if (peer == kNoRank || !mpi_.message_matched(e, rank)) {
      ++notes_.messages_left_out;
      return;
    }
    ++notes_.messages;
    const auto ts = timestamp(e.begin_ns);
    const auto tag = static_cast<uint32_t>(e.correlation_id);
    if (e.op == CommOp::kSend && !nonblocking) {
      mpi_record(live, OTF2_EvtWriter_MpiSend(live.writer, nullptr, ts, peer, communicator, tag, e.bytes),
                 "write an MpiSend record");
      return;
    }
    open.communicator = communicator;
    open.peer = peer;
    open.tag = tag;
    open.bytes_received = e.bytes;
    if (!nonblocking) {
      open.record = EndRecord::kRecv;
      return;
    }
    open.request = live.next_request++;
    if (e.op == CommOp::kSend) {
      open.record = EndRecord::kIsendComplete;
      mpi_record(live,
                 OTF2_EvtWriter_MpiIsend(live.writer, nullptr, ts, peer, communicator, tag, e.bytes, open.request),
                 "write an MpiIsend record");
    } else {
      open.record = EndRecord::kIrecv;
      mpi_record(live, OTF2_EvtWriter_MpiIrecvRequest(live.writer, nullptr, ts, open.request),
                 "write an MpiIrecvRequest record");
    }
  }

  void end_record(LiveLocation& live, int64_t end_ns, const OpenSlice& open) {
    const auto ts = timestamp(end_ns);
    switch (open.record) {
      case EndRecord::kNone: return;
      case EndRecord::kRecv:
        return mpi_record(live, OTF2_EvtWriter_MpiRecv(live.writer, nullptr, ts, open.peer, open.communicator, open.tag,
                                                       open.bytes_received),
                          "write an MpiRecv record");
      case EndRecord::kIrecv:
        return mpi_record(live,
                          OTF2_EvtWriter_MpiIrecv(live.writer, nullptr, ts, open.peer, open.communicator, open.tag,
                                                  open.bytes_received, open.request),
                          "write an MpiIrecv record");
      case EndRecord::kIsendComplete:
        return mpi_record(live, OTF2_EvtWriter_MpiIsendComplete(live.writer, nullptr, ts, open.request),
                          "write an MpiIsendComplete record");
      case EndRecord::kCollectiveEnd:
        return mpi_record(live, OTF2_EvtWriter_MpiCollectiveEnd(live.writer, nullptr, ts, open.op, open.communicator,
                                                                open.peer, open.bytes_sent, open.bytes_received),
                          "write an MpiCollectiveEnd record");
    }
  }

  // The rank's locations are written out and their buffers freed: memory
  // holds one rank's locations at a time.
  void close_rank() {
    for (auto& [uuid, live] : live_) archive_.close_events(live.id, live.writer);
    live_.clear();
  }

  void write_definitions() {
    OTF2_GlobalDefWriter* defs = archive_.global_definitions();
    const bool any = first_ns_ <= last_ns_;
    archive_.check(OTF2_GlobalDefWriter_WriteClockProperties(
                       defs, 1'000'000'000, any ? static_cast<uint64_t>(first_ns_) : 0,
                       any ? static_cast<uint64_t>(last_ns_ - first_ns_) : 0, OTF2_UNDEFINED_TIMESTAMP),
                   "write the clock properties");
    const OTF2_StringRef job = add_string("rankscope job"), machine = add_string("machine"), node = add_string("node");
    const OTF2_StringRef comm_locations = add_string("MPI ranks");
    std::vector<OTF2_StringRef> comm_names;
    for (const uint64_t hash : mpi_.communicator_hashes()) comm_names.push_back(add_string(communicator_name(hash)));
    for (const RankDef& rank : ranks_) {
      accelerator_names_.push_back(add_string("rank " + std::to_string(rank.rank) + " GPU"));
    }
    std::vector<OTF2_StringRef> host_names(hosts_.size() + 1);
    for (const auto& [host, ref] : hosts_) host_names[ref] = add_string(host);
    for (size_t i = 0; i < strings_.size(); ++i) {
      archive_.check(OTF2_GlobalDefWriter_WriteString(defs, static_cast<OTF2_StringRef>(i), strings_[i].c_str()),
                     "write the strings");
    }
    archive_.check(OTF2_GlobalDefWriter_WriteSystemTreeNode(defs, 0, job, machine, OTF2_UNDEFINED_SYSTEM_TREE_NODE),
                   "write the system tree");
    for (OTF2_SystemTreeNodeRef ref = 1; ref < host_names.size(); ++ref) {
      archive_.check(OTF2_GlobalDefWriter_WriteSystemTreeNode(defs, ref, host_names[ref], node, 0),
                     "write the system tree");
    }
    write_locations(defs);
    write_regions(defs);
    write_communicators(defs, comm_locations, comm_names);
  }

  static std::string communicator_name(uint64_t hash) {
    char text[32];
    std::snprintf(text, sizeof(text), "comm 0x%016llx", static_cast<unsigned long long>(hash));
    return text;
  }

  // A process group per rank, numbered as its MPI rank in the archive; then,
  // for each rank with GPU streams, an accelerator group holding them.
  void write_locations(OTF2_GlobalDefWriter* defs) {
    const auto ranks = static_cast<uint32_t>(ranks_.size());
    for (uint32_t i = 0; i < ranks; ++i) {
      archive_.check(OTF2_GlobalDefWriter_WriteLocationGroup(defs, i, ranks_[i].name, OTF2_LOCATION_GROUP_TYPE_PROCESS,
                                                             ranks_[i].node, OTF2_UNDEFINED_LOCATION_GROUP),
                     "write the location groups");
    }
    std::vector<OTF2_LocationGroupRef> accelerator_group(ranks, OTF2_UNDEFINED_LOCATION_GROUP);
    OTF2_LocationGroupRef next_group = ranks;
    for (const LocationDef& location : locations_) {
      const uint32_t i = location.rank_position;
      if (!location.accelerator || accelerator_group[i] != OTF2_UNDEFINED_LOCATION_GROUP) continue;
      accelerator_group[i] = next_group++;
      archive_.check(OTF2_GlobalDefWriter_WriteLocationGroup(defs, accelerator_group[i], accelerator_names_[i],
                                                             OTF2_LOCATION_GROUP_TYPE_ACCELERATOR, ranks_[i].node, i),
                     "write the location groups");
    }
    for (size_t id = 0; id < locations_.size(); ++id) {
      const LocationDef& location = locations_[id];
      archive_.check(OTF2_GlobalDefWriter_WriteLocation(
                         defs, id, location.name,
                         location.accelerator ? OTF2_LOCATION_TYPE_ACCELERATOR_STREAM : OTF2_LOCATION_TYPE_CPU_THREAD,
                         location.records,
                         location.accelerator ? accelerator_group[location.rank_position] : location.rank_position),
                     "write the locations");
    }
  }

  void write_regions(OTF2_GlobalDefWriter* defs) {
    for (size_t id = 0; id < regions_.size(); ++id) {
      const RegionDef& r = regions_[id];
      archive_.check(OTF2_GlobalDefWriter_WriteRegion(defs, static_cast<OTF2_RegionRef>(id), r.name, r.name,
                                                      OTF2_UNDEFINED_STRING, r.role, r.paradigm, OTF2_REGION_FLAG_NONE,
                                                      OTF2_UNDEFINED_STRING, 0, 0),
                     "write the regions");
    }
  }

  // MPI's ranks (group 0: the location of each rank's MPI calls, by MPI
  // rank), then per communicator its members as MPI ranks, and the communicator.
  void write_communicators(OTF2_GlobalDefWriter* defs, OTF2_StringRef comm_locations,
                           const std::vector<OTF2_StringRef>& comm_names) {
    if (mpi_.communicator_hashes().empty()) return;
    archive_.check(OTF2_GlobalDefWriter_WriteGroup(defs, 0, comm_locations, OTF2_GROUP_TYPE_COMM_LOCATIONS,
                                                   OTF2_PARADIGM_MPI, OTF2_GROUP_FLAG_NONE,
                                                   static_cast<uint32_t>(ranks_.size()), mpi_locations().data()),
                   "write the MPI ranks");
    for (uint32_t c = 0; c < comm_names.size(); ++c) {
      const std::vector<uint64_t> members(mpi_.members()[c].begin(), mpi_.members()[c].end());
      archive_.check(OTF2_GlobalDefWriter_WriteGroup(defs, c + 1, comm_names[c], OTF2_GROUP_TYPE_COMM_GROUP,
                                                     OTF2_PARADIGM_MPI, OTF2_GROUP_FLAG_NONE,
                                                     static_cast<uint32_t>(members.size()), members.data()),
                     "write the communicators' groups");
      archive_.check(OTF2_GlobalDefWriter_WriteComm(defs, c, comm_names[c], c + 1, OTF2_UNDEFINED_COMM,
                                                    OTF2_COMM_FLAG_NONE),
                     "write the communicators");
    }
  }

  // Per rank, the location that speaks for it in MPI: its first host thread
  // with MPI records, else its first host thread, else its first location.
  std::vector<uint64_t> mpi_locations() const {
    std::vector<uint64_t> chosen(ranks_.size(), OTF2_UNDEFINED_LOCATION);
    std::vector<int> score(ranks_.size(), 0);
    for (size_t id = 0; id < locations_.size(); ++id) {
      const LocationDef& location = locations_[id];
      const int this_score = location.thread ? (location.has_mpi ? 3 : 2) : 1;
      if (this_score > score[location.rank_position]) {
        score[location.rank_position] = this_score;
        chosen[location.rank_position] = id;
      }
    }
    return chosen;
  }

  const Timeline& timeline_;
  const MpiLayout& mpi_;
  Otf2Archive& archive_;
  std::vector<std::string> strings_;
  std::unordered_map<uint32_t, OTF2_StringRef> name_strings_;  // job string id -> OTF2 string
  std::unordered_map<uint64_t, OTF2_RegionRef> regions_by_key_;
  std::vector<RegionDef> regions_;
  std::unordered_map<std::string, OTF2_SystemTreeNodeRef> hosts_;
  std::vector<RankDef> ranks_;  // written, in order: position = MPI rank in the archive
  std::vector<OTF2_StringRef> accelerator_names_;
  std::vector<LocationDef> locations_;  // by location id
  std::unordered_map<uint64_t, LiveLocation> live_;  // the rank's locations, by lane uuid
  int64_t first_ns_ = INT64_MAX, last_ns_ = INT64_MIN;
  uint64_t events_written_ = 0;
  Otf2Notes notes_;
};

}  // namespace

Written write_otf2(const Timeline& timeline, const Plan& plan, OutputFolder& out) {
  require_times_from_zero(timeline, plan, "OTF2");
  const MpiLayout mpi(timeline, plan);
  Otf2Archive archive(out.partial(), kArchiveName, out.path());
  Otf2Sink sink(timeline, mpi, archive);
  TraceWalker<Otf2Sink> walker(timeline, plan, sink);
  walker.run();
  sink.finish(plan);
  Written written{walker.counts(), mpi.events_read() + walker.events_read(), sink.events_written()};
  // Neither counters nor flows are in the archive (docs/export.md); messages are its links.
  written.counts.counter_tracks = written.counts.counter_samples = 0;
  written.counts.flows = written.counts.collective_flows = written.counts.launch_flows = 0;
  return written;
}

}  // namespace rankscope::export_detail
