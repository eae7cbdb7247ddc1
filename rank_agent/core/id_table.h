// A map from content to dense ids that many threads use at once without
// locks or allocation: open addressing over a fixed array of slots, each slot
// claimed with one compare-and-swap. The content itself lives with the caller,
// indexed by id; the table only says which id holds what hash.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "zero_pages.h"

namespace rankscope::agent {

inline constexpr uint32_t kNoId = UINT32_MAX;

class ConcurrentIdTable {
 public:
  // `slots` must be a power of two, at least twice `max_ids`.
  ConcurrentIdTable(uint32_t slots, uint32_t max_ids)
      : mask_(slots - 1), max_ids_(max_ids), slots_(slots), states_(max_ids) {}

  // The id of the item with this hash for which same(id) holds; when there is
  // none, a new id, filled in by create(id), which returns false if the
  // caller's storage is full. kNoId when the table or the storage is full.
  template <typename Same, typename Create>
  uint32_t find_or_add(uint64_t hash, Same&& same, Create&& create) {
    return look_up<true>(hash, same, create);
  }

  // The id of the item with this hash for which same(id) holds; kNoId when there is none.
  template <typename Same>
  uint32_t find(uint64_t hash, Same&& same) {
    const auto never = [](uint32_t) { return false; };
    return look_up<false>(hash, same, never);
  }

  enum class IdState : uint8_t { kFilling = 0, kReady, kAbandoned };

  // Ids handed out so far; the content of each is readable once its state is kReady.
  uint32_t size() const {
    const uint32_t n = next_id_.load(std::memory_order_acquire);
    return n < max_ids_ ? n : max_ids_;
  }
  IdState state(uint32_t id) const { return states_[id].load(std::memory_order_acquire); }

 private:
  static constexpr uint64_t kIdMask = 0xFFFFFFFFu;
  static constexpr uint64_t kTagMask = ~kIdMask;
  static constexpr uint64_t kFilling = 0xFFFFFFFFu;
  static constexpr uint64_t kAbandoned = 0xFFFFFFFEu;

  template <bool kAdd, typename Same, typename Create>
  uint32_t look_up(uint64_t hash, Same& same, Create& create) {
    const uint64_t tag = (hash >> 32 | 1) << 32;  // never 0, so an empty slot is 0
    for (uint32_t probe = 0; probe <= mask_; ++probe) {
      std::atomic<uint64_t>& slot = slots_[(hash + probe) & mask_];
      uint64_t seen = slot.load(std::memory_order_acquire);
      if (seen == 0) {
        if constexpr (!kAdd) return kNoId;
        if (slot.compare_exchange_strong(seen, tag | kFilling, std::memory_order_acq_rel)) {
          return fill(slot, tag, create);
        }
      }
      if ((seen & kTagMask) != tag) continue;
      while ((seen & kIdMask) == kFilling) {  // another thread is writing this very content
        seen = slot.load(std::memory_order_acquire);
      }
      if ((seen & kIdMask) == kAbandoned) continue;
      const auto id = static_cast<uint32_t>(seen & kIdMask) - 1;
      if (same(id)) return id;
    }
    return kNoId;
  }

  template <typename Create>
  uint32_t fill(std::atomic<uint64_t>& slot, uint64_t tag, Create& create) {
    const uint32_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
    if (id >= max_ids_ || !create(id)) {
      if (id < max_ids_) states_[id].store(IdState::kAbandoned, std::memory_order_release);
      // The slot stays claimed so that probes for other content pass it.
      slot.store(tag | kAbandoned, std::memory_order_release);
      return kNoId;
    }
    states_[id].store(IdState::kReady, std::memory_order_release);
    slot.store(tag | (uint64_t{id} + 1), std::memory_order_release);
    return id;
  }

  const uint32_t mask_;
  const uint32_t max_ids_;
  ZeroPages<std::atomic<uint64_t>> slots_;  // 0: empty
  ZeroPages<std::atomic<IdState>> states_;   // 0: kFilling
  std::atomic<uint32_t> next_id_{0};
};

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

}  // namespace rankscope::agent
