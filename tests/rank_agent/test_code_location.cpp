// Where an instruction lies, as a crash's instant names it, against what the
// loader's dladdr says of the same address.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>
#include <netdb.h>

#include <cstdint>
#include <string>
#include <thread>

#include "code_location.h"
#include "dynamic_symbols.h"

extern "C" int code_location_exported(int x);  // tests/rank_agent/code_location_module.c
extern "C" int (*code_location_hidden_address())(int);

namespace {

using rankscope::agent::code_location;

// dladdr's answer, in code_location's words (module offsets from the load bias).
std::string as_dladdr_says(uintptr_t address) {
  Dl_info found{};
  link_map* module = nullptr;
  if (::dladdr1(reinterpret_cast<void*>(address), &found, reinterpret_cast<void**>(&module), RTLD_DL_LINKMAP) == 0) {
    return "";
  }
  const std::string path = found.dli_fname;
  char text[256];
  std::snprintf(text, sizeof(text), "%s+0x%llx", path.substr(path.rfind('/') + 1).c_str(),
                static_cast<unsigned long long>(address - module->l_addr));
  std::string out = text;
  if (found.dli_sname) {
    std::snprintf(text, sizeof(text), " (%s+0x%llx)", found.dli_sname,
                  static_cast<unsigned long long>(address - reinterpret_cast<uintptr_t>(found.dli_saddr)));
    out += text;
  }
  return out;
}

TEST(CodeLocation, AnExportedFunctionIsNamedWithItsModuleAndItsSymbol) {
  const auto address = reinterpret_cast<uintptr_t>(&code_location_exported) + 4;
  const std::string where = code_location(address);
  EXPECT_EQ(where.rfind("libcode_location_module.so+0x", 0), 0u) << where;
  EXPECT_NE(where.find(" (code_location_exported+0x4)"), std::string::npos) << where;
  EXPECT_EQ(where, as_dladdr_says(address));
}

TEST(CodeLocation, AFunctionOfLibcIsNamedAsTheLoaderNamesIt) {
  // A function of some size in every glibc: an offset into it is still inside.
  const auto address = reinterpret_cast<uintptr_t>(&::getaddrinfo) + 16;
  const std::string where = code_location(address);
  EXPECT_EQ(where.rfind("libc.so.6+0x", 0), 0u) << where;
  EXPECT_NE(where.find(" (getaddrinfo+0x10)"), std::string::npos) << where;
  EXPECT_EQ(where, as_dladdr_says(address));
}

// A static function has no symbol the module exports: its module alone.
TEST(CodeLocation, AFunctionNotExportedIsNamedByItsModuleAlone) {
  const auto address = reinterpret_cast<uintptr_t>(code_location_hidden_address());
  const std::string where = code_location(address);
  EXPECT_EQ(where.rfind("libcode_location_module.so+0x", 0), 0u) << where;
  EXPECT_EQ(where.find('('), std::string::npos) << where;
}

// The program itself has no name in the loader's list: the file it runs is named.
TEST(CodeLocation, TheProgramIsNamedByItsFile) {
  static const int in_the_program = 0;
  const std::string where = code_location(reinterpret_cast<uintptr_t>(&in_the_program));
  EXPECT_EQ(where.rfind("test_code_location+0x", 0), 0u) << where;
}

TEST(CodeLocation, AnAddressNoModuleHoldsHasNoLocation) {
  EXPECT_EQ(code_location(0), "");
  EXPECT_EQ(code_location(8), "");
}

// The case dladdr cannot take: a crash in a library's constructor comes
// inside dlopen, which holds the lock dladdr waits for, and the agent looks
// the crash up from another thread. The module's constructor does the same.
TEST(CodeLocation, ALookupWhileDlopenRunsAConstructorDoesNotWait) {
  void* module = ::dlopen(CODE_LOCATION_CONSTRUCTOR_MODULE, RTLD_NOW);
  ASSERT_NE(module, nullptr) << ::dlerror();
  using Answer = const char* (*)();
  const auto answer = reinterpret_cast<Answer>(::dlsym(module, "code_location_found_in_constructor"));
  ASSERT_NE(answer, nullptr);
  EXPECT_EQ(std::string(answer()).rfind("libcode_location_constructor.so+0x", 0), 0u) << answer();
  ::dlclose(module);
}

// What decides whether a process is a Python interpreter the hook should
// have run in: a program that merely loads libpython is not one.
TEST(ProgramNamesSymbol, WhatTheProgramItselfCallsButNotWhatOnlyItsLibrariesBring) {
  using rankscope::agent::program_names_symbol;
  EXPECT_TRUE(program_names_symbol({"__libc_start_main"}));  // every dynamically linked program's
  EXPECT_TRUE(program_names_symbol({"no_such_symbol", "code_location_exported"}));
  // In the process (libc's), never called by this program.
  ASSERT_NE(::dlsym(RTLD_DEFAULT, "getgrent"), nullptr);
  EXPECT_FALSE(program_names_symbol({"getgrent"}));
  EXPECT_FALSE(program_names_symbol({"Py_BytesMain", "Py_Main"}));
}

}  // namespace
