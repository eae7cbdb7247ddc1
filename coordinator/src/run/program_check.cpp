#include "run/program_check.h"

#include <elf.h>
#include <fcntl.h>
#include <mpi.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <span>

#include "rankscope/model/error.h"
#include "run/agent_environment.h"

namespace rankscope::launch {

namespace fs = std::filesystem;

namespace {

std::optional<fs::path> find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return fs::path(name);
  const char* path = std::getenv("PATH");
  std::string_view rest = path ? path : "/usr/bin:/bin";
  while (!rest.empty()) {
    const size_t colon = rest.find(':');
    const fs::path candidate = fs::path(std::string(rest.substr(0, colon))) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
  }
  return std::nullopt;
}

// Searches a file for any of `needles`; returns the one found, or "".
std::string file_mentions(const fs::path& path, std::initializer_list<std::string_view> needles) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st {};
  std::string found;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    void* data = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (data != MAP_FAILED) {
      const std::string_view text(static_cast<const char*>(data), static_cast<size_t>(st.st_size));
      for (std::string_view needle : needles) {
        if (text.find(needle) != std::string_view::npos) {
          found = needle;
          break;
        }
      }
      ::munmap(data, static_cast<size_t>(st.st_size));
    }
  }
  ::close(fd);
  return found;
}

bool file_starts_with(const fs::path& path, std::string_view prefix) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) return false;
  std::string head(prefix.size(), '\0');
  const bool same = std::fread(head.data(), 1, head.size(), file) == head.size() && head == prefix;
  std::fclose(file);
  return same;
}

// The libraries of MPI implementations, by their names without the version:
// libmpi.so.40 is Open MPI's C library, libmpich.so.12 MPICH's, libmpi.so.12
// that of MPICH's ABI (Intel MPI's among them); the others are Fortran's.
constexpr std::string_view kMpiCLibraries[] = {"libmpi", "libmpich"};
constexpr std::string_view kMpiFortranLibraries[] = {"libmpi_mpifh", "libmpi_usempif08", "libmpi_usempi_ignore_tkr",
                                                     "libmpifort", "libmpichfort"};

bool named_in(std::string_view library, std::span<const std::string_view> stems) {
  library.remove_prefix(library.rfind('/') + 1);  // a NEEDED entry or ldd's line may give a path
  const size_t suffix = library.find(".so");
  return suffix != std::string_view::npos && std::ranges::find(stems, library.substr(0, suffix)) != stems.end();
}
bool is_mpi_c_library(std::string_view library) { return named_in(library, kMpiCLibraries); }
bool is_mpi_library(std::string_view library) {
  return is_mpi_c_library(library) || named_in(library, kMpiFortranLibraries);
}

// The libraries a 64-bit ELF program names in its own DT_NEEDED entries, read
// from the file (a millisecond, where ldd takes tens); empty for anything else.
std::vector<std::string> elf_needed(const fs::path& path) {
  std::vector<std::string> needed;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return needed;
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  const auto size = regular ? static_cast<size_t>(st.st_size) : 0;
  void* data = size >= sizeof(Elf64_Ehdr) ? ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
  ::close(fd);
  if (data == MAP_FAILED) return needed;
  const auto* bytes = static_cast<const unsigned char*>(data);
  const auto inside = [&](uint64_t offset, uint64_t length) { return offset <= size && length <= size - offset; };
  const auto* header = static_cast<const Elf64_Ehdr*>(data);
  if (header->e_ident[EI_CLASS] == ELFCLASS64 && header->e_ident[EI_DATA] == ELFDATA2LSB &&
      header->e_phentsize == sizeof(Elf64_Phdr) && inside(header->e_phoff, uint64_t{header->e_phnum} * sizeof(Elf64_Phdr))) {
    const auto* segments = reinterpret_cast<const Elf64_Phdr*>(bytes + header->e_phoff);
    const std::span<const Elf64_Phdr> all(segments, header->e_phnum);
    // Addresses in the dynamic section are where the loader maps them: back to file offsets.
    const auto file_offset = [&](uint64_t address) -> std::optional<uint64_t> {
      for (const Elf64_Phdr& segment : all) {
        if (segment.p_type == PT_LOAD && address >= segment.p_vaddr && address - segment.p_vaddr < segment.p_filesz) {
          return segment.p_offset + (address - segment.p_vaddr);
        }
      }
      return std::nullopt;
    };
    for (const Elf64_Phdr& segment : all) {
      if (segment.p_type != PT_DYNAMIC || !inside(segment.p_offset, segment.p_filesz)) continue;
      const std::span<const Elf64_Dyn> entries(reinterpret_cast<const Elf64_Dyn*>(bytes + segment.p_offset),
                                               segment.p_filesz / sizeof(Elf64_Dyn));
      std::optional<uint64_t> strings;
      for (const Elf64_Dyn& entry : entries) {
        if (entry.d_tag == DT_STRTAB) strings = file_offset(entry.d_un.d_ptr);
      }
      for (const Elf64_Dyn& entry : entries) {
        if (entry.d_tag == DT_NULL) break;
        if (entry.d_tag != DT_NEEDED || !strings || !inside(*strings + entry.d_un.d_val, 1)) continue;
        const char* name = reinterpret_cast<const char*>(bytes + *strings + entry.d_un.d_val);
        needed.emplace_back(name, ::strnlen(name, size - (*strings + entry.d_un.d_val)));
      }
    }
  }
  ::munmap(data, size);
  return needed;
}

