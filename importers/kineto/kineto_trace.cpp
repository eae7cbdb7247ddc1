#include "kineto_trace.h"

#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <queue>
#include <set>
#include <string_view>
#include <unordered_map>

#include "rankscope/model/error.h"
#include "rankscope/model/hash.h"
#include "rankscope/model/shard.h"
#include "rankscope/model/steps.h"
#include "rankscope/model/text.h"
#include "rankscope/model/torch_types.h"

namespace rankscope::kineto {
namespace {

namespace od = simdjson::ondemand;

// Events a track collects before they go to the shard as one sorted chunk.
constexpr size_t kTrackChunkEvents = 8192;

// A thread blocked on c10d work runs its next op soon after the work
// completes: mostly 8 µs to 0.7 ms in DDP's and FSDP's waits on two ranks
// sharing two cores, but up to 9 ms where a third busy thread shares them
// and the woken thread waits for its turn. A thread that ran Python
// meanwhile resumes at no particular moment, so a later resumption is not
// taken for a wait.
constexpr int64_t kMaxResumeNs = 10'000'000;
// Silences shorter than this are the profiler's own gaps between ops.
constexpr int64_t kMinWaitNs = 10'000;

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n' || text.back() == '\r' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

enum class IdStatus { kAbsent, kOk, kOutOfRange };

// An id as Kineto writes it: a non-negative integer, or its decimal string.
IdStatus parse_id(std::string_view token, uint64_t& out, bool full_range = false) {
  token = trim(token);
  if (token.size() >= 2 && token.front() == '"' && token.back() == '"') token = token.substr(1, token.size() - 2);
  if (token.empty()) return IdStatus::kAbsent;
  uint64_t value = 0;
  for (const char c : token) {
    if (c < '0' || c > '9') return IdStatus::kOutOfRange;
    const auto digit = static_cast<uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return IdStatus::kOutOfRange;
    value = value * 10 + digit;
  }
  if (!full_range && value > static_cast<uint64_t>(INT64_MAX)) return IdStatus::kOutOfRange;
  out = value;
  return IdStatus::kOk;
}

bool parse_int(std::string_view token, int64_t& out) {
  int64_t milli = 0;
  if (!parse_milli(trim(token), milli) || milli % 1000 != 0) return false;
  out = milli / 1000;
  return true;
}

std::string lowered_letters(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// PyTorch's collective names ("allreduce", "_allgather_base", "all_to_all", ...).
CommOp op_from_collective_name(std::string_view name) {
  const std::string n = lowered_letters(name);
  auto starts = [&](std::string_view prefix) { return n.compare(0, prefix.size(), prefix) == 0; };
  if (starts("allreduce")) return CommOp::kAllReduce;
  if (starts("allgather")) return CommOp::kAllGather;
  if (starts("reducescatter")) return CommOp::kReduceScatter;
  if (starts("alltoall")) return CommOp::kAllToAll;
  if (starts("broadcast")) return CommOp::kBroadcast;
  if (starts("reduce")) return CommOp::kReduce;
  if (starts("gather")) return CommOp::kGather;
  if (starts("scatter")) return CommOp::kScatter;
  if (starts("barrier")) return CommOp::kBarrier;
  if (starts("sendrecv")) return CommOp::kSendRecv;
  if (starts("send")) return CommOp::kSend;
  if (starts("recv")) return CommOp::kRecv;
  return CommOp::kNone;
}

// What a NCCL kernel's name says: "ncclKernel_AllReduce_RING_LL_Sum_float(...)",
// "ncclDevKernel_AllGather_RING_LL(...)".
struct KernelName {
  CommOp op = CommOp::kNone;
  Algorithm algorithm = Algorithm::kNone;
  Protocol protocol = Protocol::kNone;
  DataType datatype = DataType::kNone;
};

KernelName parse_nccl_kernel_name(std::string_view name) {
  KernelName out;
  name = name.substr(0, name.find('('));
  static const std::pair<std::string_view, CommOp> kOps[] = {
      {"AllReduce", CommOp::kAllReduce}, {"AllGather", CommOp::kAllGather},
      {"ReduceScatter", CommOp::kReduceScatter}, {"Broadcast", CommOp::kBroadcast},
      {"Reduce", CommOp::kReduce}, {"SendRecv", CommOp::kSendRecv}, {"Send", CommOp::kSend},
      {"Recv", CommOp::kRecv}, {"AllToAll", CommOp::kAllToAll}};
  static const std::pair<std::string_view, Algorithm> kAlgorithms[] = {
      {"RING", Algorithm::kRing}, {"TREE", Algorithm::kTree}, {"NVLS", Algorithm::kNvls},
      {"PAT", Algorithm::kPat}, {"COLLNET", Algorithm::kCollnetDirect}};
  static const std::pair<std::string_view, Protocol> kProtocols[] = {
      {"LL128", Protocol::kLL128}, {"LL", Protocol::kLL}, {"SIMPLE", Protocol::kSimple}};
  static const std::pair<std::string_view, DataType> kTypes[] = {
      {"float", DataType::kFloat32}, {"f32", DataType::kFloat32}, {"half", DataType::kFloat16},
      {"f16", DataType::kFloat16}, {"bf16", DataType::kBfloat16}, {"__nv_bfloat16", DataType::kBfloat16},
      {"double", DataType::kFloat64}, {"f64", DataType::kFloat64}, {"int8_t", DataType::kInt8},
      {"i8", DataType::kInt8}, {"uint8_t", DataType::kUint8}, {"u8", DataType::kUint8},
      {"int32_t", DataType::kInt32}, {"i32", DataType::kInt32}, {"uint32_t", DataType::kUint32},
      {"u32", DataType::kUint32}, {"int64_t", DataType::kInt64}, {"i64", DataType::kInt64},
      {"uint64_t", DataType::kUint64}, {"u64", DataType::kUint64}};
  size_t start = 0;
  while (start <= name.size()) {
    const size_t end = std::min(name.find('_', start), name.size());
    const std::string_view token = name.substr(start, end - start);
    for (const auto& [text, op] : kOps) {
      if (out.op == CommOp::kNone && token == text) out.op = op;
    }
    for (const auto& [text, algorithm] : kAlgorithms) {
      if (out.algorithm == Algorithm::kNone && token == text) out.algorithm = algorithm;
    }
    for (const auto& [text, protocol] : kProtocols) {
      if (out.protocol == Protocol::kNone && token == text) out.protocol = protocol;
    }
    for (const auto& [text, type] : kTypes) {
      if (out.datatype == DataType::kNone && token == text) out.datatype = type;
    }
    start = end + 1;
  }
  // "NVLS_TREE", "COLLNET_CHAIN": two tokens.
  if (name.find("NVLS_TREE") != std::string_view::npos) out.algorithm = Algorithm::kNvlsTree;
  if (name.find("COLLNET_CHAIN") != std::string_view::npos) out.algorithm = Algorithm::kCollnetChain;
  return out;
}

// Collectives that gloo runs as queued work on its worker threads; its send
// and recv run on the calling thread.
bool queued_by_gloo(CommOp op) {
  return op != CommOp::kNone && op != CommOp::kSend && op != CommOp::kRecv && op != CommOp::kSendRecv;
}

// Collectives no rank can finish before every rank has called them, so that
// their times bound the clock offsets (kineto_align.h).
bool every_rank_needs_every_other(CommOp op) {
  return op == CommOp::kAllReduce || op == CommOp::kAllGather || op == CommOp::kReduceScatter ||
         op == CommOp::kAllToAll || op == CommOp::kBarrier;
}

// A thread blocked until c10d work completed: functional collectives' wait.
bool c10d_wait(std::string_view name) {
  return name == "_c10d_functional::wait_tensor" || name == "c10d_functional::wait_tensor";
}

bool nccl_named(std::string_view name) {
  return name.compare(0, 4, "nccl") == 0 || name.find("ncclKernel") != std::string_view::npos ||
         name.find("ncclDevKernel") != std::string_view::npos;
}

// What a complete event's category ("cat") says it is. Kineto names one kind
// differently by accelerator and version: MTIA's on-device work is
// "mtia_ccp_events" and its runtime calls "mtia_runtime"; older Kineto (and
// Gaudi's plugin) writes "Kernel", "Runtime", "Memcpy", "Memset"; XPU, Gaudi
// ("hpu_op") and PrivateUse1 backends name their own runtime calls.
enum class Category {
  kHostRange, kRuntimeCall, kKernel, kMemcpy, kMemset, kSync, kDeviceRange, kProfilerSpan, kUnknown
};

Category category_of(std::string_view cat) {
  // The most frequent first.
  static const std::pair<std::string_view, Category> kCategories[] = {
      {"cpu_op", Category::kHostRange},           {"cuda_runtime", Category::kRuntimeCall},
      {"kernel", Category::kKernel},              {"user_annotation", Category::kHostRange},
      {"python_function", Category::kHostRange},  {"gpu_memcpy", Category::kMemcpy},
      {"gpu_memset", Category::kMemset},          {"gpu_user_annotation", Category::kDeviceRange},
      {"cuda_driver", Category::kRuntimeCall},    {"cuda_sync", Category::kSync},
      {"mtia_ccp_events", Category::kKernel},     {"mtia_runtime", Category::kRuntimeCall},
      {"Kernel", Category::kKernel},              {"Runtime", Category::kRuntimeCall},
      {"Memcpy", Category::kMemcpy},              {"Memset", Category::kMemset},
      {"xpu_runtime", Category::kRuntimeCall},    {"xpu_driver", Category::kRuntimeCall},
      {"hpu_op", Category::kRuntimeCall},         {"privateuse1_runtime", Category::kRuntimeCall},
      {"privateuse1_driver", Category::kRuntimeCall}, {"Trace", Category::kProfilerSpan},
      // Kineto's own buffer and CUPTI overhead: the profiler's work, not the program's.
      {"overhead", Category::kProfilerSpan}};
  for (const auto& [text, category] : kCategories) {
    if (cat == text) return category;
  }
  return Category::kUnknown;
}

// Runtime calls that launch kernels: CUDA's and HIP's (cudaLaunchKernel,
// cuLaunchKernelEx, hipModuleLaunchKernel, cudaLaunchCooperativeKernel, ...),
// graph launches, and MTIA's submission of a job.
bool launches_kernels(std::string_view name) {
  return name.find("LaunchKernel") != std::string_view::npos ||
         name.find("LaunchCooperativeKernel") != std::string_view::npos ||
         name.find("GraphLaunch") != std::string_view::npos ||
         name == "runFunction - job_prep_and_submit_for_execution";
}

// The fields of one event that the import uses; views into the event's text
// or into the parser's string buffer, valid until the next event.
struct Fields {
  std::string_view ph, cat, name;
  std::string_view scope;  // an instant's "s": "g" global, "p" process, "t" thread
  std::string_view pid, tid;  // string contents, or the number's token
  std::string_view ts, dur, id;
  bool has_ts = false, has_dur = false, has_name = false;
  // args
  std::string_view correlation, external_id, stream, device, bytes;
  std::string_view collective, dtype, group_name, group_ranks, in_nelems, out_nelems, seq, comms_id;
  std::string_view total_allocated, device_id, meta_name;
  std::string_view input_dims, input_types;  // record_shapes' arrays, as JSON text
  std::string_view counter_key, counter_value;  // the first number of a counter event
};

// The value's text: a string's contents, anything else's token.
simdjson::error_code text_of(od::value& value, std::string_view& out) {
  od::json_type type;
  if (auto error = value.type().get(type)) return error;
  if (type == od::json_type::string) return value.get_string().get(out);
  if (type == od::json_type::number || type == od::json_type::boolean) {
    out = trim(value.raw_json_token());
    return simdjson::SUCCESS;
  }
  return simdjson::SUCCESS;  // objects, arrays, null: not wanted, skipped by the iteration
}

// A field's key as written. Kineto's keys hold no backslash and need no
// unescaping, which copies each into the parser's buffer; a key that does
// hold one is unescaped, so "\u0070h" is still "ph".
simdjson::error_code key_of(od::field& field, std::string_view& out) {
  const char* raw = field.key().raw();  // the key's text after its quote, which stage 1 found closed
  for (size_t n = 0;; ++n) {
    if (raw[n] == '\\') return field.unescaped_key().get(out);
    if (raw[n] == '"') {
      out = std::string_view(raw, n);
      return simdjson::SUCCESS;
    }
  }
}

simdjson::error_code read_args(od::value& value, Fields& f, bool counter) {
  od::object args;
  if (auto error = value.get_object().get(args)) return error;
  for (auto field_result : args) {
    // Used where it lies: a copy of the field (a 16-byte load of what was
    // just stored in two parts) stalled the core on every field.
    if (auto error = field_result.error()) return error;
    od::field&& field = std::move(field_result).value_unsafe();
    std::string_view key;
    if (auto error = key_of(field, key)) return error;
    std::string_view* slot = nullptr;
    std::string_view* array_slot = nullptr;
    switch (key.size()) {
      case 4:
        if (key == "name") slot = &f.meta_name;
        break;
      case 3:
        if (key == "Seq" || key == "seq") slot = &f.seq;
        break;
      case 5:
        if (key == "bytes") slot = &f.bytes;
        else if (key == "dtype") slot = &f.dtype;
        break;
      case 6:
        if (key == "device") slot = &f.device;
        else if (key == "stream") slot = &f.stream;
        break;
      case 8:
        if (key == "Comms Id") slot = &f.comms_id;
        break;
      case 9:
        if (key == "Device Id") slot = &f.device_id;
        break;
      case 10:
        if (key == "Input Dims") array_slot = &f.input_dims;
        else if (key == "Input type") array_slot = &f.input_types;
        break;
      case 11:
        if (key == "correlation") slot = &f.correlation;
        else if (key == "External id") slot = &f.external_id;
        break;
      case 13:
        if (key == "In msg nelems") slot = &f.in_nelems;
        break;
      case 14:
        if (key == "Out msg nelems") slot = &f.out_nelems;
        break;
      case 15:
        if (key == "Collective name") slot = &f.collective;
        else if (key == "Total Allocated") slot = &f.total_allocated;
        break;
      case 18:
        if (key == "Process Group Name") slot = &f.group_name;
        break;
      case 19:
        if (key == "Process Group Ranks") slot = &f.group_ranks;
        break;
      default:
        break;
    }
    od::value& v = field.value();
    if (slot) {
      if (auto error = text_of(v, *slot)) return error;
    } else if (array_slot) {
      od::array list;
      if (!v.get_array().get(list)) {
        if (auto error = list.raw_json().get(*array_slot)) return error;
      }
    } else if (counter && f.counter_key.empty()) {
      od::json_type type;
      if (auto error = v.type().get(type)) return error;
      if (type == od::json_type::number) {
        f.counter_key = key;
        f.counter_value = trim(v.raw_json_token());
      }
    }
  }
  return simdjson::SUCCESS;
}

simdjson::error_code read_fields(od::document& doc, Fields& f) {
  od::object object;
  if (auto error = doc.get_object().get(object)) return error;
  for (auto field_result : object) {
    // Used where it lies: a copy of the field (a 16-byte load of what was
    // just stored in two parts) stalled the core on every field.
    if (auto error = field_result.error()) return error;
    od::field&& field = std::move(field_result).value_unsafe();
    std::string_view key;
    if (auto error = key_of(field, key)) return error;
    od::value& v = field.value();
    std::string_view* slot = nullptr;
    switch (key.size()) {
      case 1:
        if (key == "s") slot = &f.scope;
        break;
      case 2:
        if (key == "ph") {
          slot = &f.ph;
        } else if (key == "ts") {
          slot = &f.ts;
          f.has_ts = true;
        } else if (key == "id") {
          slot = &f.id;
        }
        break;
      case 3:
        if (key == "cat") slot = &f.cat;
        else if (key == "pid") slot = &f.pid;
        else if (key == "tid") slot = &f.tid;
        else if (key == "dur") {
          slot = &f.dur;
          f.has_dur = true;
        }
        break;
      case 4:
        if (key == "name") {
          slot = &f.name;
          f.has_name = true;
        } else if (key == "args") {
          od::json_type type;
          if (auto error = v.type().get(type)) return error;
          if (type == od::json_type::object) {
            // Counters' values are their arguments; Kineto writes "ph" first.
            if (auto error = read_args(v, f, f.ph == "C")) return error;
          }
        }
        break;
      default:
        break;
    }
    if (slot) {
      if (auto error = text_of(v, *slot)) return error;
    }
  }
  return simdjson::SUCCESS;
}

struct CollectiveInfo {
  CommOp op = CommOp::kNone;
  DataType datatype = DataType::kNone;
  uint64_t group = 0;
  uint64_t elements = 0;
  uint64_t id = 0;
  MatchKey key = MatchKey::kTime;
};

// A process group of distributedInfo.pg_config, with what the c10d calls need.
struct ProcessGroupMembers {
  std::string name, description;
  int64_t size = 0;
  std::vector<int32_t> ranks;  // sorted
};

// A c10d collective call on the calling thread: the rank's arrival.
struct C10dCall {
  int64_t begin_ns, end_ns;
  CommOp op;
  uint32_t name_id;
  uint16_t track;       // the calling thread's
  bool from_backward;   // made inside the autograd engine's work (DDP's buckets, FSDP's reduce-scatters)
};

// When a thread ran no op, for telling where it waited: the trace records
// no wait of a c10d call's (Work.wait, DDP's wait for its buckets), only a
// silence on the calling thread that ends when the work completes. A
// thread's events come in the order they began, nested.
struct ThreadActivity {
  bool calls_c10d = false;
  int64_t ops_until = INT64_MIN;  // the end of the latest-ending op begun so far
  int64_t backward_until = INT64_MIN;  // the end of the latest autograd::engine::evaluate_function range begun
  int64_t ended = INT64_MIN;      // the latest end among its events already over
  std::priority_queue<int64_t, std::vector<int64_t>, std::greater<>> open_ends;
  std::vector<std::pair<int64_t, int64_t>> silences;  // (from, to), after its first c10d call
};

struct TensorSizes {
  uint64_t bytes = 0;  // 0: not known
  DataType datatype = DataType::kNone;
};

// A gloo range on a worker thread: a collective's execution, ending at its completion.
struct GlooExecution {
  int64_t begin_ns, end_ns;
  TensorSizes sizes;
};

}  // namespace

class TraceImport::Impl {
  // Where the last event without a correlation id is, for the flow after it.
  struct Unlinked {
    bool valid = false;
    bool held = false;  // in pending_, else in buffers_[buffer]
    size_t buffer = 0;
    size_t index = 0;
    int64_t begin_ns = 0;
  };

