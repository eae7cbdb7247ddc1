// A shard read back whole, for tests that check what a capture or an import wrote.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rankscope/model/event.h"
#include "rankscope/model/shard.h"

namespace rankscope::testing {

struct ShardContents {
  ShardScan scan;
  std::vector<Event> events;  // every chunk's, in file order
  std::map<uint32_t, std::string> names;
  std::map<uint32_t, std::string> track_names;  // by track id

  std::vector<Event> named(const std::string& name) const;
  std::string name(uint32_t id) const;  // "" when the shard has no such name
  const Track* track(uint32_t id) const;  // nullptr when the shard has no such track
};

// Throws Error when the file is no shard.
ShardContents read_shard(const std::string& path);

}  // namespace rankscope::testing
