// make_export_fixture DIR: writes the exporter's hand-made job (export_fixture.h)
// as shards, for the command-line tests to merge and export.
#include <cstdio>
#include <filesystem>

#include "export_fixture.h"
#include "rankscope/model/error.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  try {
    std::filesystem::create_directories(argv[1]);
    rankscope::testing::write_export_fixture(argv[1]);
  } catch (const rankscope::Error& e) {
    std::fprintf(stderr, "make_export_fixture: %s\n", e.what());
    return 1;
  }
  return 0;
}