 public:
  Impl(std::string trace_path, std::string shard_path, const ImportSettings& settings)
      : shard_path_(std::move(shard_path)), settings_(settings) {
    summary_.path = std::move(trace_path);
    for (const std::string& pattern : settings_.comm_kernel_patterns) {
      patterns_.emplace_back(pattern, std::regex::ECMAScript | std::regex::optimize);
    }
    patterns_matched_.assign(patterns_.size(), false);
    collectives_.rank = -1;
  }

  void read(bool from_file, std::string_view text) {
    TraceReader::Callbacks callbacks;
    callbacks.on_header = [this](std::string_view key, std::string_view value) { header(key, value); };
    callbacks.on_event = [this](std::string_view value, uint64_t index, uint64_t offset) { event(value, index, offset); };
    callbacks.on_problem = [this](const std::string& message) { problem_line(message); };
    ReaderStats stats;
    if (from_file) {
      TraceReader reader(summary_.path);
      stats = reader.read(callbacks);
    } else {
      stats = TraceReader::read_text(summary_.path, text, callbacks);
    }
    summary_.bytes = stats.bytes;
    // Nothing to import is no rank of a job: a JSON file of another kind
    // (an execution trace, `{}`), or a trace cut or emptied before its first event.
    if (stats.events == 0) {
      throw Error(summary_.path + (!stats.trace_events_found && stats.truncated
                                       ? ": the file ends before a traceEvents array (cut short?)"
                                   : !stats.trace_events_found ? ": not a torch.profiler trace: it has no traceEvents array"
                                   : stats.truncated           ? ": the trace ends before its first event"
                                                               : ": its traceEvents array is empty: no event to import"));
    }
    counters_.add(rankscope::counter::kKinetoMalformed, stats.elements_skipped);
    counters_.add(rankscope::counter::kKinetoBytesSkipped, stats.bytes_skipped);
    if (stats.truncated) counters_.set(rankscope::counter::kKinetoTruncated, 1);
    if (summary_.rank < 0) summary_.rank = rank_from_file_name(summary_.path);
    if (kernel_launches_ > 0 && kernels_ == 0) {
      counters_.set(counter::kKinetoKernelsMissing, kernel_launches_);
      file_problem(summary_.path + ": " + std::to_string(kernel_launches_) +
                   " kernel launches (cudaLaunchKernel and the like) but not one kernel: the profiler recorded no GPU "
                   "activity (torch.profiler without ProfilerActivity.CUDA, or CUPTI unavailable), so the timeline "
                   "has the host's side only and its figures read as a CPU job's (counted as " +
                   std::string(counter::kKinetoKernelsMissing) + ")");
    }
    collectives_.rank = summary_.rank;
    collectives_.host = summary_.host;
    pair_c10d_calls();
    for (CollectiveRecord& r : collectives_.records) {
      r.begin_ns += summary_.base_ns;
      r.end_ns += summary_.base_ns;
    }
  }