// The MPI libraries an ELF program loads, by the names the loader looks for
// (libmpi.so.40): those the program names itself, and where these hold no C
// library, those it loads through its own libraries too (a program on
// libmeep_mpi, a Fortran one on libmpi_mpifh), as `ldd` resolves them:
// through the dynamic loader, so the program itself never runs.
std::vector<std::string> mpi_libraries_loaded(const fs::path& program) {
  std::vector<std::string> found;
  for (std::string& library : elf_needed(program)) {
    if (is_mpi_library(library)) found.push_back(std::move(library));
  }
  if (std::ranges::any_of(found, is_mpi_c_library)) return found;
  std::string command = "ldd '";
  for (const char c : program.string()) command += c == '\'' ? std::string("'\\''") : std::string(1, c);
  command += "' 2>/dev/null";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return found;
  char line[4096];
  // "\tlibmpi.so.40 => /usr/lib/x86_64-linux-gnu/libmpi.so.40 (0x...)"
  while (std::fgets(line, sizeof(line), pipe)) {
    std::string_view name(line);
    name.remove_prefix(std::min(name.find_first_not_of(" \t"), name.size()));
    name = name.substr(0, name.find_first_of(" \t\n"));
    if (is_mpi_library(name) && std::ranges::find(found, name) == found.end()) found.emplace_back(name);
  }
  ::pclose(pipe);
  return found;
}

bool is_elf(const fs::path& path) { return file_starts_with(path, "\x7f" "ELF"); }

// A text file's whole contents; empty for anything unreadable or over 16 MiB.
std::string file_text(const fs::path& path) {
  std::error_code error;
  const auto size = fs::file_size(path, error);
  if (error || size > (uint64_t{16} << 20) || !fs::is_regular_file(path, error)) return {};
  std::string text(size, '\0');
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) return {};
  text.resize(std::fread(text.data(), 1, text.size(), file));
  std::fclose(file);
  return text;
}

}  // namespace

ProgramFound find_program_of(const std::vector<std::string>& command) {
  ProgramFound found{find_program(command.at(0)), {}};
  if (found.path && is_elf(*found.path)) found.mpi_libraries = mpi_libraries_loaded(*found.path);
  return found;
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  const std::string_view version(text, static_cast<size_t>(std::max(length, 0)));
  return std::string(version.substr(0, version.find(',')));
}

// In-process mode preloads the MPI shim, built against rankscope's MPI
// library: a program of another MPI (MPICH's libmpich.so.12, Intel MPI's
// libmpi.so.12) would load both, and its calls would reach its own MPI
// through the shim with the handles of the other (MPI_Init fails).
void check_program_mpi_is_the_shims(const ProgramFound& program) {
  const auto program_mpi = std::ranges::find_if(program.mpi_libraries, is_mpi_c_library);
  if (program_mpi == program.mpi_libraries.end()) return;
  const std::vector<std::string> needed = elf_needed(agent_library("librankscope_mpi.so"));
  const auto shim_mpi = std::ranges::find_if(needed, is_mpi_c_library);
  if (shim_mpi == needed.end() || fs::path(*shim_mpi).filename() == fs::path(*program_mpi).filename()) return;
  const std::string ours = mpi_library_version();
  throw Error(program.path->string() + " loads " + *program_mpi + ", another MPI than rankscope's (" + *shim_mpi + ", " +
              ours + "): rankscope cannot capture its MPI calls, and its capture would make them fail; profile a " +
              "build of the program for " + ours + " (made with its mpicc), started by its mpirun");
}

