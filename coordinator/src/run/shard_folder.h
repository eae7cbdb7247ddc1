// The folder the ranks write their shards into while the job runs: claimed
// for one job before any shard is written, removed once the timeline holds
// what it kept.
#pragma once

#include <filesystem>
#include <string>

#include "run/identity.h"

namespace rankscope::launch {

// Made, and claimed for this job, before any rank's application can write
// there; an earlier job's shards (its only record) are never written over.
void prepare_shard_folder(const std::filesystem::path& shard_dir, const Identity& id);

bool holds_shards(const std::filesystem::path& shard_dir);

// Whether every rank's shard says its rank reached MPI_Finalize: complete
// as the merge will call it, with the shim's work in MPI_Finalize counted.
bool every_rank_finalized(const std::filesystem::path& shard_dir, int world_size);

// The file torchrun's workers under sidecar RANK list their shards in.
std::string worker_list_name(int rank);

// Once the timeline holds them; a shard that cannot be removed is said.
void remove_merged_shards(const std::filesystem::path& shard_dir, int world_size);

// Once no shard is left in the folder, what the job kept beside them goes, and the folder with it.
void remove_shard_folder(const std::filesystem::path& shard_dir);

// Nodes without a shared file system: `ranks_elsewhere` ranks wrote their
// shards into a folder of the same name on their own node. Said, with how
// to merge them into `output`.
void report_unshared_folder(const std::filesystem::path& shard_dir, const std::string& output, int ranks_elsewhere,
                            int world_size);

}  // namespace rankscope::launch