  void finish(const ImportedJob& job, const RankAlignment& alignment, const std::vector<uint64_t>& instances,
              uint64_t unmatched) {
    for (size_t i = 0; i < pending_.size() && i < instances.size(); ++i) pending_[i].seq = instances[i];
    if (!pending_.empty()) write(pending_);
    for (auto& buffer : buffers_) {
      if (!buffer.empty()) write(buffer);
    }
    // Thread names come as metadata events, usually after the thread's events.
    for (Track& track : tracks_) {
      const auto named = thread_names_.find(track_keys_[track.id]);
      if (named != thread_names_.end()) track.name_id = intern(named->second);
    }
    std::vector<std::pair<uint32_t, std::string_view>> strings;
    for (uint32_t id = 0; id < names_.size(); ++id) strings.emplace_back(id, names_[id]);
    const int64_t now = summary_.last_ns == INT64_MIN ? 0 : summary_.last_ns;
    if (!open_shard() || !writer_.write_strings(strings, now)) throw Error(writer_.error());
    if (!writer_.write_tracks(tracks_, now)) throw Error(writer_.error());

    RankMetadata metadata;
    metadata.rank = summary_.rank;
    metadata.world_size = job.world_size;
    metadata.job = job.identity;
    metadata.pid = pid_;
    metadata.host = summary_.host;
    metadata.launcher = "torch.profiler";
    metadata.capture = "kineto import of " + summary_.path + (schema_.empty() ? "" : " schemaVersion=" + schema_) +
                       (nccl_version_.empty() ? "" : " nccl=" + nccl_version_);
    const int64_t first = summary_.first_ns == INT64_MAX ? 0 : summary_.first_ns;
    metadata.start_local_ns = first;
    metadata.start_wall_ns = first + summary_.base_ns;
    if (!writer_.write_metadata(metadata, now)) throw Error(writer_.error());

    // local - reference = (rank clock - reference clock) - (base difference).
    // A rank that could not be aligned is taken to share the reference's
    // clock, with a bound that says nothing is known; with the same base as
    // the reference (the usual case) it needs no correction at all.
    const bool shifted = alignment.aligned || summary_.base_ns != job.reference_base_ns;
    if (shifted) {
      const int64_t offset = (alignment.aligned ? alignment.offset_ns : 0) + job.reference_base_ns - summary_.base_ns;
      const int64_t bound = alignment.aligned ? alignment.bound_ns : kUnknownClockBoundNs;
      const int64_t last = std::max(first, summary_.last_ns);
      const SyncPoint points[2] = {{first, offset, bound}, {last, offset, bound}};
      if (!writer_.write_sync_points({points, last > first ? 2u : 1u}, now)) throw Error(writer_.error());
    }
    if (!alignment.aligned) counters_.set(rankscope::counter::kKinetoUnaligned, 1);
    if (!alignment.doubt.empty()) counters_.set(rankscope::counter::kKinetoDoubtful, 1);
    if (!alignment.host_doubt.empty()) counters_.set(counter::kKinetoClockHostContradicted, 1);
    if (!alignment.consistent) counters_.set(rankscope::counter::kKinetoInconsistent, 1);
    counters_.set(rankscope::counter::kKinetoUnmatched, unmatched);
    // The shard goes once the merge has read it.
    if (!writer_.close(counters_, now, ShardWriter::Keeping::kTemporary)) throw Error(writer_.error());
  }

