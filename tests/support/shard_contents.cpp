#include "shard_contents.h"

namespace rankscope::testing {

std::vector<Event> ShardContents::named(const std::string& wanted) const {
  std::vector<Event> out;
  for (const Event& e : events) {
    const auto it = names.find(e.name_id);
    if (it != names.end() && it->second == wanted) out.push_back(e);
  }
  return out;
}

std::string ShardContents::name(uint32_t id) const {
  const auto it = names.find(id);
  return it == names.end() ? std::string() : it->second;
}

const Track* ShardContents::track(uint32_t id) const {
  for (const Track& t : scan.tracks) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

ShardContents read_shard(const std::string& path) {
  ShardContents contents;
  const ShardFile file(path);
  contents.scan = file.scan();
  std::vector<Event> chunk;
  for (const EventChunkRef& ref : contents.scan.event_chunks) {
    file.read_events(ref, chunk);
    contents.events.insert(contents.events.end(), chunk.begin(), chunk.end());
  }
  contents.names.insert(contents.scan.strings.begin(), contents.scan.strings.end());
  for (const Track& track : contents.scan.tracks) contents.track_names[track.id] = contents.name(track.name_id);
  return contents;
}

}  // namespace rankscope::testing
