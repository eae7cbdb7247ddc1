#include "one_job.h"

#include "rankscope/model/error.h"

namespace rankscope {

void check_one_job(const std::vector<std::pair<std::string, JobIdentity>>& shards) {
  // Each part of the job's identity as the first shard that knows it says;
  // every later shard must agree with both.
  const std::pair<std::string, JobIdentity>* named = nullptr;
  const std::pair<std::string, JobIdentity>* started = nullptr;
  for (const auto& shard : shards) {
    for (const auto* first : {named, started}) {
      if (first && first->second.contradicts(shard.second)) {
        throw Error(first->first + " and " + shard.first + " are shards of different jobs: " +
                    first->second.text() + "; and " + shard.second.text());
      }
    }
    if (!named && !shard.second.id.empty()) named = &shard;
    if (!started && shard.second.start_wall_ns != 0) started = &shard;
  }
}

}  // namespace rankscope