  TraceSummary summary_;
  RankCollectives collectives_;
  Counters counters_;
  std::vector<bool> patterns_matched_;  // per pattern: some kernel's name matched it

 private:
  void header(std::string_view key, std::string_view value) {
    if (key == "distributedInfo") {
      od::document doc;
      od::object info;
      if (parser_.iterate(value.data(), value.size(), value.size() + kTextPadding).get(doc) ||
          doc.get_object().get(info)) {
        problem_line(summary_.path + ": distributedInfo is not a JSON object; the rank is taken from the file name");
        return;
      }
      // Parsed once the object is done with: the parser holds one document at a time.
      std::string process_groups;
      for (auto field_result : info) {
        od::field field;
        std::string_view name, text;
        if (std::move(field_result).get(field) || field.unescaped_key().get(name)) {
          problem_line(summary_.path + ": distributedInfo is not valid JSON; the rank is taken from the file name");
          return;
        }
        od::value field_value = field.value();
        if (name == "pg_config") {
          od::array groups;
          if (!field_value.get_array().get(groups) && !groups.raw_json().get(text)) process_groups = text;
          continue;
        }
        if (text_of(field_value, text)) {
          problem_line(summary_.path + ": distributedInfo is not valid JSON; the rank is taken from the file name");
          return;
        }
        uint64_t number = 0;
        if (name == "rank") {
          if (parse_id(text, number) == IdStatus::kOk && number <= INT32_MAX) {
            summary_.rank = static_cast<int32_t>(number);
          } else {
            problem_line(summary_.path + ": distributedInfo.rank is not a rank: " + std::string(text));
          }
        } else if (name == "world_size") {
          // 0 is no job's size: said, and the size taken from the ranks instead.
          if (parse_id(text, number) == IdStatus::kOk && number >= 1 && number <= INT32_MAX) {
            summary_.world_size = static_cast<int32_t>(number);
          } else {
            problem_line(summary_.path + ": distributedInfo.world_size is not a number of ranks: " + std::string(text) +
                         "; the job's size is taken from its ranks");
          }
        } else if (name == "backend") {
          summary_.backend = std::string(text);
        } else if (name == "nccl_version") {
          nccl_version_ = std::string(text);
        }
      }
      if (!process_groups.empty()) read_process_groups(process_groups);
    } else if (key == "baseTimeNanoseconds") {
      uint64_t base = 0;
      if (parse_id(value, base) == IdStatus::kOk && base <= static_cast<uint64_t>(kMaxTimeNs)) {
        summary_.base_ns = static_cast<int64_t>(base);
      } else {
        problem_line(summary_.path + ": baseTimeNanoseconds is not an integer: " + std::string(value.substr(0, 40)));
      }
    } else if (key == "schemaVersion") {
      schema_ = std::string(trim(value).substr(0, 20));
    } else if (key == "host_name" || key == "hostname") {
      od::document doc;
      std::string_view text;
      if (!parser_.iterate(value.data(), value.size(), value.size() + kTextPadding).get(doc) &&
          !doc.get_string().get(text)) {
        summary_.host = std::string(text);
      }
    }
  }

  // distributedInfo.pg_config: [{"pg_name": "0", "pg_size": 2, "ranks": [0, 1], ...}, ...]. A group
  // that does not say all three is left out: it can be compared with nothing.
  void read_process_groups(const std::string& text) {
    const simdjson::padded_string padded(text);
    od::document doc;
    od::array groups;
    if (parser_.iterate(padded).get(doc) || doc.get_array().get(groups)) return;
    for (auto group_result : groups) {
      od::object group;
      if (std::move(group_result).get_object().get(group)) return;
      std::string_view name, description;
      int64_t size = -1;
      std::vector<int32_t> ranks;
      bool ranks_given = false;
      for (auto field_result : group) {
        od::field field;
        std::string_view key;
        if (std::move(field_result).get(field) || field.unescaped_key().get(key)) return;
        od::value value = field.value();
        if (key == "pg_name") {
          if (value.get_string().get(name)) return;
        } else if (key == "pg_desc") {
          if (value.get_string().get(description)) return;
        } else if (key == "pg_size") {
          if (value.get_int64().get(size)) return;
        } else if (key == "ranks") {
          od::array list;
          if (value.get_array().get(list)) return;
          for (auto rank_result : list) {
            int64_t rank = 0;
            if (rank_result.get_int64().get(rank) || rank < 0 || rank > INT32_MAX) return;
            ranks.push_back(static_cast<int32_t>(rank));
          }
          ranks_given = true;
        }
      }
      if (name.empty() || size < 0 || !ranks_given) continue;
      std::sort(ranks.begin(), ranks.end());
      summary_.process_groups.push_back(
          {std::string(name), "size " + std::to_string(size) + ", ranks " + format_rank_list(ranks)});
      groups_.push_back({std::string(name), std::string(description), size, std::move(ranks)});
    }
  }

  void event(std::string_view text, uint64_t index, uint64_t offset) {
    // A flow links the event just before it, and only that one.
    const Unlinked previous = unlinked_;
    unlinked_.valid = false;
    od::document doc;
    Fields f;
    if (auto error = parser_.iterate(text.data(), text.size(), text.size() + kTextPadding).get(doc)) {
      return skip(rankscope::counter::kKinetoMalformed, index, offset, std::string("not valid JSON (") + simdjson::error_message(error) + ")");
    }
    if (auto error = read_fields(doc, f)) {
      return skip(rankscope::counter::kKinetoMalformed, index, offset, std::string("not valid JSON (") + simdjson::error_message(error) + ")");
    }
    if (f.ph.size() != 1) return skip(rankscope::counter::kKinetoMissingFields, index, offset, "no \"ph\"");
    switch (f.ph[0]) {
      case 'X': return complete(f, index, offset);
      case 'i':
      case 'I': return instant(f, index, offset);
      case 'C': return counter_sample(f, index, offset);
      case 'M': return metadata(f);
      case 's':
      case 'f':
      case 't': return flow(f, previous);
      default:
        counters_.add(rankscope::counter::kKinetoUnsupported, 1);
        return;
    }
  }

