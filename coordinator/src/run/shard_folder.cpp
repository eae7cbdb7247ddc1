#include "run/shard_folder.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string_view>
#include <system_error>

#include "rankscope/merge/rank_status.h"
#include "rankscope/model/counters.h"
#include "rankscope/model/error.h"
#include "rankscope/model/shard.h"
#include "rankscope/rank_agent/agent.h"

namespace rankscope::launch {

namespace fs = std::filesystem;

namespace {

// Every rank of one job writes the same mark into the shard folder before its
// application can write a shard. A folder whose mark names another job, or
// that holds shards and no mark, holds what an earlier job left there (it
// ended without MPI_Finalize, or its timeline could not be written): that
// job's only record, never written over.
constexpr const char* kJobMarkFileName = "job";

// The same in every rank of the job and no other; empty where the launcher
// names no job and there are several ranks, which then cannot tell theirs.
std::string job_mark(const Identity& id) {
  if (!id.job_id.empty()) return id.job_id;
  return id.world_size == 1 ? "pid:" + std::to_string(::getpid()) : std::string();
}

std::optional<std::string> read_job_mark(const fs::path& path) {
  std::FILE* file = std::fopen(path.c_str(), "r");
  if (!file) return std::nullopt;
  char text[512] = {};
  const size_t length = std::fread(text, 1, sizeof(text) - 1, file);
  std::fclose(file);
  return std::string(text, length);
}

constexpr std::string_view kWorkerListPrefix = "torchrun-workers-";

void claim_shard_folder(const fs::path& shard_dir, const Identity& id) {
  const std::string mark = job_mark(id);
  if (mark.empty()) return;
  const fs::path mark_path = shard_dir / kJobMarkFileName;
  const auto refuse = [&](const std::string& other_job) {
    if (shard_folder_in_use(shard_dir.string())) {
      throw Error("cannot write the shards to " + shard_dir.string() + ": a job still running writes its shards there" +
                  (other_job.empty() ? std::string() : " (" + other_job + ")") + "; wait for it to end, or choose another -o");
    }
    throw Error("cannot write the shards to " + shard_dir.string() + ": it holds the shards of an earlier job" +
                (other_job.empty() ? std::string() : " (" + other_job + ")") + ", its only record; merge them with `" +
                "rankscope merge " + shard_dir.string() + " -o FILE` and then remove the folder, or choose another -o");
  };
  // Twice at most: a rank of this job may put its mark in place between our look and our own.
  for (int look = 0; look < 2; ++look) {
    // Shards first, the mark second: a rank of this job places the mark before
    // its application writes, so shards seen before a look that finds no mark
    // are an earlier job's, while shards of this job's faster ranks come with
    // its mark.
    const bool had_shards = holds_shards(shard_dir);
    if (const auto found = read_job_mark(mark_path)) {
      if (*found != mark) refuse(*found);
      return;
    }
    if (had_shards) refuse("");
    // Written whole, then put in place unless another rank was first.
    const fs::path partial = shard_dir / (std::string(kJobMarkFileName) + "." + std::to_string(::getpid()) + ".partial");
    std::FILE* file = std::fopen(partial.c_str(), "w");
    bool written = file && std::fwrite(mark.data(), 1, mark.size(), file) == mark.size();
    if (file) written = std::fclose(file) == 0 && written;
    if (!written) throw Error("cannot write " + partial.string() + ": " + errno_text(errno));
    const int placed = ::link(partial.c_str(), mark_path.c_str());
    const int link_error = errno;
    std::error_code ignored;
    fs::remove(partial, ignored);
    if (placed == 0) return;
    if (link_error != EEXIST) throw Error("cannot write " + mark_path.string() + ": " + errno_text(link_error));
  }
}

}  // namespace

bool every_rank_finalized(const fs::path& shard_dir, int world_size) {
  for (int rank = 0; rank < world_size; ++rank) {
    try {
      const ShardScan scan = ShardFile((shard_dir / shard_file_name(rank)).string()).scan();
      if (shard_rank_status(scan) != RankStatus::kComplete || scan.counters.get(counter::kCostMpiFinalizeNs) == 0) {
        return false;
      }
    } catch (const Error&) {
      return false;
    }
  }
  return world_size > 0;
}

bool holds_shards(const fs::path& shard_dir) {
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(shard_dir, ignored)) {
    if (is_shard_file(entry.path().filename().string())) return true;
  }
  return false;
}

void prepare_shard_folder(const fs::path& shard_dir, const Identity& id) {
  std::error_code error;
  fs::create_directories(shard_dir, error);
  if (error || ::access(shard_dir.c_str(), W_OK) != 0) {
    throw Error("cannot write the shards to " + shard_dir.string() + ": " +
                (error ? error.message() : std::strerror(errno)) + " (choose another -o)");
  }
  claim_shard_folder(shard_dir, id);
}

std::string worker_list_name(int rank) { return std::string(kWorkerListPrefix) + std::to_string(rank); }

// A folder made read-only meanwhile keeps them: said, as they take room the
// user may want back.
void remove_merged_shards(const fs::path& shard_dir, int world_size) {
  std::error_code failed;
  for (int rank = 0; rank < world_size; ++rank) {
    std::error_code error;
    fs::remove(shard_dir / shard_file_name(rank), error);
    if (error && !failed) failed = error;
  }
  if (failed) {
    std::fprintf(stderr, "rankscope run: the timeline is whole, but its shards stay in %s: they cannot be removed (%s)\n",
                 shard_dir.c_str(), failed.message().c_str());
  }
}

void remove_shard_folder(const fs::path& shard_dir) {
  if (holds_shards(shard_dir)) return;
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(shard_dir, ignored)) {
    const std::string name = entry.path().filename().string();
    if (name == agent::kHangFileName || name == agent::kControlFileName || name == kJobMarkFileName ||
        name.starts_with(kWorkerListPrefix)) {
      fs::remove(entry.path(), ignored);
    }
  }
  fs::remove(shard_dir, ignored);
}

// Merging what rank 0 sees would make a timeline of its node alone; the
// shards stay for the user to gather.
void report_unshared_folder(const fs::path& shard_dir, const std::string& output, int ranks_elsewhere,
                            int world_size) {
  std::fprintf(stderr,
               "rankscope run: %s is not one folder shared by every node: %d of %d ranks wrote their shards into a "
               "folder of that name on their own node. No timeline was written; every shard is kept where it was "
               "written. Copy the shard folders of every node into one place and merge them: rankscope merge "
               "FOLDER... -o %s (docs/run.md, \"Nodes without a shared file system\")\n",
               shard_dir.c_str(), ranks_elsewhere, world_size, output.c_str());
}

}  // namespace rankscope::launch
