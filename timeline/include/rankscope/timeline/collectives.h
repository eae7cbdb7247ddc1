// The timeline's table of collectives, matched across ranks: written by
// `rankscope report` after its first pass (docs/format.md, "/collectives").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/model/event.h"

namespace rankscope {

struct CollectiveRow {
  uint64_t comm_hash;
  uint64_t seq;
  uint64_t bytes;
  uint64_t first_participant;  // row in /collectives/participants
  uint32_t participant_count;
  uint32_t name_id;
  int32_t step;                // -1: outside every step
  CommOp op;
  uint8_t source;              // 1 MPI, 2 NCCL
  uint8_t nonblocking;
  DataType datatype;
  Algorithm algorithm;
  Protocol protocol;
};

struct ParticipantRow {
  int32_t rank;
  int64_t enqueue_ns;
  int64_t arrival_ns;
  int64_t start_ns;
  int64_t end_ns;
  int64_t wait_ns;
  int64_t exposed_wait_ns;
  int64_t exposed_transfer_ns;
};

// Writes (or replaces) /collectives/instances and /collectives/participants
// in an existing timeline. Throws Error naming the file.
void write_collectives(const std::string& timeline_path, const std::vector<CollectiveRow>& instances,
                       const std::vector<ParticipantRow>& participants);

}  // namespace rankscope
