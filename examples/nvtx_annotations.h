// ddp_sim's NVTX annotations. A build without the NVTX3 headers defines
// DDP_SIM_HAVE_NVTX=0 and gets the same classes, empty, so the program is the
// same apart from the annotations.
#pragma once

#if DDP_SIM_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>

#include <string>
#include <vector>
#endif

namespace ddp_sim::nvtx {

#if DDP_SIM_HAVE_NVTX

// A range in NVTX's default domain, open for the object's lifetime.
class ScopedRange {
 public:
  explicit ScopedRange(const char* name) { nvtxRangePushA(name); }
  ~ScopedRange() { nvtxRangePop(); }
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;
};

inline void mark(const char* message) { nvtxMarkA(message); }

// The "ddp_sim" domain, which holds the "ProfilerStep#<n>" ranges. Their names
// are registered once, up front, as a long training loop would do, so that a
// profiler meets registered strings and a domain other than the default.
class StepDomain {
 public:
  explicit StepDomain(int steps) : domain_(nvtxDomainCreateA("ddp_sim")) {
    step_names_.reserve(static_cast<std::size_t>(steps));
    for (int step = 0; step < steps; ++step) {
      const std::string name = "ProfilerStep#" + std::to_string(step);
      step_names_.push_back(nvtxDomainRegisterStringA(domain_, name.c_str()));
    }
  }
  ~StepDomain() { nvtxDomainDestroy(domain_); }
  StepDomain(const StepDomain&) = delete;
  StepDomain& operator=(const StepDomain&) = delete;

  void push_step(int step) {
    nvtxEventAttributes_t attributes{};
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    attributes.message.registered = step_names_.at(static_cast<std::size_t>(step));
    nvtxDomainRangePushEx(domain_, &attributes);
  }
  void pop_step() { nvtxDomainRangePop(domain_); }

 private:
  nvtxDomainHandle_t domain_;
  std::vector<nvtxStringHandle_t> step_names_;
};

#else

class ScopedRange {
 public:
  explicit ScopedRange(const char*) {}
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;
};

inline void mark(const char*) {}

class StepDomain {
 public:
  explicit StepDomain(int) {}
  void push_step(int) {}
  void pop_step() {}
};

#endif

// "ProfilerStep#<step>" in the step domain, open for the object's lifetime.
class StepRange {
 public:
  StepRange(StepDomain& domain, int step) : domain_(domain) { domain_.push_step(step); }
  ~StepRange() { domain_.pop_step(); }
  StepRange(const StepRange&) = delete;
  StepRange& operator=(const StepRange&) = delete;

 private:
  StepDomain& domain_;
};

}  // namespace ddp_sim::nvtx
