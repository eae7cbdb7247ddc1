// Where torch.distributed's rendezvous meets, for programs run in sidecar
// mode: rank 0's host and a port on it.
#pragma once

#include <string>

namespace rankscope::launch {

// Where the other hosts reach rank 0's host (a MASTER_ADDR the user set wins).
std::string master_address();

// A port free on rank 0's host now, unless the user set MASTER_PORT.
int given_or_free_port();

}  // namespace rankscope::launch