  bool times(const Fields& f, uint64_t index, uint64_t offset, bool with_duration, int64_t& begin, int64_t& end) {
    if (!f.has_ts || (with_duration && !f.has_dur)) {
      skip(rankscope::counter::kKinetoMissingFields, index, offset, with_duration ? "no \"ts\" or \"dur\"" : "no \"ts\"");
      return false;
    }
    // Times stay within ±2^62 ns (146 years) so that adding a base or taking
    // differences between ranks can never overflow.
    if (!parse_milli(f.ts, begin) || begin > kMaxTimeNs || begin < -kMaxTimeNs) {
      skip(rankscope::counter::kKinetoBadTimes, index, offset,
           "\"ts\" " + std::string(f.ts.substr(0, 40)) + " is not a time in µs within 146 years");
      return false;
    }
    int64_t duration = 0;
    if (with_duration) {
      if (!parse_milli(f.dur, duration)) {
        skip(rankscope::counter::kKinetoBadTimes, index, offset,
             "\"dur\" " + std::string(f.dur.substr(0, 40)) + " is not a number of µs");
        return false;
      }
      if (duration < 0 || duration > kMaxDurationNs) {
        skip(rankscope::counter::kKinetoBadTimes, index, offset,
             "\"dur\" " + std::string(f.dur.substr(0, 40)) + " µs is " +
                 (duration < 0 ? "negative" : "absurd (over a day)"));
        return false;
      }
    }
    end = begin + duration;
    if (end > kMaxTimeNs) {
      skip(rankscope::counter::kKinetoBadTimes, index, offset, "\"ts\" + \"dur\" is beyond 146 years");
      return false;
    }
    return true;
  }

  uint64_t id_field(std::string_view token, uint64_t index, uint64_t offset, const char* what) {
    uint64_t id = 0;
    if (parse_id(token, id) == IdStatus::kOutOfRange) {
      counters_.add(rankscope::counter::kKinetoIdsOutOfRange, 1);
      problem(index, offset, std::string(what) + " " + std::string(token.substr(0, 40)) +
                                 " is not an id in 0..INT64_MAX; the event is kept without it");
      return 0;
    }
    return id;
  }

  void complete(const Fields& f, uint64_t index, uint64_t offset) {
    const Category category = category_of(f.cat);
    if (category == Category::kProfilerSpan) return;  // the profiler's own span over everything, or its overhead
    // Seen, whatever their times: whether the trace recorded kernels at all.
    if (category == Category::kKernel) ++kernels_;
    if (category == Category::kRuntimeCall && launches_kernels(f.name)) ++kernel_launches_;
    int64_t begin = 0, end = 0;
    if (!times(f, index, offset, true, begin, end)) return;
    if (category == Category::kUnknown) return unknown_category(f.cat, index, offset);
    Event e{};
    e.begin_ns = begin;
    e.end_ns = end;
    e.peer = kNoPeer;
    e.name_id = intern(f.has_name ? f.name : std::string_view("(no name)"));
    const std::string_view cat = f.cat;
    const bool on_device = category == Category::kKernel || category == Category::kMemcpy ||
                           category == Category::kMemset || category == Category::kSync ||
                           category == Category::kDeviceRange;
    if (on_device) {
      int64_t device = -1, stream = -1;
      if (!parse_int(f.device, device) && !parse_int(f.pid, device)) device = -1;
      // "stream": -1 is work of no one stream (a device-wide synchronisation): its track's os_id is UINT64_MAX.
      if (!parse_int(f.stream, stream) && !parse_int(f.tid, stream)) stream = -1;
      e.track = gpu_track(device, stream);
      e.correlation_id = id_field(f.correlation, index, offset, "correlation");
      switch (category) {
        case Category::kKernel:
          e.kind = EventKind::kGpuKernel;
          if (communication(f, e, index, offset)) return;
          break;
        case Category::kMemcpy:
          e.kind = EventKind::kGpuMemcpy;
          e.bytes = id_field(f.bytes, index, offset, "bytes");
          break;
        case Category::kMemset:
          e.kind = EventKind::kGpuMemset;
          e.bytes = id_field(f.bytes, index, offset, "bytes");
          break;
        case Category::kSync:
          e.kind = EventKind::kGpuSync;
          break;
        default:
          e.kind = EventKind::kNvtxRange;
          // It spans the device work launched inside the host's range of its
          // name; ROCm's traces have one per ProfilerStep#N. The step is the
          // host's range: under the step's name this shorter one would
          // replace it, so it keeps its place on the stream under another.
          if (step_number(f.name)) e.name_id = intern("GPU work of " + std::string(f.name));
          break;
      }
    } else {
      e.track = thread_track(f.pid, f.tid);
      if (category == Category::kRuntimeCall) {
        e.kind = EventKind::kCudaApi;
        e.correlation_id = id_field(f.correlation, index, offset, "correlation");
      } else if (c10d_wait(f.name)) {
        e.kind = EventKind::kTorchWait;
      } else {
        e.kind = EventKind::kNvtxRange;
        if (f.name == "record_param_comms") remember_collective(f, index, offset);
      }
      // A Python frame encloses the waits it makes: only what the frames call tells.
      if (cat != "python_function") follow_thread(e, cat == "cpu_op");
      if (e.kind == EventKind::kNvtxRange) remember_c10d(f, e);
      if (pid_ == 0) parse_int(f.pid, pid_);
    }
    add(e);
  }

  // Events of a category not known are not guessed at: read as the host's
  // ranges, an accelerator's work would show as host compute and its device
  // as idle. They are counted, and each category named where it first appears.
  void unknown_category(std::string_view cat, uint64_t index, uint64_t offset) {
    counters_.add(counter::kKinetoCategoryUnknown, 1);
    if (named_categories_.contains(cat) || named_categories_.size() >= settings_.max_problems_kept) return;
    named_categories_.emplace(cat);
    problem(index, offset,
            (cat.empty() ? std::string("no \"cat\"") : "category \"" + std::string(cat.substr(0, 60)) + "\"") +
                ": not a kind of event rankscope knows; the category's events are not imported (counted as " +
                std::string(counter::kKinetoCategoryUnknown) + ")");
  }

  // A kernel that communicates: known by its NCCL arguments, by the
  // record_param_comms that launched it, by NCCL's name, or by the user's
  // patterns. Held back until the ranks are matched.
  bool communication(const Fields& f, Event& e, uint64_t index, uint64_t offset) {
    CollectiveInfo info;
    bool known = false;
    if (!f.collective.empty()) {
      info = collective_info(f, index, offset);
      known = true;
    } else if (const uint64_t external = id_field(f.external_id, index, offset, "External id"); external != 0) {
      const auto found = launched_by_.find(external);
      if (found != launched_by_.end()) {
        info = found->second;
        known = true;
      }
    }
    const bool by_name = nccl_named(f.name);
    // Every kernel's name meets the patterns, so that one matching nothing can be told.
    const bool by_pattern = matches_pattern(e.name_id);
    if (!known && !by_name && !by_pattern) return false;
    const KernelName parsed = by_name ? parse_nccl_kernel_name(f.name) : KernelName{};
    if (info.op == CommOp::kNone) info.op = parsed.op;
    if (info.datatype == DataType::kNone) info.datatype = parsed.datatype;
    e.op = info.op;
    e.algorithm = parsed.algorithm;
    e.protocol = parsed.protocol;
    e.datatype = info.datatype;
    e.bytes = info.elements * data_type_size(info.datatype);
    e.comm_hash = info.group;
    const bool p2p = info.op == CommOp::kSend || info.op == CommOp::kRecv || info.op == CommOp::kSendRecv;
    e.kind = p2p ? EventKind::kNcclP2pGpu : EventKind::kNcclCollectiveGpu;
    summary_.first_ns = std::min(summary_.first_ns, e.begin_ns);
    summary_.last_ns = std::max(summary_.last_ns, e.end_ns);
    ++summary_.events;
    pending_.push_back(e);
    if (e.correlation_id == 0) unlinked_ = {true, true, 0, pending_.size() - 1, e.begin_ns};
    collectives_.records.push_back({info.group, info.id, e.begin_ns, e.end_ns, info.op, info.key});
    return true;
  }

