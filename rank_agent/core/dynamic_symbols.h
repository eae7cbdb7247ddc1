// A loaded module's dynamic symbols, read from the loader's list of modules
// (dl_iterate_phdr) and the tables it mapped, never under the lock dladdr
// and dlsym take: a crash in a library's constructor comes inside dlopen,
// which holds that lock.
#pragma once

#include <link.h>

#include <cstddef>
#include <initializer_list>
#include <string_view>

namespace rankscope::agent {

// A module's dynamic symbol table, as mapped; empty where it has none (a
// static program).
class DynamicSymbols {
 public:
  explicit DynamicSymbols(const dl_phdr_info& module);

  size_t size() const { return count_; }
  const ElfW(Sym)& operator[](size_t i) const { return symbols_[i]; }
  // The symbol's name; "" where it would lie outside the module's strings.
  std::string_view name(const ElfW(Sym)& symbol) const;

 private:
  const ElfW(Sym)* symbols_ = nullptr;
  const char* strings_ = nullptr;
  size_t strings_size_ = 0;
  size_t count_ = 0;
};

// Whether the program's own executable, the loader's first module, defines
// or imports any of `names`: what the program itself calls, where a search
// of the process would also find what its libraries bring along.
bool program_names_symbol(std::initializer_list<std::string_view> names);

}  // namespace rankscope::agent
