// Damages a timeline the ways a disk, a copy or a hand does, for the tests
// and fuzzers of the timeline reader.
#pragma once

#include <cstdint>
#include <string>

namespace rankscope::testing {

// Sets one value through HDF5, so the chunk's checksum is rewritten and only
// the reader's own checks can find it: `field` of row `row` of a table of
// rows (compound), or column `field` (a number) of a table of plain values.
// The value's low bytes are stored in the field's width. Throws Error.
void set_timeline_value(const std::string& path, const std::string& dataset, uint64_t row, const std::string& field,
                        int64_t value);

// Reads the same value back (sign-extended from the field's width).
int64_t get_timeline_value(const std::string& path, const std::string& dataset, uint64_t row, const std::string& field);

// Flips the bits of one byte inside the stored chunk `chunk` of a dataset, as
// a disk would: HDF5's checksum of the chunk no longer matches. Throws Error.
void flip_timeline_chunk_byte(const std::string& path, const std::string& dataset, uint64_t chunk, uint64_t byte);

}  // namespace rankscope::testing
