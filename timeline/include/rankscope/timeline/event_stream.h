// Reads ranks' events for the exporter's passes on a background thread, a
// few blocks ahead of the consumer, so reading /events (HDF5, and the
// kernel's copy out of the page cache) overlaps the work on the events.
// Only the reader thread calls HDF5: the consumer must not read the
// timeline's events itself while a stream is open.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "rankscope/timeline/timeline.h"

namespace rankscope {

class EventStream {
 public:
  // Reads the ranks in this order (a rank may come more than once), each
  // from its first event to its last or until the consumer stops it.
  EventStream(const Timeline& timeline, std::vector<int32_t> reads);
  EventStream(const EventStream&) = delete;
  EventStream& operator=(const EventStream&) = delete;
  ~EventStream();

  // The next read of the order given, which must be of `rank`: visit(event)
  // for its events in time order while visit returns true. Returns the rows
  // visited. Throws the reader's Error.
  template <typename Visit>
  uint64_t stream(int32_t rank, Visit&& visit) {
    const size_t read = start(rank);
    uint64_t rows = 0;
    bool more = true;
    while (true) {
      const Block& block = next_block();
      const bool last = block.last;
      for (size_t i = 0; more && i < block.events.size(); ++i) {
        ++rows;
        more = visit(block.events[i]);
      }
      release_block();
      if (last) return rows;
      if (!more) stop(read);  // the blocks still coming for it are dropped
    }
  }

 private:
  struct Block {
    std::vector<Event> events;
    bool last = false;  // its read's last block
  };

  size_t start(int32_t rank);
  const Block& next_block();
  void release_block();
  void stop(size_t read);
  void read_loop();

  const Timeline& timeline_;
  const std::vector<int32_t> reads_;
  size_t next_read_ = 0;  // the consumer's next
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Block> ring_;
  size_t head_ = 0, filled_ = 0;  // the blocks ready, oldest first: ring_[head_], ...
  size_t skip_read_ = SIZE_MAX;   // the read the consumer stopped: its reading ends
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread reader_;
};

}  // namespace rankscope