  CollectiveInfo collective_info(const Fields& f, uint64_t index, uint64_t offset) {
    CollectiveInfo info;
    info.op = op_from_collective_name(f.collective);
    info.datatype = data_type_from_torch_name(f.dtype);
    info.group = !f.group_name.empty() ? hash_bytes(f.group_name) : !f.group_ranks.empty() ? hash_bytes(f.group_ranks) : 0;
    // NCCL's count: what each rank sends, but what each receives for reduce-scatter.
    const std::string_view count = info.op == CommOp::kReduceScatter ? f.out_nelems : f.in_nelems;
    info.elements = id_field(count, index, offset, "message size");
    uint64_t id = 0;
    // Seq counts per process group: without the group it says nothing.
    if (info.group != 0 && !f.seq.empty() && parse_id(f.seq, id) == IdStatus::kOk) {
      info.id = id;
      info.key = MatchKey::kSeq;
    } else if (!f.comms_id.empty()) {
      // Comms Id is an unsigned 64-bit hash: all of its range is valid.
      if (parse_id(f.comms_id, id, true) == IdStatus::kOk) {
        info.id = id;
        info.key = MatchKey::kCommsId;
      } else {
        counters_.add(rankscope::counter::kKinetoIdsOutOfRange, 1);
        problem(index, offset, "Comms Id " + std::string(f.comms_id.substr(0, 40)) + " is not an unsigned 64-bit id");
      }
    }
    return info;
  }

  void remember_collective(const Fields& f, uint64_t index, uint64_t offset) {
    if (f.collective.empty() || f.external_id.empty()) return;
    const CommOp op = op_from_collective_name(f.collective);
    if (op == CommOp::kNone) return;  // "wait", "coalesced": no kernel of their own
    const uint64_t external = id_field(f.external_id, index, offset, "External id");
    if (external == 0) return;
    launched_by_[external] = collective_info(f, index, offset);
  }

  // c10d's collective calls and gloo's execution ranges, paired once the trace is read.
  void remember_c10d(const Fields& f, const Event& e) {
    constexpr std::string_view kCall = "c10d::", kExecution = "gloo:", kBackward = "autograd::engine::evaluate_function";
    if (f.name.starts_with(kBackward)) {
      ThreadActivity& thread = thread_activity(e.track);
      thread.backward_until = std::max(thread.backward_until, e.end_ns);
    } else if (f.name.starts_with(kCall)) {
      const CommOp op = op_from_collective_name(f.name.substr(kCall.size()));
      if (queued_by_gloo(op)) {
        ThreadActivity& thread = thread_activity(e.track);
        c10d_calls_.push_back({e.begin_ns, e.end_ns, op, e.name_id, e.track, e.begin_ns < thread.backward_until});
        thread.calls_c10d = true;
      }
    } else if (f.name.starts_with(kExecution) &&
               queued_by_gloo(op_from_collective_name(f.name.substr(kExecution.size())))) {
      // Its operation need not be the call's: FSDP's reduce-scatters run as gloo:all_reduce.
      gloo_executions_.push_back({e.begin_ns, e.end_ns, tensor_sizes(f.input_dims, f.input_types)});
    }
  }

  ThreadActivity& thread_activity(uint16_t track) {
    if (track >= activity_.size()) activity_.resize(size_t{track} + 1);
    return activity_[track];
  }

  // Where the thread ran no op before this event began: once it has called
  // c10d, a silence long enough to be a wait is kept.
  void follow_thread(const Event& e, bool op) {
    ThreadActivity& thread = thread_activity(e.track);
    while (!thread.open_ends.empty() && thread.open_ends.top() <= e.begin_ns) {
      thread.ended = std::max(thread.ended, thread.open_ends.top());
      thread.open_ends.pop();
    }
    const int64_t silent_from = std::max(thread.ops_until, thread.ended);
    if (thread.calls_c10d && silent_from != INT64_MIN && e.begin_ns - silent_from >= kMinWaitNs) {
      thread.silences.emplace_back(silent_from, e.begin_ns);
    }
    thread.open_ends.push(e.end_ns);
    if (op) thread.ops_until = std::max(thread.ops_until, e.end_ns);
  }

  // What record_shapes says a gloo range moved ("Input Dims": [[1000]],
  // "Input type": ["float"]): its tensors' bytes and the first one's type;
  // 0 bytes when a shape or a type's size is not known.
  TensorSizes tensor_sizes(std::string_view dims, std::string_view types) {
    od::document doc;
    od::array list;
    if (dims.empty() || types.empty() ||
        shapes_parser_.iterate(dims.data(), dims.size(), dims.size() + kTextPadding).get(doc) ||
        doc.get_array().get(list)) {
      return {};
    }
    std::vector<uint64_t> elements;
    for (auto tensor : list) {
      od::array shape;
      if (tensor.get_array().get(shape)) return {};
      uint64_t count = 1;
      for (auto extent : shape) {
        uint64_t n = 0;
        if (extent.get_uint64().get(n) || (n != 0 && count > UINT64_MAX / n)) return {};
        count *= n;
      }
      elements.push_back(count);
    }
    if (shapes_parser_.iterate(types.data(), types.size(), types.size() + kTextPadding).get(doc) ||
        doc.get_array().get(list)) {
      return {};
    }
    TensorSizes out;
    size_t tensor = 0;
    for (auto type_result : list) {
      std::string_view name;
      if (type_result.get_string().get(name) || tensor >= elements.size()) return {};
      const DataType type = data_type_from_cpp_name(name);
      const uint64_t size = data_type_size(type);
      if (size == 0 || elements[tensor] > (UINT64_MAX - out.bytes) / size) return {};
      if (tensor == 0) out.datatype = type;
      out.bytes += elements[tensor++] * size;
    }
    return tensor == elements.size() ? out : TensorSizes{};
  }

  // The process groups pg_config lists the rank in: its c10d calls ran on
  // one of them. Nothing in a call names its group, so with several it is not known.
  std::vector<const ProcessGroupMembers*> groups_of_rank() const {
    std::vector<const ProcessGroupMembers*> found;
    for (const ProcessGroupMembers& group : groups_) {
      if (std::binary_search(group.ranks.begin(), group.ranks.end(), summary_.rank)) found.push_back(&group);
    }
    return found;
  }

  // Each c10d call with the first gloo range not yet taken that begins after
  // it: gloo runs a group's work in the order of the calls, on either of its
  // workers, and nothing in the trace links a call to its range.
  void pair_c10d_calls() {
    if (c10d_calls_.empty()) return;
    // A trace with NCCL's kernels or record_param_comms and no gloo range has
    // its collectives already: its calls enqueued NCCL's work.
    if (gloo_executions_.empty() && (!collectives_.records.empty() || !launched_by_.empty())) return;
    const auto by_begin = [](const auto& a, const auto& b) { return a.begin_ns < b.begin_ns; };
    std::stable_sort(c10d_calls_.begin(), c10d_calls_.end(), by_begin);
    std::stable_sort(gloo_executions_.begin(), gloo_executions_.end(), by_begin);
    const std::vector<const ProcessGroupMembers*> candidates = groups_of_rank();
    const ProcessGroupMembers* group = candidates.size() == 1 ? candidates.front() : nullptr;
    // As rankscope's Python hook names a group, apart from NCCL's communicators.
    const uint64_t hash = group ? process_group_hash(group->name) : 0;
    const uint16_t track = process_group_track(group, hash, candidates.size());
    if (!group) counters_.add(counter::kKinetoC10dGroupUnknown, c10d_calls_.size());
    std::vector<Event> completed;  // the executed collectives
    size_t next = 0;
    uint64_t seq = 0;
    for (const C10dCall& call : c10d_calls_) {
      // A range that begins before the call is of a call made before the trace began.
      while (next < gloo_executions_.size() && gloo_executions_[next].begin_ns < call.begin_ns) ++next;
      Event e{};
      e.kind = EventKind::kTorchCollective;
      e.begin_ns = call.begin_ns;
      e.end_ns = call.end_ns;
      e.name_id = call.name_id;
      e.track = track;
      e.op = call.op;
      e.comm_hash = hash;
      e.seq = seq++;
      e.peer = kNoPeer;
      const bool executed = next < gloo_executions_.size();
      if (executed) {
        const GlooExecution& execution = gloo_executions_[next++];
        e.end_ns = execution.end_ns;
        e.datatype = execution.sizes.datatype;
        // The whole of what is gathered, as nccl-tests and the Python hook count it.
        const bool gathered = call.op == CommOp::kAllGather || call.op == CommOp::kGather;
        e.bytes = !gathered ? execution.sizes.bytes
                  : group   ? execution.sizes.bytes * static_cast<uint64_t>(group->size)
                            : 0;
      } else {
        counters_.add(counter::kKinetoC10dUnexecuted, 1);
      }
      // A call's own end is not its completion: only executed ones bound the clocks.
      if (group && executed && every_rank_needs_every_other(call.op)) {
        collectives_.records.push_back({hash, e.seq, e.begin_ns, e.end_ns, call.op, MatchKey::kSeq});
      }
      if (executed && synchronous(call, e.end_ns)) e.track = call.track;
      add(e);
      if (executed) {
        e.track = call.track;
        completed.push_back(e);
      }
    }
    infer_waits(completed);
  }

