// metadata_flips TIMELINE [--count N] [--seed S]
// Flips bytes of a timeline's HDF5 metadata (everything that is not a
// dataset's rows: superblock, object headers with their datatypes and
// shapes, chunk indexes, heaps), one byte per copy, and reads each copy as
// `info --check` and `report` do, in a child process. Each flip ends as
//   same     the outputs are those of the intact file (a byte nobody reads),
//   refused  a rankscope::Error naming the file,
//   damage   the reader reported damage (rows left out, named),
//   silent   no damage reported, yet the outputs differ: a lie,
//   crash    the child died of a signal, or
//   hang     it ran past 60 s.
// Prints the counts; exits 1 when any flip was silent, crashed or hung.
// N: how many metadata bytes, chosen at random with seed S (default: every one).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "rankscope/analysis/report.h"
#include "rankscope/coordinator/info.h"
#include "rankscope/model/error.h"
#include "rankscope/timeline/schema.h"
#include "rankscope/timeline/timeline.h"

namespace {

using rankscope::schema::Handle;
using Extent = std::pair<uint64_t, uint64_t>;  // [first byte, end)

enum Outcome : char { kSame = 's', kRefused = 'r', kDamage = 'd', kSilent = 'l', kCrash = 'c', kHang = 'h' };

// The bytes of every dataset's rows, as HDF5 placed them.
herr_t collect_rows(hid_t group, const char* name, const H5L_info_t*, void* data) {
  auto& extents = *static_cast<std::vector<Extent>*>(data);
  H5O_info_t info;
  if (H5Oget_info_by_name(group, name, &info, H5P_DEFAULT) < 0 || info.type != H5O_TYPE_DATASET) return 0;
  const Handle dataset(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose);
  const Handle creation(H5Dget_create_plist(dataset), H5Pclose);
  if (H5Pget_layout(creation) == H5D_CHUNKED) {
    const Handle space(H5Dget_space(dataset), H5Sclose);  // HDF5 1.10 refuses H5S_ALL here
    hsize_t chunks = 0;
    H5Dget_num_chunks(dataset, space, &chunks);
    for (hsize_t i = 0; i < chunks; ++i) {
      hsize_t offset[2] = {0, 0};
      unsigned filters = 0;
      haddr_t address = 0;
      hsize_t size = 0;
      if (H5Dget_chunk_info(dataset, space, i, offset, &filters, &address, &size) >= 0 && address != HADDR_UNDEF)
        extents.emplace_back(address, address + size);
    }
  } else if (const haddr_t address = H5Dget_offset(dataset); address != HADDR_UNDEF) {
    extents.emplace_back(address, address + H5Dget_storage_size(dataset));
  }
  return 0;
}

std::vector<uint64_t> metadata_bytes(const std::string& path) {
  rankscope::schema::silence_hdf5_errors();
  std::vector<Extent> rows;
  {
    const Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (!file.valid()) throw rankscope::Error("cannot open " + path);
    H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, collect_rows, &rows);
  }
  std::sort(rows.begin(), rows.end());
  std::vector<uint64_t> bytes;
  uint64_t at = 0;
  const uint64_t size = std::filesystem::file_size(path);
  for (const auto& [first, end] : rows) {
    for (; at < std::min(first, size); ++at) bytes.push_back(at);
    at = std::max(at, end);
  }
  for (; at < size; ++at) bytes.push_back(at);
  return bytes;
}

struct Outputs {
  std::string info, report;
  bool damage_reported = false;
};

Outputs read_as_commands(const std::string& path) {
  const rankscope::Timeline timeline(path);
  const rankscope::EventsRead events_read = timeline.check_events();
  Outputs out;
  out.info = rankscope::info_text(timeline, events_read);
  const rankscope::analysis::Report report = rankscope::analysis::make_report(timeline);
  out.report = rankscope::analysis::report_text(report) + rankscope::analysis::report_json(report);
  out.damage_reported = !timeline.damage().empty();
  return out;
}

