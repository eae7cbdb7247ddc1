// Capture sources, as named in `run --capture`, RANKSCOPE_CAPTURE and the
// capture list each shard records: the one table the agent, the launcher and
// the analyses take their names from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rankscope {

enum CaptureBit : uint32_t {
  kCaptureMpi = 1 << 0,
  kCaptureNvtx = 1 << 1,
  kCaptureCuda = 1 << 2,
  kCaptureNccl = 1 << 3,
  kCapturePython = 1 << 4,  // rankscope's hook in a Python interpreter: torch's steps, phases and c10d
};

// The capture sources by name: the one table --capture, RANKSCOPE_CAPTURE
// and the agent's messages take their names from.
struct CaptureSourceName {
  std::string_view name;   // in --capture
  std::string_view label;  // in messages ("CUDA capture is off: ...")
  CaptureBit bit;
};
inline constexpr CaptureSourceName kCaptureSourceNames[] = {
    {"mpi", "MPI", kCaptureMpi},    {"nvtx", "NVTX", kCaptureNvtx},         {"cuda", "CUDA", kCaptureCuda},
    {"nccl", "NCCL", kCaptureNccl}, {"python", "Python", kCapturePython}};
inline constexpr std::string_view kDefaultCapture = "mpi,nvtx,python";
inline constexpr std::string_view kKnownCaptureSources = "mpi, nvtx, cuda, nccl, python";

// The CaptureBits of a comma-separated list of source names. An unknown name
// is left out and, when `unknown` is given, the first is put there.
constexpr uint32_t parse_capture_list(std::string_view text, std::string_view* unknown = nullptr) {
  uint32_t bits = 0;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    bool known = false;
    for (const CaptureSourceName& source : kCaptureSourceNames) {
      if (source.name == item) bits |= source.bit, known = true;
    }
    if (!known && unknown && unknown->empty()) *unknown = item.empty() ? std::string_view("(empty)") : item;
  }
  return bits;
}

constexpr std::string_view capture_source_label(uint32_t bit) {
  for (const CaptureSourceName& source : kCaptureSourceNames) {
    if (source.bit == bit) return source.label;
  }
  return "?";
}

}  // namespace rankscope