  // A calling thread silent from before its collective completed until just
  // after it waited for it (kMaxResumeNs): the trace's only sign of the
  // waits in Work.wait and in DDP's wait for its buckets. A silence that
  // ends after several completions waited for the last of them.
  // The silence of `track` that holds `completed_ns` and ends just after it
  // (kMaxResumeNs): the thread waited for what completed then. Its index, or
  // none.
  std::optional<size_t> silence_ended_by(uint16_t track, int64_t completed_ns) {
    const auto& silences = thread_activity(track).silences;
    const auto after = std::upper_bound(silences.begin(), silences.end(), completed_ns,
                                        [](int64_t t, const std::pair<int64_t, int64_t>& s) { return t < s.second; });
    if (after == silences.end() || after->first >= completed_ns || after->second - completed_ns > kMaxResumeNs) {
      return std::nullopt;
    }
    return static_cast<size_t>(after - silences.begin());
  }

  // A call made outside backward, the last op of its thread before it fell
  // silent until the call completed: synchronous (async_op=False, a loss
  // averaged for the log), on its thread's track as the Python hook records
  // it. Inside backward a call is DDP's or FSDP's, asynchronous even where
  // backward's last one is waited for at once.
  bool synchronous(const C10dCall& call, int64_t completed_ns) {
    if (call.from_backward) return false;
    const std::optional<size_t> silence = silence_ended_by(call.track, completed_ns);
    return silence && thread_activity(call.track).silences[*silence].first == call.end_ns;
  }

  void infer_waits(const std::vector<Event>& completed) {
    std::map<std::pair<uint16_t, size_t>, const Event*> waited;  // by thread and silence
    for (const Event& done : completed) {
      const std::optional<size_t> silence = silence_ended_by(done.track, done.end_ns);
      if (!silence) continue;
      const auto [it, added] = waited.try_emplace({done.track, *silence}, &done);
      if (!added && done.end_ns > it->second->end_ns) it->second = &done;
    }
    for (const auto& [silence, done] : waited) {
      Event e = *done;
      e.kind = EventKind::kTorchWait;
      e.begin_ns = activity_[silence.first].silences[silence.second].first;
      e.bytes = 0;
      e.datatype = DataType::kNone;
      e.name_id = intern("wait for " + names_[done->name_id] + " (inferred)");
      add(e);
    }
    counters_.add(counter::kKinetoC10dWaitsInferred, waited.size());
  }

  bool matches_pattern(uint32_t name_id) {
    if (patterns_.empty()) return false;
    if (name_id >= pattern_match_.size()) pattern_match_.resize(name_id + 1, -1);
    int8_t& cached = pattern_match_[name_id];
    if (cached < 0) {
      cached = 0;
      for (size_t p = 0; p < patterns_.size(); ++p) {
        if (std::regex_search(names_[name_id], patterns_[p])) cached = 1, patterns_matched_[p] = true;
      }
    }
    return cached == 1;
  }

  void instant(const Fields& f, uint64_t index, uint64_t offset) {
    // The profiler's own markers ("Iteration Start: PyTorch Profiler",
    // "Record Window End") are a trace's only global-scope instants. They
    // mark the profiler's window, not the program's work: kept, they would
    // stretch the rank's span, and a trace without ProfilerStep ranges has
    // that span as its one step.
    if (f.scope == "g") return;
    int64_t begin = 0, end = 0;
    if (!times(f, index, offset, false, begin, end)) return;
    Event e{};
    e.begin_ns = e.end_ns = begin;
    e.peer = kNoPeer;
    if (!f.total_allocated.empty()) {
      // The caching allocator's [memory] events: a counter of bytes allocated.
      int64_t allocated = 0;
      if (!parse_int(f.total_allocated, allocated) || allocated < 0) return;
      int64_t device = -1;
      parse_int(f.device_id, device);
      e.kind = EventKind::kCounter;
      e.bytes = static_cast<uint64_t>(allocated);
      e.track = counter_track("memory allocated" + (device >= 0 ? " (device " + std::to_string(device) + ")" : ""));
    } else {
      e.kind = EventKind::kInstant;
      e.track = thread_track(f.pid, f.tid);
    }
    e.name_id = intern(f.has_name ? f.name : std::string_view("(no name)"));
    add(e);
  }

  void counter_sample(const Fields& f, uint64_t index, uint64_t offset) {
    int64_t begin = 0, end = 0;
    if (!times(f, index, offset, false, begin, end)) return;
    int64_t milli = 0;  // counters keep whole values: fractions are rounded
    if (f.counter_key.empty() || !parse_milli(f.counter_value, milli) || milli < 0) {
      counters_.add(rankscope::counter::kKinetoUnsupported, 1);
      return;
    }
    const int64_t value = (milli + 500) / 1000;
    Event e{};
    e.begin_ns = e.end_ns = begin;
    e.peer = kNoPeer;
    e.kind = EventKind::kCounter;
    e.bytes = static_cast<uint64_t>(value);
    const std::string name = std::string(f.name) + " " + std::string(f.counter_key);
    e.track = counter_track(name);
    e.name_id = intern(name);
    add(e);
  }

  void metadata(const Fields& f) {
    if (f.name == "thread_name" && !f.meta_name.empty()) {
      thread_names_[thread_key(f.pid, f.tid)] = std::string(f.meta_name);
    }
  }

  // ------------------------------------------------------------ tracks ---

  static uint64_t thread_key(std::string_view pid, std::string_view tid) {
    return (hash_bytes(pid) * 0x9E3779B97F4A7C15ull ^ hash_bytes(tid)) & ~(uint64_t{3} << 62);
  }

  uint16_t thread_track(std::string_view pid, std::string_view tid) {
    const uint64_t key = thread_key(pid, tid);
    const auto found = track_ids_.find(key);
    if (found != track_ids_.end()) return found->second;
    int64_t os_id = 0;
    if (!parse_int(tid, os_id)) os_id = static_cast<int64_t>(hash_bytes(tid) >> 1);
    return new_track(key, TrackType::kThread, static_cast<uint64_t>(os_id), -1,
                     "thread " + std::string(tid) + " (pid " + std::string(pid) + ")");
  }

  uint16_t gpu_track(int64_t device, int64_t stream) {
    const uint64_t key = (uint64_t{1} << 63) | (static_cast<uint64_t>(device & 0xffff) << 32) |
                         static_cast<uint32_t>(stream);
    const auto found = track_ids_.find(key);
    if (found != track_ids_.end()) return found->second;
    return new_track(key, TrackType::kCudaStream, static_cast<uint64_t>(stream), static_cast<int16_t>(device),
                     "stream " + std::to_string(stream));
  }

  // `group` null: its `candidates` groups list the rank.
  uint16_t process_group_track(const ProcessGroupMembers* group, uint64_t hash, size_t candidates) {
    const uint64_t key = (uint64_t{3} << 62) | (hash >> 2);
    const auto found = track_ids_.find(key);
    if (found != track_ids_.end()) return found->second;
    const std::string name =
        group ? "torch.distributed group " + group->name + " (" +
                    (group->description.empty() ? "no description" : group->description) + ", " +
                    std::to_string(group->size) + " ranks" + (summary_.backend.empty() ? "" : ", " + summary_.backend) +
                    ")"
              : "torch.distributed group not known (distributedInfo.pg_config lists rank " +
                    std::to_string(summary_.rank) + " in " + std::to_string(candidates) + " groups)";
    return new_track(key, TrackType::kProcessGroup, hash, -1, name);
  }

