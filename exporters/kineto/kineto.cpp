// torch.profiler (Kineto) traces, one file per rank, as PyTorch writes them,
// so that Holistic Trace Analysis and TraceLens read a rankscope timeline:
// GPU work on pid = device and tid = stream with its correlation id, CUDA
// calls with theirs and an "ac2g" flow to their work, host ranges as
// user_annotation, cpu_op or python_function (ProfilerStep#N among them,
// HTA's iterations), communication kernels with record_param_comms'
// arguments. Times are the timeline's (the ranks' clocks aligned), µs with
// three decimals. What maps to what, and what is left out: docs/export.md.
// The import (importers/kineto) reads these files back to the same events.
#include <algorithm>
#include <charconv>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "export_writers.h"
#include "json_text.h"
#include "rankscope/model/hash.h"
#include "rankscope/model/torch_types.h"
#include "rankscope/timeline/event_stream.h"

namespace rankscope::export_detail {
namespace {

constexpr size_t kWriteBytes = size_t{8} << 20;
// Host tracks that are no thread (communicators, NVTX domains, process
// groups) get a thread of their own from here on, far above any Linux tid:
// track id t has 2t, and a gloo worker for its collectives 2t + 1.
constexpr int64_t kTrackTidBase = 1'000'000'000;
// A rank whose pid is not known has one from here on: far above any Linux
// pid, and apart from the devices' pids (their ordinals).
constexpr int64_t kUnknownPidBase = 1'000'000'000;
// The import's instance numbers of collectives matched with no other rank's (kineto_align.cpp).
constexpr uint64_t kUnmatchedInstance = uint64_t{1} << 63;
// gloo's ranges of a collective's execution on its worker threads ("gloo:all_reduce").
constexpr std::string_view kGlooRange = "gloo:";

uint64_t events_of(const RankInfo& info, EventKind kind) {
  const auto k = static_cast<size_t>(kind) - 1;
  return k < info.events_by_kind.size() ? info.events_by_kind[k] : 0;
}

// PyTorch's names of a collective: record_param_comms' "Collective name"
// (ProcessGroupNCCL's, those TraceLens knows), and the record_function's
// "nccl:<name>".
std::string_view param_comms_name(CommOp op) {
  switch (op) {
    case CommOp::kAllReduce: return "allreduce";
    case CommOp::kAllGather: return "_allgather_base";
    case CommOp::kReduceScatter: return "_reduce_scatter_base";
    case CommOp::kBroadcast: return "broadcast";
    case CommOp::kReduce: return "reduce";
    case CommOp::kAllToAll: return "all_to_all";
    case CommOp::kGather: return "gather";
    case CommOp::kScatter: return "scatter";
    case CommOp::kBarrier: return "barrier";
    case CommOp::kScan: return "scan";
    case CommOp::kExscan: return "exscan";
    case CommOp::kSend: return "send";
    case CommOp::kRecv: return "recv";
    case CommOp::kSendRecv: return "sendrecv";
    case CommOp::kNone: break;
  }
  return "";
}
std::string_view record_function_name(CommOp op) {
  switch (op) {
    case CommOp::kAllReduce: return "all_reduce";
    case CommOp::kAllGather: return "all_gather";
    case CommOp::kReduceScatter: return "reduce_scatter";
    default: return param_comms_name(op);
  }
}
// c10d's op names, as its calls show in a trace ("c10d::allreduce_").
std::string_view c10d_name(CommOp op) {
  switch (op) {
    case CommOp::kAllReduce: return "c10d::allreduce_";
    case CommOp::kAllGather: return "c10d::_allgather_base_";
    case CommOp::kReduceScatter: return "c10d::_reduce_scatter_base_";
    case CommOp::kBroadcast: return "c10d::broadcast_";
    case CommOp::kReduce: return "c10d::reduce_";
    case CommOp::kAllToAll: return "c10d::alltoall_base_";
    case CommOp::kGather: return "c10d::gather_";
    case CommOp::kScatter: return "c10d::scatter_";
    case CommOp::kBarrier: return "c10d::barrier";
    default: return "c10d::collective";
  }
}

// A torch.distributed group, from its track's name as the Python hook and
// the import write it: "torch.distributed group NAME (DESCRIPTION, N ranks, BACKEND)".
struct ProcessGroupTrack {
  std::string name, description, backend;
  int64_t size = 0;
};

std::optional<ProcessGroupTrack> parse_process_group(const std::string& track_name, uint64_t hash) {
  constexpr std::string_view kPrefix = "torch.distributed group ";
  if (!track_name.starts_with(kPrefix) || track_name.back() != ')') return std::nullopt;
  const size_t open = track_name.find(" (", kPrefix.size());
  const size_t ranks = track_name.rfind(" ranks, ");
  if (open == std::string::npos || ranks == std::string::npos || ranks < open) return std::nullopt;
  ProcessGroupTrack group;
  group.name = track_name.substr(kPrefix.size(), open - kPrefix.size());
  if (process_group_hash(group.name) != hash) return std::nullopt;  // not the group its events name
  const size_t size_from = track_name.rfind(", ", ranks);
  if (size_from == std::string::npos || size_from < open) return std::nullopt;
  group.description = track_name.substr(open + 2, size_from - open - 2);
  const char* size_end = track_name.data() + ranks;
  if (std::from_chars(track_name.data() + size_from + 2, size_end, group.size).ptr != size_end) return std::nullopt;
  group.backend = track_name.substr(ranks + 8, track_name.size() - ranks - 9);
  return group;
}

class KinetoRankFile {
 public:
  KinetoRankFile(const Timeline& timeline, const Plan& plan, int32_t rank, OutputFolder& folder)
      : timeline_(timeline),
        plan_(plan),
        info_(timeline.ranks()[static_cast<size_t>(rank)]),
        out_(folder.file("rank-" + std::to_string(rank) + ".pt.trace.json"), false),
        host_pid_(info_.pid > 0 ? info_.pid : kUnknownPidBase + rank) {
    for (const Track& track : info_.tracks) {
      if (track.id >= tracks_.size()) tracks_.resize(track.id + size_t{1}, nullptr);
      tracks_[track.id] = &track;
      if (track.type == TrackType::kProcessGroup && !group_) group_ = parse_process_group(name_of(track), track.os_id);
    }
    imported_ = info_.launcher == "torch.profiler";
    buffer_.reserve(kWriteBytes + (1 << 16));
  }

