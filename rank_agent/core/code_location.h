// Where an instruction lies, for the instant a crash leaves on its thread.
#pragma once

#include <cstdint>
#include <string>

namespace rankscope::agent {

// "crash_app+0x12a4 (write_through_null+0x8)": the module that holds the
// instruction, at its own address (what `addr2line -e MODULE` takes), and
// the symbol it exports that holds it, where one does; "" where no loaded
// module holds it. Read from the loader's list of modules (dl_iterate_phdr)
// and their dynamic symbol tables in memory, never under the lock dladdr
// takes: a crash in a library's constructor comes inside dlopen, which
// holds that lock, and the shard's close would wait on it for ever.
std::string code_location(uintptr_t instruction);

}  // namespace rankscope::agent