bool imports_mpi4py(std::string_view code) {
  while (!code.empty()) {
    const size_t end = code.find('\n');
    std::string_view line = code.substr(0, end);
    code = end == std::string_view::npos ? std::string_view() : code.substr(end + 1);
    line.remove_prefix(std::min(line.find_first_not_of(" \t"), line.size()));
    line = line.substr(0, line.find('#'));
    // Statements joined by ';' on one line.
    while (!line.empty()) {
      const size_t semicolon = line.find(';');
      std::string_view statement = line.substr(0, semicolon);
      line = semicolon == std::string_view::npos ? std::string_view() : line.substr(semicolon + 1);
      statement.remove_prefix(std::min(statement.find_first_not_of(" \t"), statement.size()));
      const bool from = statement.starts_with("from "), import = statement.starts_with("import ");
      if (!from && !import) continue;
      statement.remove_prefix(from ? 5 : 7);
      // `from mpi4py...`: the module itself; `import a, mpi4py.MPI as m`: any of the list.
      const std::string_view modules = from ? statement.substr(0, statement.find(' ')) : statement;
      for (size_t at = modules.find("mpi4py"); at != std::string_view::npos; at = modules.find("mpi4py", at + 1)) {
        const bool starts = at == 0 || modules[at - 1] == ' ' || modules[at - 1] == ',' || modules[at - 1] == '\t';
        const char after = at + 6 < modules.size() ? modules[at + 6] : ' ';
        if (starts && (after == ' ' || after == '.' || after == ',' || after == '\t' || after == '\r')) return true;
        if (from) break;
      }
    }
  }
  return false;
}

bool program_uses_mpi(const ProgramFound& found, const std::vector<std::string>& command, std::string& evidence) {
  const auto& program = found.path;
  if (!program) return false;
  if (!found.mpi_libraries.empty()) {
    evidence = program->string() + " loads " + found.mpi_libraries.front();
    return true;
  }
  // C (libmpi.so) and Fortran (libmpi_mpifh.so, libmpi_usempif08.so, mpi_init_) programs.
  if (is_elf(*program)) {
    const std::string in_binary =
        file_mentions(*program, {"libmpi.so", "libmpi_mpifh.so", "libmpi_usempi", "MPI_Init", "mpi_init_"});
    if (!in_binary.empty()) {
      evidence = program->string() + " mentions " + in_binary;
      return true;
    }
  } else if (imports_mpi4py(file_text(*program))) {  // a script run by its #! line
    evidence = program->string() + " imports mpi4py";
    return true;
  }
  // An interpreter: its code given on the command line (python -c CODE, or
  // -m MODULE), or its script, the first argument that is not an option.
  for (size_t i = 1; i < command.size(); ++i) {
    if ((command[i] == "-c" || command[i] == "-m") && i + 1 < command.size()) {
      const std::string& code = command[i + 1];
      if (command[i] == "-c" ? !imports_mpi4py(code) : !code.starts_with("mpi4py")) break;
      evidence = command[0] + " " + command[i] + " imports mpi4py";
      return true;
    }
    if (command[i].empty() || command[i][0] == '-') continue;
    if (imports_mpi4py(file_text(command[i]))) {
      evidence = command[i] + " imports mpi4py";
      return true;
    }
    break;
  }
  return false;
}

// The agent maps its event buffers whole when it starts (recorder.cpp): a
// size the kernel refuses would leave every rank capturing nothing, found
// only after the job. The launcher asks for the same mapping first.
void check_buffers_can_be_mapped(uint64_t buffer_mb) {
  const uint64_t bytes = buffer_mb << 20;
  void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    throw Error("--buffer-mb " + std::to_string(buffer_mb) + ": this node will not map that much for one rank (" +
                errno_text(errno) + "; the kernel's overcommit limit, or ulimit -v): give less");
  }
  ::munmap(memory, bytes);
}

}  // namespace rankscope::launch