  // Whether the rank has both CUDA calls and GPU work: then its launches are found first.
  static bool has_launches(const RankInfo& info) {
    uint64_t gpu = 0;
    for (const EventKind kind : {EventKind::kGpuKernel, EventKind::kGpuMemcpy, EventKind::kGpuMemset,
                                 EventKind::kGpuSync, EventKind::kNcclCollectiveGpu, EventKind::kNcclP2pGpu}) {
      gpu += events_of(info, kind);
    }
    return gpu > 0 && events_of(info, EventKind::kCudaApi) > 0;
  }

  // Which correlation ids have both a CUDA call and GPU work in the selection: those get a flow.
  void find_launches(EventStream& stream, Written& written) {
    std::unordered_set<uint64_t> calls, work;
    written.events_read += stream.stream(info_.rank, [&](const Event& e) {
      if (e.begin_ns > plan_.selection.end_ns) return false;
      if (!plan_.selection.contains(e)) return true;
      const uint64_t id = cuda_correlation(e);
      if (id == 0) return true;
      (e.kind == EventKind::kCudaApi ? calls : work).insert(id);
      return true;
    });
    for (const uint64_t id : calls) {
      if (work.contains(id)) launched_.insert(id);
    }
  }

  void write(EventStream& stream, const std::string& escaped_timeline, int64_t base_ns, Written& written) {
    header(escaped_timeline, base_ns);
    metadata();
    written.events_read += stream.stream(info_.rank, [&](const Event& e) {
      if (e.begin_ns > plan_.selection.end_ns) return false;
      if (plan_.selection.contains(e) && event(e, written.counts)) ++written.events_written;
      if (buffer_.size() >= kWriteBytes) {
        out_.submit(buffer_, buffer_.size());
        buffer_.clear();
      }
      return true;
    });
    write_unmatched(written.counts);
    buffer_ += "\n]}\n";
    out_.submit(buffer_, buffer_.size());
    buffer_.clear();
    out_.commit();
    ++written.counts.processes;
  }

