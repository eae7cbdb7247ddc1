// The capture sources that live inside the capture library (NVTX, CUPTI,
// NCCL's profiler plugin). Each is compiled in only when the build found what
// it needs (cmake/CudaCapture.cmake); the agent starts the ones that are both
// built and requested. MPI capture is the separate MPI shim.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "rankscope/model/event.h"
#include "rankscope/rank_agent/agent_settings.h"

namespace rankscope::agent {

class CaptureSource {
 public:
  virtual ~CaptureSource() = default;
  virtual uint32_t bit() const = 0;  // its CaptureBit (agent.h), which names it
  // Called once, when the agent starts with this source requested. False
  // leaves the source off; `why_not` then says why, in one line.
  virtual bool start(const AgentSettings& settings, std::string& why_not) = 0;
  // Called at finish, before the last flush: hand over what is still held.
  virtual void stop() = 0;
  // What the source holds open now (ranges begun, not ended), as incomplete
  // events ending at `now`: part of the state a hang writes out. Called on
  // the writer thread while the application runs.
  virtual void add_open_events(int64_t now, std::vector<Event>& out) const {
    static_cast<void>(now);
    static_cast<void>(out);
  }
};


// The sources this build has.
std::span<CaptureSource* const> built_capture_sources();

}  // namespace rankscope::agent