  uint16_t counter_track(const std::string& name) {
    const uint64_t key = (uint64_t{1} << 62) | (hash_bytes(name) >> 2);
    const auto found = track_ids_.find(key);
    if (found != track_ids_.end()) return found->second;
    return new_track(key, TrackType::kCounter, 0, -1, name);
  }

  uint16_t new_track(uint64_t key, TrackType type, uint64_t os_id, int16_t device, const std::string& name) {
    if (tracks_.size() > UINT16_MAX) {
      // More threads and streams than a track id holds: the rest share the last.
      return UINT16_MAX;
    }
    const auto id = static_cast<uint16_t>(tracks_.size());
    Track track{};
    track.os_id = os_id;
    track.id = id;
    track.name_id = intern(name);
    track.device = device;
    track.type = type;
    tracks_.push_back(track);
    track_keys_.push_back(key);
    buffers_.emplace_back();
    track_ids_.emplace(key, id);
    return id;
  }

  // ------------------------------------------------------------ output ---

  uint32_t intern(std::string_view name) {
    const auto found = name_ids_.find(name);
    if (found != name_ids_.end()) return found->second;
    const auto id = static_cast<uint32_t>(names_.size());
    names_.emplace_back(name);
    name_ids_.emplace(names_.back(), id);
    return id;
  }

  void add(const Event& e) {
    summary_.first_ns = std::min(summary_.first_ns, e.begin_ns);
    summary_.last_ns = std::max(summary_.last_ns, e.end_ns);
    ++summary_.events;
    const size_t track = std::min<size_t>(e.track, buffers_.size() - 1);
    auto& buffer = buffers_[track];
    // Written before the next is added, so the last event stays until a flow may link it.
    if (buffer.size() >= kTrackChunkEvents) write(buffer);
    buffer.push_back(e);
    const bool linked_kind = e.kind == EventKind::kCudaApi || e.kind == EventKind::kGpuKernel ||
                             e.kind == EventKind::kGpuMemcpy || e.kind == EventKind::kGpuMemset;
    if (linked_kind && e.correlation_id == 0) unlinked_ = {true, false, track, buffer.size() - 1, e.begin_ns};
  }

  // A launch -> GPU flow ("ac2g", its id the correlation id) follows the
  // event it binds, at the same time: it gives that event its correlation
  // id when the event's own arguments had none.
  void flow(const Fields& f, const Unlinked& previous) {
    if (f.cat != "ac2g" || !previous.valid) return;
    int64_t at = 0;
    uint64_t id = 0;
    if (!parse_milli(f.ts, at) || at != previous.begin_ns || parse_id(f.id, id) != IdStatus::kOk) return;
    Event& e = previous.held ? pending_[previous.index] : buffers_[previous.buffer][previous.index];
    e.correlation_id = id;
  }

  void write(std::vector<Event>& events) {
    if (!shard_path_.empty() && !(open_shard() && writer_.write_events(events))) throw Error(writer_.error());
    events.clear();
  }

  // Opened at the first write, once distributedInfo (which precedes the
  // events) has said the rank; the metadata written at finish has the last word.
  bool open_shard() {
    if (writer_.is_open()) return true;
    RankMetadata metadata;
    metadata.rank = summary_.rank >= 0 ? summary_.rank : std::max(0, rank_from_file_name(summary_.path));
    metadata.world_size = summary_.world_size;
    return writer_.open(shard_path_, metadata, 0);
  }

  // ---------------------------------------------------------- problems ---

  void skip(std::string_view counter_name, uint64_t index, uint64_t offset, const std::string& why) {
    counters_.add(counter_name, 1);
    problem(index, offset, why + "; skipped");
  }

  void problem(uint64_t index, uint64_t offset, const std::string& what) {
    ++summary_.problems;
    if (summary_.problem_lines.size() < settings_.max_problems_kept) {
      summary_.problem_lines.push_back(summary_.path + ": event " + std::to_string(index) + " (byte " +
                                       std::to_string(offset) + "): " + what);
    }
  }

  void problem_line(const std::string& line) {
    ++summary_.problems;
    if (summary_.problem_lines.size() < settings_.max_problems_kept) summary_.problem_lines.push_back(line);
  }

  // What the whole file lacks, said once: shown even past the cap.
  void file_problem(const std::string& line) {
    ++summary_.problems;
    summary_.problem_lines.push_back(line);
  }

  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  std::string shard_path_;
  const ImportSettings& settings_;
  std::vector<std::regex> patterns_;
  std::vector<int8_t> pattern_match_;  // per name: -1 not looked at, 0 no, 1 yes
  od::parser parser_;
  ShardWriter writer_;
  std::deque<std::string> names_;
  std::unordered_map<std::string_view, uint32_t, NameHash, std::equal_to<>> name_ids_;
  std::vector<Track> tracks_;
  std::vector<uint64_t> track_keys_;
  std::unordered_map<uint64_t, uint16_t> track_ids_;
  std::unordered_map<uint64_t, std::string> thread_names_;
  std::vector<std::vector<Event>> buffers_;
  std::vector<Event> pending_;
  std::unordered_map<uint64_t, CollectiveInfo> launched_by_;  // record_param_comms by External id
  std::vector<ProcessGroupMembers> groups_;     // distributedInfo.pg_config
  std::vector<C10dCall> c10d_calls_;            // held until the trace is read
  std::vector<GlooExecution> gloo_executions_;  // likewise
  std::vector<ThreadActivity> activity_;        // by track
  od::parser shapes_parser_;                    // record_shapes' arrays, inside an event parser_ holds
  Unlinked unlinked_;  // the last event that came without a correlation id
  uint64_t kernels_ = 0;          // kernel events seen, communication kernels included
  uint64_t kernel_launches_ = 0;  // runtime calls that launch kernels
  // Unknown categories already named, no more than the problems a file shows.
  std::set<std::string, std::less<>> named_categories_;
  std::string schema_, nccl_version_;
  int64_t pid_ = 0;
};

TraceImport::TraceImport(std::string trace_path, std::string shard_path, const ImportSettings& settings)
    : impl_(std::make_unique<Impl>(std::move(trace_path), std::move(shard_path), settings)) {}
TraceImport::~TraceImport() = default;

void TraceImport::read() { impl_->read(true, {}); }
void TraceImport::read_text(std::string_view text) { impl_->read(false, text); }
const TraceSummary& TraceImport::summary() const { return impl_->summary_; }
const RankCollectives& TraceImport::collectives() const { return impl_->collectives_; }
const Counters& TraceImport::counters() const { return impl_->counters_; }
const std::vector<bool>& TraceImport::patterns_matched() const { return impl_->patterns_matched_; }

void TraceImport::finish(const ImportedJob& job, const RankAlignment& alignment, const std::vector<uint64_t>& instances,
                         uint64_t unmatched) {
  impl_->finish(job, alignment, instances, unmatched);
}

int32_t rank_from_file_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  std::string name = path.substr(slash == std::string::npos ? 0 : slash + 1);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (size_t at = name.find("rank"); at != std::string::npos; at = name.find("rank", at + 1)) {
    size_t p = at + 4;
    while (p < name.size() && (name[p] == '-' || name[p] == '_' || name[p] == '.' || name[p] == ' ')) ++p;
    size_t digits = 0;
    int64_t value = 0;
    while (p + digits < name.size() && std::isdigit(static_cast<unsigned char>(name[p + digits])) && digits < 9) {
      value = value * 10 + (name[p + digits] - '0');
      ++digits;
    }
    if (digits > 0) return static_cast<int32_t>(value);
  }
  return -1;
}

}  // namespace rankscope::kineto