 private:
  // {"schemaVersion":1,"rankscopeTimeline":"...": the bytes by which the
  // command knows an earlier export (coordinator/src/commands/outputs.cpp).
  void header(const std::string& escaped_timeline, int64_t base_ns) {
    buffer_ += "{\"schemaVersion\":1,\"rankscopeTimeline\":\"";
    buffer_ += escaped_timeline;
    buffer_ += "\",\n\"deviceProperties\":[";
    std::vector<int16_t> devices;
    for (const Track& track : info_.tracks) {
      if (track.device < 0 || std::find(devices.begin(), devices.end(), track.device) != devices.end()) continue;
      devices.push_back(track.device);
      buffer_ += devices.size() == 1 ? "{\"id\":" : ",{\"id\":";
      append_number(buffer_, track.device);
      buffer_ += '}';
    }
    // HTA finds a file's rank by the text "rank": N, with white space after the colon.
    buffer_ += "],\n\"distributedInfo\": {\"backend\": \"";
    append_escaped(buffer_, backend());
    buffer_ += "\", \"rank\": ";
    append_number(buffer_, info_.rank);
    buffer_ += ", \"world_size\": ";
    append_number(buffer_, timeline_.world_size());
    process_group_config();
    buffer_ += "},\n\"baseTimeNanoseconds\": ";
    append_number(buffer_, base_ns);
    if (!info_.host.empty()) {
      buffer_ += ",\n\"host_name\": \"";
      append_escaped(buffer_, info_.host);
      buffer_ += '"';
    }
    buffer_ += ",\n\"traceEvents\":[";
  }

  // The default group only: it is the one whose members the track's name tells (all ranks).
  void process_group_config() {
    if (!group_ || group_->size != timeline_.world_size()) return;
    buffer_ += ", \"pg_count\": 1, \"pg_config\": [{\"pg_name\": \"";
    append_escaped(buffer_, group_->name);
    buffer_ += "\", \"pg_desc\": \"";
    append_escaped(buffer_, group_->description);
    buffer_ += "\", \"backend_config\": \"";
    append_escaped(buffer_, group_->backend);
    buffer_ += "\", \"pg_size\": ";
    append_number(buffer_, group_->size);
    buffer_ += ", \"ranks\": [";
    for (int64_t r = 0; r < group_->size; ++r) {
      if (r > 0) buffer_ += ", ";
      append_number(buffer_, r);
    }
    buffer_ += "]}]";
  }

  // What PyTorch would call the rank's backend: by what its collectives ran on.
  std::string backend() const {
    const auto has = [&](EventKind kind) { return events_of(info_, kind) > 0; };
    if (has(EventKind::kNcclCollectiveGpu) || has(EventKind::kNcclCollectiveEnqueue) || has(EventKind::kNcclP2pGpu) ||
        has(EventKind::kNcclP2pEnqueue)) {
      return "nccl";
    }
    if (group_ && !group_->backend.empty()) return group_->backend;
    if (has(EventKind::kMpiCollective) || has(EventKind::kMpiP2p)) return "mpi";
    return "";
  }

  // Names of the rank's process, its threads, its devices and streams, and
  // of the host tracks that are no thread.
  void metadata() {
    name_metadata("process_name", host_pid_, 0, "rank " + std::to_string(info_.rank));
    std::vector<int16_t> devices;
    for (const Track& track : info_.tracks) {
      if (track.type == TrackType::kCudaStream) {
        if (std::find(devices.begin(), devices.end(), track.device) == devices.end()) {
          devices.push_back(track.device);
          name_metadata("process_name", device_pid(track), 0, "GPU " + std::to_string(track.device));
        }
        name_metadata("thread_name", device_pid(track), stream_of(track), name_of(track));
      } else if (track.type != TrackType::kCounter) {
        name_metadata("thread_name", host_pid_, host_tid(track), name_of(track));
      }
    }
  }

