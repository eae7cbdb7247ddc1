// DDP's gradient buckets, assigned the way PyTorch assigns them
// (compute_bucket_assignment_by_size in torch/csrc/distributed/c10d/reducer.cpp,
// as called when DDP rebuilds its buckets in gradient-ready order after the
// first iteration). Kept apart from ddp_sim so the rule can be tested alone.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace ddp_sim {

struct Bucket {
  int index = 0;
  std::vector<int> layers;  // in the order backward produces their gradients: highest layer first
  std::size_t bytes = 0;
};

// Layers enter buckets from the last to the first, the order in which backward
// finishes them. The first bucket closes once it holds first_bucket_cap_bytes
// or more, every later one once it holds bucket_cap_bytes or more. Layers are
// never split: the layer that reaches a cap stays in the bucket it fills, so a
// bucket may exceed its cap by up to one layer, and a layer larger than the cap
// that arrives at an empty bucket is a bucket of its own. What is left after
// the lowest layer is the last bucket.
inline std::vector<Bucket> assign_ddp_buckets(std::span<const std::size_t> layer_bytes,
                                              std::size_t first_bucket_cap_bytes, std::size_t bucket_cap_bytes) {
  std::vector<Bucket> buckets;
  Bucket filling;
  auto close = [&] {
    filling.index = static_cast<int>(buckets.size());
    buckets.push_back(std::move(filling));
    filling = Bucket{};
  };
  for (std::size_t layer = layer_bytes.size(); layer-- > 0;) {
    filling.layers.push_back(static_cast<int>(layer));
    filling.bytes += layer_bytes[layer];
    const std::size_t cap = buckets.empty() ? first_bucket_cap_bytes : bucket_cap_bytes;
    if (filling.bytes >= cap) close();
  }
  if (!filling.layers.empty()) close();
  return buckets;
}

}  // namespace ddp_sim
