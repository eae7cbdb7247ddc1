// The DDP bucket rule of examples/ddp_buckets.h against what PyTorch's
// compute_bucket_assignment_by_size gives for the same parameter sizes.
#include "ddp_buckets.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace {

using ddp_sim::assign_ddp_buckets;
using ddp_sim::Bucket;

constexpr std::size_t kMiB = 1024 * 1024;

std::vector<std::vector<int>> layers_of(const std::vector<Bucket>& buckets) {
  std::vector<std::vector<int>> layers;
  for (const Bucket& bucket : buckets) layers.push_back(bucket.layers);
  return layers;
}

std::vector<std::size_t> bytes_of(const std::vector<Bucket>& buckets) {
  std::vector<std::size_t> bytes;
  for (const Bucket& bucket : buckets) bytes.push_back(bucket.bytes);
  return bytes;
}

TEST(DdpBuckets, DefaultModelAndCaps) {
  // ddp_sim's defaults: 24 layers of 4 MiB, DDP's 1 MiB first bucket and 25 MiB buckets.
  const std::vector<std::size_t> layers(24, 4 * kMiB);
  const std::vector<Bucket> buckets = assign_ddp_buckets(layers, 1 * kMiB, 25 * kMiB);
  const std::vector<std::vector<int>> expected_layers{
      {23}, {22, 21, 20, 19, 18, 17, 16}, {15, 14, 13, 12, 11, 10, 9}, {8, 7, 6, 5, 4, 3, 2}, {1, 0}};
  EXPECT_EQ(layers_of(buckets), expected_layers);
  EXPECT_EQ(bytes_of(buckets), (std::vector<std::size_t>{4 * kMiB, 28 * kMiB, 28 * kMiB, 28 * kMiB, 8 * kMiB}));
  for (std::size_t i = 0; i < buckets.size(); ++i) EXPECT_EQ(buckets[i].index, static_cast<int>(i));
}

TEST(DdpBuckets, ABucketClosesWhenItReachesItsCapExactly) {
  const std::vector<std::size_t> layers(8, kMiB / 4);
  const std::vector<Bucket> buckets = assign_ddp_buckets(layers, 1 * kMiB, kMiB / 2);
  EXPECT_EQ(layers_of(buckets), (std::vector<std::vector<int>>{{7, 6, 5, 4}, {3, 2}, {1, 0}}));
  EXPECT_EQ(bytes_of(buckets), (std::vector<std::size_t>{kMiB, kMiB / 2, kMiB / 2}));
}

TEST(DdpBuckets, OversizedLayersAreNeverSplit) {
  // Layer 1 (30 MiB) overfills the bucket that layer 2 opened; layer 0 alone
  // exceeds the cap at an empty bucket and is a bucket of its own.
  const std::vector<std::size_t> layers{40 * kMiB, 30 * kMiB, 1 * kMiB, 2 * kMiB};
  const std::vector<Bucket> buckets = assign_ddp_buckets(layers, 1 * kMiB, 25 * kMiB);
  EXPECT_EQ(layers_of(buckets), (std::vector<std::vector<int>>{{3}, {2, 1}, {0}}));
  EXPECT_EQ(bytes_of(buckets), (std::vector<std::size_t>{2 * kMiB, 31 * kMiB, 40 * kMiB}));
}

TEST(DdpBuckets, LayersGoInReverseOrderEachExactlyOnce) {
  const std::vector<std::size_t> layers{3 * kMiB, 5 * kMiB, 1 * kMiB, 7 * kMiB, 2 * kMiB, 9 * kMiB, 4 * kMiB};
  const std::vector<Bucket> buckets = assign_ddp_buckets(layers, 2 * kMiB, 10 * kMiB);
  EXPECT_EQ(layers_of(buckets), (std::vector<std::vector<int>>{{6}, {5, 4}, {3, 2, 1}, {0}}));
  int expected_layer = static_cast<int>(layers.size()) - 1;
  for (const Bucket& bucket : buckets) {
    std::size_t bytes = 0;
    for (int layer : bucket.layers) {
      EXPECT_EQ(layer, expected_layer--);
      bytes += layers[static_cast<std::size_t>(layer)];
    }
    EXPECT_EQ(bucket.bytes, bytes);
  }
  EXPECT_EQ(expected_layer, -1);
}

TEST(DdpBuckets, TheFirstCapAppliesToTheFirstBucketOnly) {
  // With the first cap as large as the others, as DDP does when bucket_cap_mb is given.
  const std::vector<std::size_t> layers(24, 4 * kMiB);
  const std::vector<Bucket> buckets = assign_ddp_buckets(layers, 25 * kMiB, 25 * kMiB);
  EXPECT_EQ(bytes_of(buckets), (std::vector<std::size_t>{28 * kMiB, 28 * kMiB, 28 * kMiB, 12 * kMiB}));
}

TEST(DdpBuckets, RemainderAndEmptyModel) {
  const std::vector<std::size_t> one_small_layer{kMiB / 2};
  EXPECT_EQ(layers_of(assign_ddp_buckets(one_small_layer, kMiB, 25 * kMiB)), (std::vector<std::vector<int>>{{0}}));
  EXPECT_TRUE(assign_ddp_buckets({}, kMiB, 25 * kMiB).empty());
}

}  // namespace