  void name_metadata(const char* what, int64_t pid, int64_t tid, const std::string& name) {
    begin_event("M", pid, tid);
    buffer_ += ",\"name\":\"";
    buffer_ += what;
    buffer_ += "\",\"ts\":0,\"args\":{\"name\":\"";
    append_escaped(buffer_, name);
    buffer_ += "\"}}";
  }

  // Writes the event; false for one left out: what the import of a
  // torch.profiler trace inferred, which it infers again from what is written
  // (gloo's collectives, the waits for them).
  bool event(const Event& e, ExportCounts& counts) {
    switch (e.kind) {
      case EventKind::kCounter: counter(e, counts); return true;
      case EventKind::kInstant:
      case EventKind::kNvtxMark: instant(e, counts); return true;
      case EventKind::kGpuKernel: gpu_work(e, "kernel", counts); return true;
      case EventKind::kGpuMemcpy: gpu_work(e, "gpu_memcpy", counts); return true;
      case EventKind::kGpuMemset: gpu_work(e, "gpu_memset", counts); return true;
      case EventKind::kGpuSync: gpu_work(e, "cuda_sync", counts); return true;
      case EventKind::kNcclCollectiveGpu:
      case EventKind::kNcclP2pGpu:
        if (e.seq & kUnmatchedInstance) {
          unmatched_.push_back(e);
        } else {
          gpu_work(e, "kernel", counts);
        }
        return true;
      case EventKind::kCudaApi: cuda_call(e, counts); return true;
      case EventKind::kTorchCollective: return torch_collective(e, counts);
      case EventKind::kTorchWait: return torch_wait(e, counts);
      default: host_range(e, counts); return true;
    }
  }

  // A communication kernel matched with no other rank's has, from the
  // import, an instance number that counts the rank's communication kernels
  // in the order of their file; the analyses take them in that order (DDP's
  // buckets). Written last, in that order, they are numbered alike when
  // imported again. Memory: the rank's unmatched collectives.
  void write_unmatched(ExportCounts& counts) {
    std::stable_sort(unmatched_.begin(), unmatched_.end(),
                     [](const Event& a, const Event& b) { return a.seq < b.seq; });
    for (const Event& e : unmatched_) gpu_work(e, "kernel", counts);
    unmatched_.clear();
  }

  void gpu_work(const Event& e, const char* category, ExportCounts& counts) {
    const Track* track = track_of(e);
    const int64_t pid = track ? device_pid(*track) : 0;
    const int64_t stream = track ? stream_of(*track) : -1;
    complete(e, category, pid, stream, gpu_name(e));
    buffer_ += ",\"args\":{\"device\":";
    append_number(buffer_, pid);
    buffer_ += ",\"stream\":";
    append_number(buffer_, stream);
    const uint64_t correlation = cuda_correlation(e);
    if (correlation != 0) {
      buffer_ += ",\"correlation\":";
      append_number(buffer_, correlation);
    }
    if ((e.kind == EventKind::kGpuMemcpy || e.kind == EventKind::kGpuMemset) && e.bytes != 0) {
      buffer_ += ",\"bytes\":";
      append_number(buffer_, e.bytes);
    }
    if (e.kind == EventKind::kNcclCollectiveGpu || e.kind == EventKind::kNcclP2pGpu) param_comms_arguments(e);
    buffer_ += "}}";
    ++counts.slices;
    if (correlation != 0 && launched_.contains(correlation)) {
      flow("f", pid, stream, e.begin_ns, correlation);
      ++counts.flows;
      ++counts.launch_flows;
    }
  }

