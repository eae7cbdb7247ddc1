#include "code_location.h"

#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <string_view>

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

// The loader rewrites most of a module's dynamic entries into addresses in
// place, but not every module's (the vDSO's stay offsets from its base).
uintptr_t dynamic_address(uintptr_t value, uintptr_t base) { return value < base ? value + base : value; }

// How many entries the dynamic symbol table has: its ELF hash table says so
// outright; a GNU one, through the end of its last chain.
size_t symbol_count(const uint32_t* elf_hash, const uint32_t* gnu_hash) {
  if (elf_hash) return elf_hash[1];
  if (!gnu_hash) return 0;
  const uint32_t buckets = gnu_hash[0], first_hashed = gnu_hash[1], bloom_words = gnu_hash[2];
  const uint32_t* bucket = gnu_hash + 4 + bloom_words * (sizeof(ElfW(Addr)) / sizeof(uint32_t));
  const uint32_t* chain = bucket + buckets;
  uint32_t last = 0;
  for (uint32_t b = 0; b < buckets; ++b) last = std::max(last, bucket[b]);
  if (last < first_hashed) return first_hashed;
  while ((chain[last - first_hashed] & 1) == 0) ++last;  // the low bit ends a chain
  return last + 1;
}

void find_symbol(const dl_phdr_info& module, const ElfW(Dyn)* dynamic, Found& found) {
  const uintptr_t base = module.dlpi_addr;
  const ElfW(Sym)* symbols = nullptr;
  const char* strings = nullptr;
  size_t strings_size = 0;
  const uint32_t *elf_hash = nullptr, *gnu_hash = nullptr;
  for (const ElfW(Dyn)* entry = dynamic; entry->d_tag != DT_NULL; ++entry) {
    const uintptr_t value = entry->d_un.d_ptr;
    switch (entry->d_tag) {
      case DT_SYMTAB: symbols = reinterpret_cast<const ElfW(Sym)*>(dynamic_address(value, base)); break;
      case DT_STRTAB: strings = reinterpret_cast<const char*>(dynamic_address(value, base)); break;
      case DT_STRSZ: strings_size = entry->d_un.d_val; break;
      case DT_HASH: elf_hash = reinterpret_cast<const uint32_t*>(dynamic_address(value, base)); break;
      case DT_GNU_HASH: gnu_hash = reinterpret_cast<const uint32_t*>(dynamic_address(value, base)); break;
      default: break;
    }
  }
  if (!symbols || !strings) return;
  const size_t count = symbol_count(elf_hash, gnu_hash);
  for (size_t i = 0; i < count; ++i) {
    const ElfW(Sym)& symbol = symbols[i];
    // A TLS symbol's value is an offset in the thread's block, not an address.
    if (symbol.st_shndx == SHN_UNDEF || symbol.st_size == 0 || ELF64_ST_TYPE(symbol.st_info) == STT_TLS ||
        symbol.st_name >= strings_size) {
      continue;
    }
    const uintptr_t start = base + symbol.st_value;
    if (found.instruction - start < symbol.st_size) {
      found.symbol = strings + symbol.st_name;
      found.symbol_offset = found.instruction - start;
      return;
    }
  }
}

int search_module(dl_phdr_info* module, size_t, void* data) {
  Found& found = *static_cast<Found*>(data);
  const ElfW(Dyn)* dynamic = nullptr;
  bool holds = false;
  for (ElfW(Half) i = 0; i < module->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = module->dlpi_phdr[i];
    if (segment.p_type == PT_DYNAMIC) dynamic = reinterpret_cast<const ElfW(Dyn)*>(module->dlpi_addr + segment.p_vaddr);
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
  if (dynamic) find_symbol(*module, dynamic, found);
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
