// How NCCL capture ties a collective to the kernel that runs it, through
// CUPTI: around the kernel launch the NCCL source pushes an external
// correlation id (CUPTI's CUSTOM2 kind) on the launching thread; the kernel's
// CUPTI record then arrives with that id, and the CUPTI source records the
// kernel with `correlation_id` = the external id and kFlagExternalCorrelation.
// The NCCL source records the collective with the same id.
#pragma once

#include <cstdint>

namespace rankscope::agent {

// False (and nothing pushed) when CUPTI capture is not running.
bool push_external_correlation(uint64_t id);
void pop_external_correlation();

}  // namespace rankscope::agent
