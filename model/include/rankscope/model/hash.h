// The one string hash of the project: names, communicator identities and
// process groups hash alike in the agent and in the importers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rankscope {

// FNV-1a: the strings hashed are short names, where it is as fast as anything.
inline uint64_t hash_bytes(const char* data, size_t size, uint64_t seed = 0xcbf29ce484222325ull) {
  uint64_t h = seed;
  for (size_t i = 0; i < size; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

inline uint64_t hash_bytes(std::string_view text) { return hash_bytes(text.data(), text.size()); }

// A torch.distributed process group's identity, equal on every member: from
// its name, which c10d makes the same on every member; apart from MPI's
// communicators and NCCL's, which hash other things.
inline uint64_t process_group_hash(std::string_view group_name) {
  constexpr std::string_view kPrefix = "torch.distributed process group ";
  return hash_bytes(group_name.data(), group_name.size(), hash_bytes(kPrefix));
}

}  // namespace rankscope
