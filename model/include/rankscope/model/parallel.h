// Work spread over the CPUs a process may run on: each thread takes the next
// index from a shared counter, so that items of uneven size (ranks with more
// events than others, traces of different lengths) keep every thread busy.
#pragma once

#include <cstddef>
#include <functional>

namespace rankscope {

// The CPUs this process may run on: its affinity mask (what mpirun's binding
// or taskset left it), at least 1.
unsigned usable_cpus();

// Calls body(i) for every i in [0, count), on up to `threads` threads (the
// calling one among them). Every index is visited even where one throws;
// then the exception of the lowest index that threw is rethrown.
void for_each_index(size_t count, unsigned threads, const std::function<void(size_t)>& body);

}  // namespace rankscope
