// Whether shards are of one job, by the job identity each rank's agent
// recorded (model/metadata.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "rankscope/model/metadata.h"

namespace rankscope {

// Throws Error naming two of the shards (path, identity) whose identities
// contradict each other, with both identities. Shards without an identity
// pass: what they lack cannot contradict.
void check_one_job(const std::vector<std::pair<std::string, JobIdentity>>& shards);

}  // namespace rankscope
