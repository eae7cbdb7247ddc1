// What the launcher learns of the program before it runs it: its file, the
// MPI it uses, and whether the agent's buffers can be had.
#pragma once

#include <filesystem>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rankscope::launch {

// The program a command runs, found once for auto mode and the MPI check:
// its file on the PATH, and the MPI libraries it loads if it is an ELF
// program (ldd, where asked, takes tens of milliseconds).
struct ProgramFound {
  std::optional<std::filesystem::path> path;
  std::vector<std::string> mpi_libraries;
};
ProgramFound find_program_of(const std::vector<std::string>& command);

// Whether the program of `command` uses MPI, and what showed it: an MPI
// library among its dependencies, MPI calls in its binary, an import of
// mpi4py in its Python code (not the word in a comment).
bool program_uses_mpi(const ProgramFound& found, const std::vector<std::string>& command, std::string& evidence);

// Whether Python code imports mpi4py: a statement `import mpi4py...` or
// `from mpi4py...` (alone or in a list), not the word in a comment or a string.
bool imports_mpi4py(std::string_view code);

// Throws where the program loads another MPI than the one the MPI shim was
// built for: its calls would fail through the shim.
void check_program_mpi_is_the_shims(const ProgramFound& program);

// rankscope's MPI library as it names itself ("Open MPI v4.1.4").
std::string mpi_library_version();

// Throws where this node will not map a rank's event buffers.
void check_buffers_can_be_mapped(uint64_t buffer_mb);

}  // namespace rankscope::launch
