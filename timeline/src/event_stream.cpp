#include "rankscope/timeline/event_stream.h"

#include <algorithm>

#include "rankscope/model/error.h"

namespace rankscope {
namespace {

// Rows of /events per block: small enough to stay in the CPU's cache.
constexpr uint64_t kBlockEvents = 1 << 14;
constexpr size_t kBlocksAhead = 4;

}  // namespace

EventStream::EventStream(const Timeline& timeline, std::vector<int32_t> reads)
    : timeline_(timeline), reads_(std::move(reads)), ring_(kBlocksAhead) {
  reader_ = std::thread([this] { read_loop(); });
}

EventStream::~EventStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  reader_.join();
}

size_t EventStream::start(int32_t rank) {
  if (next_read_ >= reads_.size() || reads_[next_read_] != rank) {
    throw Error(timeline_.path() + ": internal error: rank " + std::to_string(rank) + " read out of order");
  }
  return next_read_++;
}

const EventStream::Block& EventStream::next_block() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return filled_ > 0 || error_; });
  if (filled_ == 0) std::rethrow_exception(error_);
  return ring_[head_];
}

void EventStream::release_block() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    head_ = (head_ + 1) % ring_.size();
    --filled_;
  }
  changed_.notify_all();
}

void EventStream::stop(size_t read) {
  std::lock_guard<std::mutex> lock(mutex_);
  skip_read_ = read;
}

void EventStream::read_loop() {
  try {
    for (size_t read = 0; read < reads_.size(); ++read) {
      const RankInfo& info = timeline_.ranks().at(static_cast<size_t>(reads_[read]));
      for (uint64_t done = 0;;) {
        size_t slot = 0;
        bool skipped = false;
        {
          std::unique_lock<std::mutex> lock(mutex_);
          changed_.wait(lock, [&] { return filled_ < ring_.size() || stopping_; });
          if (stopping_) return;
          slot = (head_ + filled_) % ring_.size();
          skipped = skip_read_ == read;
        }
        // The slot is outside the ready blocks, so the consumer leaves it alone.
        Block& block = ring_[slot];
        const uint64_t n = skipped ? 0 : std::min(kBlockEvents, info.event_count - done);
        timeline_.read_events(reads_[read], done, n, block.events);
        done += n;
        block.last = skipped || done == info.event_count;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          ++filled_;
        }
        changed_.notify_all();
        if (block.last) break;
      }
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::current_exception();
    changed_.notify_all();
  }
}

}  // namespace rankscope