Outcome read_in_child(const std::string& path, const Outputs& intact) {
  int channel[2];
  if (::pipe(channel) != 0) throw rankscope::Error("pipe failed");
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(channel[0]);
    ::alarm(60);
    Outcome outcome = kRefused;
    try {
      const Outputs out = read_as_commands(path);
      outcome = out.info == intact.info && out.report == intact.report ? kSame
                : out.damage_reported                                    ? kDamage
                                                                         : kSilent;
    } catch (const rankscope::Error&) {
      outcome = kRefused;
    }
    const ssize_t written = ::write(channel[1], &outcome, 1);
    ::_exit(written == 1 ? 0 : 3);
  }
  ::close(channel[1]);
  char outcome = 0;
  const ssize_t got = ::read(channel[0], &outcome, 1);
  ::close(channel[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (WIFSIGNALED(status)) return WTERMSIG(status) == SIGALRM ? kHang : kCrash;
  return got == 1 ? static_cast<Outcome>(outcome) : kCrash;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: metadata_flips TIMELINE [--count N] [--seed S]\n");
    return 2;
  }
  const std::string original = argv[1];
  uint64_t count = 0, seed = 1;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--count") == 0) count = std::stoull(argv[i + 1]);
    if (std::strcmp(argv[i], "--seed") == 0) seed = std::stoull(argv[i + 1]);
  }
  try {
    std::vector<uint64_t> offsets = metadata_bytes(original);
    const uint64_t metadata = offsets.size();
    std::mt19937_64 random(seed);
    if (count > 0 && count < offsets.size()) {
      std::shuffle(offsets.begin(), offsets.end(), random);
      offsets.resize(count);
      std::sort(offsets.begin(), offsets.end());
    }
    std::ifstream in(original, std::ios::binary);
    const std::string intact_bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string copy = (std::filesystem::temp_directory_path() /
                              ("rankscope-metadata-flip-" + std::to_string(::getpid()) + ".h5"))
                                 .string();
    std::ofstream(copy, std::ios::binary) << intact_bytes;
    const Outputs intact = read_as_commands(copy);
    if (intact.damage_reported) throw rankscope::Error(original + " is damaged already");

    std::map<char, uint64_t> tally;
    std::map<char, std::vector<uint64_t>> examples;
    std::uniform_int_distribution<int> nonzero(1, 255);
    for (const uint64_t offset : offsets) {
      std::string bytes = intact_bytes;
      bytes[offset] = static_cast<char>(bytes[offset] ^ nonzero(random));
      std::ofstream(copy, std::ios::binary | std::ios::trunc) << bytes;
      const Outcome outcome = read_in_child(copy, intact);
      ++tally[outcome];
      if (examples[outcome].size() < 8) examples[outcome].push_back(offset);
    }
    std::filesystem::remove(copy);
    std::printf("%s: %zu bytes, %llu of them metadata; %zu flipped (seed %llu)\n", original.c_str(),
                intact_bytes.size(), static_cast<unsigned long long>(metadata), offsets.size(),
                static_cast<unsigned long long>(seed));
    const std::pair<char, const char*> names[] = {{kSame, "same"},     {kRefused, "refused"}, {kDamage, "damage"},
                                                  {kSilent, "silent"}, {kCrash, "crash"},     {kHang, "hang"}};
    for (const auto& [code, name] : names) {
      std::printf("  %-8s %llu", name, static_cast<unsigned long long>(tally[code]));
      if (code == kSilent || code == kCrash || code == kHang) {
        for (const uint64_t offset : examples[code]) std::printf(" @%llu", static_cast<unsigned long long>(offset));
      }
      std::printf("\n");
    }
    return tally[kSilent] + tally[kCrash] + tally[kHang] > 0 ? 1 : 0;
  } catch (const rankscope::Error& e) {
    std::fprintf(stderr, "metadata_flips: %s\n", e.what());
    return 2;
  }
}