  void cuda_call(const Event& e, ExportCounts& counts) {
    const int64_t tid = host_tid(e);
    const std::string& name = name_of(e);
    // The driver API's calls are "cu...", the runtime's "cuda...".
    const bool driver = name.starts_with("cu") && !name.starts_with("cuda");
    complete(e, driver ? "cuda_driver" : "cuda_runtime", host_pid_, tid, name);
    buffer_ += ",\"args\":{\"correlation\":";
    append_number(buffer_, e.correlation_id);
    buffer_ += "}}";
    ++counts.slices;
    if (launched_.contains(e.correlation_id)) flow("s", host_pid_, tid, e.begin_ns, e.correlation_id);
  }

  // A host range in torch.profiler's category for it; on a CUDA stream, the
  // GPU's span of a record_function range.
  void host_range(const Event& e, ExportCounts& counts) {
    const Track* track = track_of(e);
    if (track && track->type == TrackType::kCudaStream) {
      // Without a "stream" argument, as Kineto writes it: HTA takes what has one for the GPU's work.
      complete(e, "gpu_user_annotation", device_pid(*track), stream_of(*track), name_of(e));
      buffer_ += '}';
      ++counts.slices;
      return;
    }
    const std::string name = host_range_name(e);
    complete(e, host_category(e.kind, name), host_pid_, host_tid(e), name);
    if (e.kind == EventKind::kNvtxRange) {
      if (imported_ && name.starts_with(kGlooRange) && !unexecuted_.empty()) {
        // The execution the import pairs with the earliest call still unpaired, as it did before.
        const std::string shapes = shape_arguments(unexecuted_.front());
        unexecuted_.pop_front();
        if (!shapes.empty()) buffer_ += ",\"args\":{" + shapes + '}';
      }
      buffer_ += '}';
    } else {
      // Kineto has no category for MPI's calls or NCCL's enqueues: the kind says what it was.
      buffer_ += ",\"args\":{\"rankscope_kind\":\"";
      buffer_ += event_kind_name(e.kind);
      buffer_ += '"';
      param_comms_arguments(e);
      buffer_ += "}}";
    }
    ++counts.slices;
  }

  // The timeline keeps no category: torch's operators are named "ns::op"
  // (aten::mm, c10d::allreduce_, autograd::engine::...), Python frames
  // "file.py(line): function" or "<built-in ...>"; the rest are record_function's.
  static const char* host_category(EventKind kind, std::string_view name) {
    if (kind != EventKind::kNvtxRange) return "user_annotation";
    if (name.find("::") != std::string_view::npos) return "cpu_op";
    if (name.find(".py(") != std::string_view::npos || name.starts_with("<built-in")) return "python_function";
    return "user_annotation";
  }

  // NCCL's enqueue as PyTorch's record_function names it ("nccl:all_reduce");
  // MPI's calls and every other range under their own names.
  std::string host_range_name(const Event& e) const {
    const bool enqueue = e.kind == EventKind::kNcclCollectiveEnqueue || e.kind == EventKind::kNcclP2pEnqueue;
    if (enqueue && e.op != CommOp::kNone) {
      return "nccl:" + std::string(record_function_name(e.op));
    }
    return name_of(e);
  }

  // A torch.distributed collective as the import reads gloo's back: c10d's
  // call on the calling thread, from the arrival, and its execution, a
  // "gloo:<op>" range on a worker thread that ends at the completion. On
  // other backends the call alone, over the whole collective.
  //
  // A rank imported from torch.profiler still has the call and the range
  // the import made it of, written as host ranges: the collective is left
  // out, and its size, which the import took from the range's record_shapes,
  // goes back to that range, held until it comes (it begins after the
  // call). Memory: the collectives in flight.
  bool torch_collective(const Event& e, ExportCounts& counts) {
    if (imported_) {
      if (e.bytes != 0) unexecuted_.push_back(e);
      return false;
    }
    const std::string& name = name_of(e);
    const int64_t tid = host_tid(e);
    complete(e, "cpu_op", host_pid_, tid, name.starts_with("c10d::") ? name : std::string(c10d_name(e.op)));
    buffer_ += ",\"args\":{\"rankscope_kind\":\"torch_collective\"";
    param_comms_arguments(e);
    buffer_ += "}}";
    ++counts.slices;
    if (backend() != "gloo") return true;
    complete(e, "user_annotation", host_pid_, kTrackTidBase + 2 * int64_t{e.track} + 1,
             std::string(kGlooRange) + std::string(record_function_name(e.op)));
    buffer_ += ",\"args\":{\"rankscope_kind\":\"torch_collective\"";
    if (const std::string shapes = shape_arguments(e); !shapes.empty()) buffer_ += ',' + shapes;
    buffer_ += "}}";
    ++counts.slices;
    return true;
  }

