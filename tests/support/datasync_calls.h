// The program's calls to fdatasync, counted on their way to the C
// library's: whether a shard's close waited for the disk. Linked into a
// test program, it stands in front of the C library's fdatasync for the
// whole program.
#pragma once

namespace rankscope::testing {

int datasync_calls();

}  // namespace rankscope::testing
