// Damages a timeline the ways a disk, a copy or a hand does, for the tests
// and fuzzers of the timeline reader.
#pragma once

#include <cstdint>
#include <string>

namespace rankscope::testing {

// Sets one value through HDF5, so the chunk's checksum is rewritten (and an
// event's checksum in /event_checksums too) and only the reader's value
// checks can find it: `field` of row `row` of a table of
// rows (compound), or column `field` (a number) of a table of plain values.
// The value's low bytes are stored in the field's width. Throws Error.
void set_timeline_value(const std::string& path, const std::string& dataset, uint64_t row, const std::string& field,
                        int64_t value);

// Reads the same value back (sign-extended from the field's width).
int64_t get_timeline_value(const std::string& path, const std::string& dataset, uint64_t row, const std::string& field);

// Removes a dataset, as from a timeline written before it existed. Throws Error.
void unlink_timeline_dataset(const std::string& path, const std::string& dataset);

// Flips the bits of byte `byte` of row `row` of a dataset where it is stored,
// as a disk would: behind HDF5's back, so only a checksum can find it.
// Throws Error.
void flip_timeline_byte(const std::string& path, const std::string& dataset, uint64_t row, uint64_t byte);

}  // namespace rankscope::testing