  // record_shapes' arguments of a gloo range, as one flat tensor: the
  // input's elements (a gather's whole over the group's size) and C++ type.
  // Empty where the size or the type is not known.
  std::string shape_arguments(const Event& e) const {
    const std::string_view type = cpp_name(e.datatype);
    if (type.empty() || e.bytes == 0) return {};
    const bool gathered = e.op == CommOp::kAllGather || e.op == CommOp::kGather;
    const uint64_t ranks = gathered && group_ && group_->size > 0 ? static_cast<uint64_t>(group_->size) : 1;
    std::string out = "\"Input Dims\":[[";
    append_number(out, e.bytes / ranks / data_type_size(e.datatype));
    out += "]],\"Input type\":[\"";
    out += type;
    out += "\"]";
    return out;
  }

  bool torch_wait(const Event& e, ExportCounts& counts) {
    const std::string& name = name_of(e);
    if (name.ends_with(" (inferred)")) return false;
    complete(e, "cpu_op", host_pid_, host_tid(e), name);
    buffer_ += ",\"args\":{\"rankscope_kind\":\"torch_wait\"}}";
    ++counts.slices;
    return true;
  }

  void instant(const Event& e, ExportCounts& counts) {
    begin_event("i", host_pid_, host_tid(e));
    buffer_ += ",\"s\":\"t\",\"ts\":";
    append_microseconds(buffer_, e.begin_ns);
    buffer_ += ",\"cat\":\"user_annotation\",\"name\":\"";
    append_escaped(buffer_, name_of(e));
    buffer_ += '"';
    if (e.kind == EventKind::kNvtxMark) buffer_ += ",\"args\":{\"rankscope_kind\":\"nvtx_mark\"}";
    buffer_ += '}';
    ++counts.instants;
  }

  // The caching allocator's samples as Kineto writes them ([memory]
  // instants); any other counter as a "C" event whose name and key are its
  // track's name (the import names a counter "NAME KEY").
  void counter(const Event& e, ExportCounts& counts) {
    const Track* track = track_of(e);
    const std::string name = track ? name_of(*track) : std::string("counter");
    constexpr std::string_view kMemory = "memory allocated";
    if (name.starts_with(kMemory)) {
      begin_event("i", host_pid_, 0);
      buffer_ += ",\"s\":\"t\",\"ts\":";
      append_microseconds(buffer_, e.begin_ns);
      buffer_ += ",\"cat\":\"cpu_instant_event\",\"name\":\"[memory]\",\"args\":{\"Total Allocated\":";
      append_number(buffer_, e.bytes);
      // "memory allocated (device N)", as the import names it.
      constexpr std::string_view kDevice = " (device ";
      const size_t at = name.find(kDevice);
      const std::string device = at == std::string::npos ? "" : name.substr(at + kDevice.size());
      if (device.size() >= 2 && device.back() == ')' &&
          device.find_first_not_of("0123456789") == device.size() - 1) {
        buffer_ += ",\"Device Id\":";
        buffer_.append(device, 0, device.size() - 1);
      }
      buffer_ += "}}";
    } else {
      const size_t space = name.rfind(' ');
      const std::string_view whole(name);
      begin_event("C", host_pid_, 0);
      buffer_ += ",\"ts\":";
      append_microseconds(buffer_, e.begin_ns);
      buffer_ += ",\"name\":\"";
      append_escaped(buffer_, space == std::string::npos ? whole : whole.substr(0, space));
      buffer_ += "\",\"args\":{\"";
      append_escaped(buffer_, space == std::string::npos ? std::string_view("value") : whole.substr(space + 1));
      buffer_ += "\":";
      append_number(buffer_, e.bytes);
      buffer_ += "}}";
    }
    ++counts.counter_samples;
  }

