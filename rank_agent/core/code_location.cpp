#include "code_location.h"

#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <string_view>

#include "dynamic_symbols.h"
#include "rankscope/model/text.h"

namespace rankscope::agent {
namespace {

// What the search found, copied out of the loader's list while it is held.
struct Found {
  uintptr_t instruction = 0;
  bool in_module = false;
  char module[256] = {};
  uintptr_t module_offset = 0;
  const char* symbol = nullptr;  // in the module's string table, mapped as long as the module is
  uintptr_t symbol_offset = 0;
};

void find_symbol(const dl_phdr_info& module, Found& found) {
  const DynamicSymbols symbols(module);
  for (size_t i = 0; i < symbols.size(); ++i) {
    const ElfW(Sym)& symbol = symbols[i];
    // A TLS symbol's value is an offset in the thread's block, not an address.
    if (symbol.st_shndx == SHN_UNDEF || symbol.st_size == 0 || ELF64_ST_TYPE(symbol.st_info) == STT_TLS ||
        symbols.name(symbol).empty()) {
      continue;
    }
    const uintptr_t start = module.dlpi_addr + symbol.st_value;
    if (found.instruction - start < symbol.st_size) {
      found.symbol = symbols.name(symbol).data();
      found.symbol_offset = found.instruction - start;
      return;
    }
  }
}

int search_module(dl_phdr_info* module, size_t, void* data) {
  Found& found = *static_cast<Found*>(data);
  bool holds = false;
  for (ElfW(Half) i = 0; i < module->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = module->dlpi_phdr[i];
    holds = holds || (segment.p_type == PT_LOAD &&
                      found.instruction - (module->dlpi_addr + segment.p_vaddr) < segment.p_memsz);
  }
  if (!holds) return 0;
  found.in_module = true;
  found.module_offset = found.instruction - module->dlpi_addr;
  const std::string_view path = module->dlpi_name ? module->dlpi_name : "";
  // The program itself has no name in the list: the file it runs.
  char program[sizeof(found.module)] = {};
  std::string_view name = path;
  if (name.empty()) {
    const ssize_t length = ::readlink("/proc/self/exe", program, sizeof(program) - 1);
    name = std::string_view(program, length > 0 ? static_cast<size_t>(length) : 0);
  }
  name = name.substr(name.rfind('/') + 1);
  name.copy(found.module, std::min(name.size(), sizeof(found.module) - 1));
  find_symbol(*module, found);
  return 1;
}

}  // namespace

std::string code_location(uintptr_t instruction) {
  if (instruction == 0) return "";
  Found found;
  found.instruction = instruction;
  ::dl_iterate_phdr(search_module, &found);
  if (!found.in_module) return "";
  std::string out = printf_string("%s+0x%llx", found.module[0] ? found.module : "?",
                                  static_cast<unsigned long long>(found.module_offset));
  if (found.symbol) {
    out += printf_string(" (%s+0x%llx)", found.symbol, static_cast<unsigned long long>(found.symbol_offset));
  }
  return out;
}

}  // namespace rankscope::agent
