#include "dynamic_symbols.h"

#include <elf.h>

#include <algorithm>
#include <cstdint>

namespace rankscope::agent {
namespace {

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

}  // namespace

DynamicSymbols::DynamicSymbols(const dl_phdr_info& module) {
  const uintptr_t base = module.dlpi_addr;
  const ElfW(Dyn)* dynamic = nullptr;
  for (ElfW(Half) i = 0; i < module.dlpi_phnum; ++i) {
    if (module.dlpi_phdr[i].p_type == PT_DYNAMIC) {
      dynamic = reinterpret_cast<const ElfW(Dyn)*>(base + module.dlpi_phdr[i].p_vaddr);
    }
  }
  if (!dynamic) return;
  const uint32_t *elf_hash = nullptr, *gnu_hash = nullptr;
  for (const ElfW(Dyn)* entry = dynamic; entry->d_tag != DT_NULL; ++entry) {
    const uintptr_t value = entry->d_un.d_ptr;
    switch (entry->d_tag) {
      case DT_SYMTAB: symbols_ = reinterpret_cast<const ElfW(Sym)*>(dynamic_address(value, base)); break;
      case DT_STRTAB: strings_ = reinterpret_cast<const char*>(dynamic_address(value, base)); break;
      case DT_STRSZ: strings_size_ = entry->d_un.d_val; break;
      case DT_HASH: elf_hash = reinterpret_cast<const uint32_t*>(dynamic_address(value, base)); break;
      case DT_GNU_HASH: gnu_hash = reinterpret_cast<const uint32_t*>(dynamic_address(value, base)); break;
      default: break;
    }
  }
  if (symbols_ && strings_) count_ = symbol_count(elf_hash, gnu_hash);
}

std::string_view DynamicSymbols::name(const ElfW(Sym)& symbol) const {
  return symbol.st_name < strings_size_ ? std::string_view(strings_ + symbol.st_name) : std::string_view();
}

bool program_names_symbol(std::initializer_list<std::string_view> names) {
  struct Search {
    std::initializer_list<std::string_view> names;
    bool found = false;
  } search{names};
  ::dl_iterate_phdr(
      [](dl_phdr_info* module, size_t, void* data) {
        Search& search = *static_cast<Search*>(data);
        const DynamicSymbols symbols(*module);
        for (size_t i = 0; i < symbols.size() && !search.found; ++i) {
          search.found = std::ranges::find(search.names, symbols.name(symbols[i])) != search.names.end();
        }
        return 1;  // the program is the first module; its libraries follow
      },
      &search);
  return search.found;
}

}  // namespace rankscope::agent
