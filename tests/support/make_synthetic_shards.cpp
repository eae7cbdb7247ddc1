// make_synthetic_shards DIR RANKS EVENTS_PER_RANK [--dead R] [--seed S] [--threads T] [--skewed 0|1]
//                       [--shared-collectives 0|1] [--misclocked-rank R --misclock-ns NS] [--messages 0|1]
//                       [--job-id ID] [--gpu-kernel-names N]
// Writes a synthetic job's shards, for the CLI tests, the demo and the merge
// benchmark; the options are SyntheticJob's (synthetic_job.h).
#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <cstring>
#include <string>

#include "rankscope/model/error.h"
#include "rankscope/model/shard.h"
#include "synthetic_job.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: %s DIR RANKS EVENTS_PER_RANK [--dead RANK] [--seed S] [--threads T] [--skewed 0|1]\n"
                 "       [--shared-collectives 0|1] [--misclocked-rank RANK --misclock-ns NS] [--messages 0|1]\n"
                 "       [--job-id ID] [--gpu-kernel-names N]\n",
                 argv[0]);
    return 2;
  }
  rankscope::testing::SyntheticJob job;
  job.world_size = std::atoi(argv[2]);
  job.events_per_rank = std::strtoull(argv[3], nullptr, 10);
  job.chunk_events = 16384;
  job.keep_truth = false;
  int dead = -1;
  for (int i = 4; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--dead") == 0) dead = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--seed") == 0) job.seed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (std::strcmp(argv[i], "--threads") == 0) job.threads = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--skewed") == 0) job.skewed = std::atoi(argv[i + 1]) != 0;
    else if (std::strcmp(argv[i], "--shared-collectives") == 0) job.shared_collectives = std::atoi(argv[i + 1]) != 0;
    else if (std::strcmp(argv[i], "--misclocked-rank") == 0) job.misclocked_rank = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--misclock-ns") == 0) job.misclock_ns = std::strtoll(argv[i + 1], nullptr, 10);
    else if (std::strcmp(argv[i], "--messages") == 0) job.messages = std::atoi(argv[i + 1]) != 0;
    else if (std::strcmp(argv[i], "--job-id") == 0) job.job.id = argv[i + 1];
    else if (std::strcmp(argv[i], "--gpu-kernel-names") == 0) job.gpu_kernel_names = std::stoul(argv[i + 1]);
  }
  try {
    std::filesystem::create_directories(argv[1]);
    for (int32_t r = 0; r < job.world_size; ++r) {
      rankscope::testing::SyntheticJob rank_job = job;
      rank_job.close_cleanly = r != dead;
      rankscope::testing::write_synthetic_rank(argv[1] + ("/" + rankscope::shard_file_name(r)), r, rank_job);
    }
  } catch (const rankscope::Error& e) {
    std::fprintf(stderr, "make_synthetic_shards: %s\n", e.what());
    return 1;
  }
  return 0;
}
