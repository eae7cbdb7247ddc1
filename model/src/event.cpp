#include "rankscope/model/event.h"

#include <array>

namespace rankscope {
namespace {

constexpr std::array<std::string_view, kEventKindCount + 1> kKindNames = {
    "invalid",        "nvtx_range",     "nvtx_mark", "mpi_call",          "mpi_collective",
    "mpi_p2p",        "cuda_api",       "gpu_kernel", "gpu_memcpy",       "gpu_memset",
    "gpu_sync",       "nccl_coll_enqueue", "nccl_coll_gpu", "nccl_p2p_enqueue", "nccl_p2p_gpu",
    "instant",        "counter",        "torch_collective", "torch_wait"};

constexpr std::array<std::string_view, kCommOpCount> kOpNames = {
    "none",    "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "AllToAll",
    "Gather",  "Scatter",   "Barrier",   "Scan",          "Exscan",    "Send",   "Recv", "SendRecv"};

constexpr std::array<std::string_view, kDataTypeCount> kTypeNames = {
    "none",    "int8",     "uint8",   "int32",   "uint32",    "int64",     "uint64",
    "float16", "bfloat16", "float32", "float64", "float8e4m3", "float8e5m2", "other"};

constexpr std::array<uint32_t, kDataTypeCount> kTypeSizes = {0, 1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 1, 1, 0};

constexpr std::array<std::string_view, kAlgorithmCount> kAlgorithmNames = {
    "none", "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};

constexpr std::array<std::string_view, kProtocolCount> kProtocolNames = {"none", "LL", "LL128", "SIMPLE"};

template <typename Enum, size_t N>
std::string_view lookup(const std::array<std::string_view, N>& names, Enum value) {
  const auto index = static_cast<size_t>(value);
  return index < N ? names[index] : std::string_view("invalid");
}

}  // namespace

std::string_view event_kind_name(EventKind kind) { return lookup(kKindNames, kind); }

std::optional<EventKind> event_kind_from_name(std::string_view name) {
  for (size_t i = 1; i < kKindNames.size(); ++i) {
    if (kKindNames[i] == name) return static_cast<EventKind>(i);
  }
  return std::nullopt;
}

std::string_view comm_op_name(CommOp op) { return lookup(kOpNames, op); }
std::string_view data_type_name(DataType type) { return lookup(kTypeNames, type); }
std::string_view algorithm_name(Algorithm algorithm) { return lookup(kAlgorithmNames, algorithm); }
std::string_view protocol_name(Protocol protocol) { return lookup(kProtocolNames, protocol); }

std::string_view track_type_name(TrackType type) {
  switch (type) {
    case TrackType::kThread: return "thread";
    case TrackType::kCudaStream: return "cuda_stream";
    case TrackType::kNcclComm: return "nccl_comm";
    case TrackType::kCounter: return "counter";
    case TrackType::kMpiComm: return "mpi_comm";
    case TrackType::kNvtxDomain: return "nvtx_domain";
    case TrackType::kProcessGroup: return "process_group";
  }
  return "invalid";
}

uint32_t data_type_size(DataType type) {
  const auto index = static_cast<size_t>(type);
  return index < kTypeSizes.size() ? kTypeSizes[index] : 0;
}

}  // namespace rankscope
