#pragma once

#include <cstddef>
#include <cstdint>

namespace rankscope {

// CRC-32C (Castagnoli), as iSCSI and ext4 use it. Uses the SSE4.2 instruction
// when the CPU has it, a table otherwise; both give the same value.
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);

// The table implementation alone, so tests can compare it with the instruction.
uint32_t crc32c_portable(const void* data, size_t size, uint32_t crc = 0);

}  // namespace rankscope
