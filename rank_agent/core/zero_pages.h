// Tables sized for the worst case, of which a run uses a few pages: memory the
// kernel hands out zero-filled and maps only where it is first written, so
// that an entry never used costs no resident memory (value-initialising an
// array with new would write, and so map, every page of it).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <new>
#include <type_traits>

namespace rankscope::agent {

// T must be valid with all its bytes zero (atomics holding 0, empty slots)
// and need no destructor.
template <typename T>
class ZeroPages {
  static_assert(std::is_trivially_destructible_v<T>);

 public:
  explicit ZeroPages(size_t count) : bytes_(count * sizeof(T)) {
    void* memory = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED) throw std::bad_alloc();
    items_ = static_cast<T*>(memory);
  }
  ZeroPages(const ZeroPages&) = delete;
  ZeroPages& operator=(const ZeroPages&) = delete;
  ~ZeroPages() { ::munmap(items_, bytes_); }

  T& operator[](size_t index) const { return items_[index]; }

 private:
  size_t bytes_;
  T* items_;
};

}  // namespace rankscope::agent