  // record_param_comms' arguments, which the import matches ranks' collectives by.
  void param_comms_arguments(const Event& e) {
    if (e.op != CommOp::kNone) {
      buffer_ += ",\"Collective name\":\"";
      buffer_ += param_comms_name(e.op);
      buffer_ += '"';
    }
    if (e.comm_hash != 0) {
      // torch.distributed's group by its name; a communicator the timeline
      // names by its hash only (NCCL's, MPI's), by the hash: equal on every member.
      buffer_ += ",\"Process Group Name\":\"";
      if (group_ && e.comm_hash == process_group_hash(group_->name)) {
        append_escaped(buffer_, group_->name);
      } else {
        append_number(buffer_, e.comm_hash);
      }
      buffer_ += '"';
      // The instance every member's import numbered alike, so a new import matches them again.
      if (!(e.seq & kUnmatchedInstance)) {
        buffer_ += ",\"Seq\":";
        append_number(buffer_, e.seq);
      }
    }
    const std::string_view type = torch_name(e.datatype);
    if (!type.empty()) {
      buffer_ += ",\"dtype\":\"";
      buffer_ += type;
      buffer_ += '"';
      const uint64_t elements = e.bytes / data_type_size(e.datatype);
      buffer_ += ",\"In msg nelems\":";
      append_number(buffer_, elements);
      buffer_ += ",\"Out msg nelems\":";
      append_number(buffer_, elements);
    }
    if (e.peer != kNoPeer) {
      buffer_ += ",\"Peer\":";
      append_number(buffer_, e.peer);
    }
  }

  // A communication kernel keeps NCCL's name where it has one, which is how
  // HTA and TraceLens tell communication from computation.
  std::string gpu_name(const Event& e) const {
    const std::string& name = name_of(e);
    if ((e.kind != EventKind::kNcclCollectiveGpu && e.kind != EventKind::kNcclP2pGpu) || name.starts_with("nccl") ||
        name.find("ncclKernel") != std::string::npos) {
      return name;
    }
    std::string kernel = "ncclDevKernel_" + std::string(comm_op_name(e.op));
    if (e.algorithm != Algorithm::kNone) kernel += "_" + std::string(algorithm_name(e.algorithm));
    if (e.protocol != Protocol::kNone) kernel += "_" + std::string(protocol_name(e.protocol));
    return kernel + "(ncclDevKernelArgsStorage<4096ul>)";
  }

  uint64_t cuda_correlation(const Event& e) const {
    if (e.flags & kFlagExternalCorrelation) return 0;
    const bool nccl = e.kind >= EventKind::kNcclCollectiveEnqueue && e.kind <= EventKind::kNcclP2pGpu;
    // Kineto's correlation ids are CUDA's; the agent's NCCL events carry NCCL's own.
    if (nccl && !imported_) return 0;
    return e.kind == EventKind::kCudaApi || is_gpu_side(e.kind) ? e.correlation_id : 0;
  }

  void complete(const Event& e, const char* category, int64_t pid, int64_t tid, const std::string& name) {
    begin_event("X", pid, tid);
    buffer_ += ",\"ts\":";
    append_microseconds(buffer_, e.begin_ns);
    buffer_ += ",\"dur\":";
    append_microseconds(buffer_, std::max<int64_t>(0, e.end_ns - e.begin_ns));
    buffer_ += ",\"cat\":\"";
    buffer_ += category;
    buffer_ += "\",\"name\":\"";
    append_escaped(buffer_, name);
    buffer_ += '"';
  }

