// The arguments an exported slice carries, by event kind: the same names and
// values in every output format (docs/export.md, "Slices and arguments").
#pragma once

#include <cstdint>
#include <string_view>

#include "rankscope/model/event.h"

namespace rankscope::export_detail {

enum class Arg : uint8_t {
  kBytes, kSeq, kOp, kPeer, kDatatype, kAlgorithm, kProtocol, kCorrelationId, kComm, kTag, kCategory, kFlags,
};
inline constexpr int kArgCount = 12;
inline constexpr std::string_view kArgNames[kArgCount] = {
    "bytes", "seq", "op", "peer", "datatype", "algorithm", "protocol", "correlation_id", "comm", "tag", "category",
    "flags"};
inline std::string_view arg_name(Arg arg) { return kArgNames[static_cast<int>(arg)]; }

// Text arguments are all names of the event model's enums; each has an
// index among them, so a format can intern them (Perfetto does).
inline constexpr int kOpTexts = 0;
inline constexpr int kDataTypeTexts = kOpTexts + kCommOpCount;
inline constexpr int kAlgorithmTexts = kDataTypeTexts + kDataTypeCount;
inline constexpr int kProtocolTexts = kAlgorithmTexts + kAlgorithmCount;
inline constexpr int kEnumTextCount = kProtocolTexts + kProtocolCount;

struct ArgValue {
  // kEnum: `text`, the enum's name, and `number`, its index (kOpTexts...);
  // kHex: an identity (a hash), shown in hex; kInt: the int64's bits.
  enum class Type : uint8_t { kUint, kInt, kEnum, kHex } type;
  uint64_t number = 0;
  std::string_view text;
};

inline bool is_communication_call(EventKind kind) {
  switch (kind) {
    case EventKind::kMpiCollective: case EventKind::kMpiP2p:
    case EventKind::kNcclCollectiveEnqueue: case EventKind::kNcclCollectiveGpu:
    case EventKind::kNcclP2pEnqueue: case EventKind::kNcclP2pGpu:
      return true;
    default:
      return false;
  }
}

inline bool is_cuda(EventKind kind) {
  return kind == EventKind::kCudaApi || kind == EventKind::kGpuKernel || kind == EventKind::kGpuMemcpy ||
         kind == EventKind::kGpuMemset || kind == EventKind::kGpuSync;
}

// visit(Arg, ArgValue) for each argument of `e`; fields that are unset (0,
// none, no peer) are left out, so an event pays only for what it has.
template <typename Visit>
void for_each_argument(const Event& e, Visit&& visit) {
  using Type = ArgValue::Type;
  auto text = [&](Arg arg, int index, std::string_view value) {
    visit(arg, ArgValue{Type::kEnum, static_cast<uint64_t>(index), value});
  };
  auto number = [&](Arg arg, uint64_t value) { visit(arg, ArgValue{Type::kUint, value, {}}); };
  if (is_communication_call(e.kind)) {
    if (e.comm_hash != 0) visit(Arg::kComm, ArgValue{Type::kHex, e.comm_hash, {}});
    number(Arg::kSeq, e.seq);
    if (e.bytes != 0) number(Arg::kBytes, e.bytes);
    if (e.op != CommOp::kNone) text(Arg::kOp, kOpTexts + static_cast<int>(e.op), comm_op_name(e.op));
    if (e.peer != kNoPeer) visit(Arg::kPeer, ArgValue{Type::kInt, static_cast<uint64_t>(int64_t{e.peer}), {}});
    if (e.datatype != DataType::kNone) {
      text(Arg::kDatatype, kDataTypeTexts + static_cast<int>(e.datatype), data_type_name(e.datatype));
    }
    if (e.algorithm != Algorithm::kNone) {
      text(Arg::kAlgorithm, kAlgorithmTexts + static_cast<int>(e.algorithm), algorithm_name(e.algorithm));
    }
    if (e.protocol != Protocol::kNone) {
      text(Arg::kProtocol, kProtocolTexts + static_cast<int>(e.protocol), protocol_name(e.protocol));
    }
    if (e.kind == EventKind::kMpiP2p) {
      number(Arg::kTag, e.correlation_id);  // the MPI shim keeps the tag there
    } else if (e.kind != EventKind::kMpiCollective && e.correlation_id != 0) {
      number(Arg::kCorrelationId, e.correlation_id);
    }
  } else if (is_cuda(e.kind)) {
    if (e.correlation_id != 0) number(Arg::kCorrelationId, e.correlation_id);
    if (e.bytes != 0) number(Arg::kBytes, e.bytes);
  } else if (e.kind == EventKind::kNvtxRange || e.kind == EventKind::kNvtxMark) {
    if (e.seq != 0) number(Arg::kCategory, e.seq);  // NVTX keeps the category in seq
  } else {
    if (e.bytes != 0) number(Arg::kBytes, e.bytes);
    if (e.op != CommOp::kNone) text(Arg::kOp, kOpTexts + static_cast<int>(e.op), comm_op_name(e.op));
  }
  if (e.flags != 0) number(Arg::kFlags, e.flags);
}

}  // namespace rankscope::export_detail