  // Right after the event it binds to, at its begin, as Kineto writes them.
  void flow(const char* phase, int64_t pid, int64_t tid, int64_t ts, uint64_t id) {
    begin_event(phase, pid, tid);
    buffer_ += ",\"ts\":";
    append_microseconds(buffer_, ts);
    buffer_ += ",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":";
    append_number(buffer_, id);
    if (phase[0] == 'f') buffer_ += ",\"bp\":\"e\"";
    buffer_ += '}';
  }

  // One event per line: {"ph":..,"pid":..,"tid":.. — the caller adds the rest and the closing brace.
  void begin_event(const char* phase, int64_t pid, int64_t tid) {
    buffer_ += first_ ? "\n{\"ph\":\"" : ",\n{\"ph\":\"";
    first_ = false;
    buffer_ += phase;
    buffer_ += "\",\"pid\":";
    append_number(buffer_, pid);
    buffer_ += ",\"tid\":";
    append_number(buffer_, tid);
  }

  const Track* track_of(const Event& e) const { return e.track < tracks_.size() ? tracks_[e.track] : nullptr; }
  std::string name_of(const Track& track) const {
    return track.name_id < timeline_.strings().size() ? timeline_.string(track.name_id) : std::string();
  }
  const std::string& name_of(const Event& e) const {
    static const std::string kUnnamed = "(unnamed)";
    return e.name_id < timeline_.strings().size() ? timeline_.string(e.name_id) : kUnnamed;
  }
  static int64_t device_pid(const Track& track) { return track.device < 0 ? 0 : track.device; }
  // A device-wide operation's stream (os_id 2^64 - 1) is Kineto's -1.
  static int64_t stream_of(const Track& track) { return static_cast<int64_t>(track.os_id); }
  int64_t host_tid(const Track& track) const {
    return track.type == TrackType::kThread ? static_cast<int64_t>(track.os_id) : kTrackTidBase + 2 * int64_t{track.id};
  }
  int64_t host_tid(const Event& e) const {
    const Track* track = track_of(e);
    return track ? host_tid(*track) : kTrackTidBase + 2 * int64_t{e.track};
  }

  const Timeline& timeline_;
  const Plan& plan_;
  const RankInfo& info_;
  OutputFile out_;
  const int64_t host_pid_;
  std::vector<const Track*> tracks_;  // by track id
  std::optional<ProcessGroupTrack> group_;
  bool imported_ = false;  // from torch.profiler traces (import-kineto)
  std::unordered_set<uint64_t> launched_;  // correlation ids with both sides written
  std::vector<Event> unmatched_;           // held until the rank's other events are written
  std::deque<Event> unexecuted_;           // imported gloo collectives whose range is still to come
  std::string buffer_;
  bool first_ = true;
};

// Kineto's baseTimeNanoseconds: what to add to a time of the timeline's clock
// for the wall clock, as the first rank's start says.
int64_t base_time_ns(const Timeline& timeline) {
  for (const RankInfo& info : timeline.ranks()) {
    if (info.status != RankStatus::kMissing && info.start_wall_ns > info.first_ns) {
      return info.start_wall_ns - info.first_ns;
    }
  }
  return 0;
}

}  // namespace

Written write_kineto(const Timeline& timeline, const Plan& plan, OutputFolder& out) {
  std::vector<int32_t> reads;
  for (const RankPlan& rank : plan.ranks) {
    if (KinetoRankFile::has_launches(timeline.ranks()[static_cast<size_t>(rank.rank)])) reads.push_back(rank.rank);
    reads.push_back(rank.rank);
  }
  std::string escaped_timeline;
  append_escaped(escaped_timeline, timeline.path());
  const int64_t base_ns = base_time_ns(timeline);
  Written written;
  EventStream stream(timeline, std::move(reads));
  for (const RankPlan& rank : plan.ranks) {
    KinetoRankFile file(timeline, plan, rank.rank, out);
    if (KinetoRankFile::has_launches(timeline.ranks()[static_cast<size_t>(rank.rank)])) {
      file.find_launches(stream, written);
    }
    file.write(stream, escaped_timeline, base_ns, written);
  }
  return written;
}

}  // namespace rankscope::export_detail
