#include "rankscope/importers/kineto.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>
#include <map>
#include <memory>

#include "kineto_align.h"
#include "kineto_job.h"
#include "kineto_trace.h"
#include "rankscope/model/error.h"
#include "rankscope/model/input_files.h"
#include "rankscope/model/metadata.h"
#include "rankscope/model/parallel.h"
#include "rankscope/model/temporary_paths.h"
#include "rankscope/mpi_exchange/gather.h"

namespace rankscope {
namespace {

using kineto::CollectiveRecord;
using kineto::RankCollectives;
using kineto::TraceImport;

// What every process learns of each trace.
struct FileHeader {
  uint32_t index;
  int32_t rank;
  int32_t world_size;
  uint32_t problem_lines;
  uint32_t process_groups;
  int64_t base_ns, first_ns, last_ns;
  uint64_t events, bytes, problems, records;
};

struct SharedFile {
  FileHeader header{};
  RankCollectives collectives;
  kineto::TraceSummary summary;  // all but the counts, which are in the header
};

std::string pack(const std::vector<size_t>& mine, const std::vector<std::unique_ptr<TraceImport>>& imports) {
  std::string out;
  for (size_t k = 0; k < mine.size(); ++k) {
    const kineto::TraceSummary& s = imports[k]->summary();
    const RankCollectives& c = imports[k]->collectives();
    const FileHeader header{static_cast<uint32_t>(mine[k]),
                            s.rank,
                            s.world_size,
                            static_cast<uint32_t>(s.problem_lines.size()),
                            static_cast<uint32_t>(s.process_groups.size()),
                            s.base_ns,
                            s.first_ns,
                            s.last_ns,
                            s.events,
                            s.bytes,
                            s.problems,
                            c.records.size()};
    out.append(reinterpret_cast<const char*>(&header), sizeof(header));
    out.append(reinterpret_cast<const char*>(c.records.data()), c.records.size() * sizeof(CollectiveRecord));
    for (const std::string& line : s.problem_lines) append_record(out, line);
    append_record(out, s.backend);
    append_record(out, s.host);
    for (const kineto::ProcessGroup& group : s.process_groups) {
      append_record(out, group.name);
      append_record(out, group.members);
    }
  }
  return out;
}

std::vector<SharedFile> unpack(const std::vector<char>& all, const std::vector<std::string>& inputs) {
  std::vector<SharedFile> out(inputs.size());
  for (size_t pos = 0; pos + sizeof(FileHeader) <= all.size();) {
    FileHeader header;
    std::memcpy(&header, all.data() + pos, sizeof(header));
    pos += sizeof(header);
    SharedFile& file = out.at(header.index);
    file.header = header;
    file.collectives.rank = header.rank;
    file.collectives.records.resize(header.records);
    std::memcpy(file.collectives.records.data(), all.data() + pos, header.records * sizeof(CollectiveRecord));
    pos += header.records * sizeof(CollectiveRecord);
    const auto next_record = [&] {
      uint32_t length = 0;
      std::memcpy(&length, all.data() + pos, 4);
      std::string text(all.data() + pos + 4, length);
      pos += 4 + length;
      return text;
    };
    kineto::TraceSummary& summary = file.summary;
    summary.path = inputs[header.index];
    summary.rank = header.rank;
    summary.world_size = header.world_size;
    summary.base_ns = header.base_ns;
    summary.first_ns = header.first_ns;
    summary.last_ns = header.last_ns;
    for (uint32_t k = 0; k < header.problem_lines; ++k) summary.problem_lines.push_back(next_record());
    summary.backend = next_record();
    summary.host = next_record();
    file.collectives.host = summary.host;
    for (uint32_t k = 0; k < header.process_groups; ++k) {
      std::string name = next_record();
      summary.process_groups.push_back({std::move(name), next_record()});
    }
  }
  return out;
}

// A rank and world size the job can hold: else an Error naming the trace,
// before anything is sized by them.
void check_size(const kineto::TraceSummary& trace) {
  const std::string largest =
      " is beyond the largest job rankscope takes (" + std::to_string(kMaxWorldSize) + " ranks)";
  if (trace.world_size > kMaxWorldSize) {
    throw Error(trace.path + ": distributedInfo.world_size " + std::to_string(trace.world_size) + largest);
  }
  if (trace.rank >= kMaxWorldSize) throw Error(trace.path + ": rank " + std::to_string(trace.rank) + largest);
  if (trace.world_size > 0 && trace.rank >= trace.world_size) {
    throw Error(trace.path + ": rank " + std::to_string(trace.rank) + " is not in its job of " +
                std::to_string(trace.world_size) + " ranks (distributedInfo.world_size)");
  }
}

// Reads the traces at `mine` on up to `threads` threads; the first error, if any.
std::string read_traces(const std::vector<std::string>& inputs, const std::vector<size_t>& mine,
                        const std::string& folder, std::vector<std::unique_ptr<TraceImport>>& imports,
                        const kineto::ImportSettings& settings, unsigned threads) {
  for (size_t index : mine) {
    imports.push_back(std::make_unique<TraceImport>(inputs[index],
                                                    folder + "/trace-" + std::to_string(index) + ".shard", settings));
  }
  std::vector<std::string> errors(mine.size());
  for_each_index(mine.size(), threads, [&](size_t k) {
    try {
      imports[k]->read();
    } catch (const Error& e) {
      errors[k] = e.what();
    } catch (const std::exception& e) {
      errors[k] = inputs[mine[k]] + ": " + e.what();
    }
  });
  for (const std::string& error : errors) {
    if (!error.empty()) return error;
  }
  return {};
}

}  // namespace

std::vector<std::string> expand_trace_inputs(const std::vector<std::string>& inputs) {
  return expand_folders(
      inputs,
      [](std::string_view name) {
        auto ends = [&](std::string_view suffix) {
          return name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
        };
        return ends(".json") || ends(".json.gz");
      },
      ".json or .json.gz traces");
}

std::string comm_kernel_pattern_problem(const std::string& pattern) {
  if (pattern.empty()) return "is empty: it would match every kernel";
  try {
    std::regex check(pattern);
  } catch (const std::regex_error& e) {
    return std::string("is not a regular expression: ") + e.what();
  }
  return "";
}

KinetoImportResult import_kineto(MPI_Comm comm, const KinetoImportOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  int process = 0, processes = 1;
  MPI_Comm_rank(comm, &process);
  MPI_Comm_size(comm, &processes);
  if (options.output.empty()) throw Error("no output file given");
  const std::vector<std::string> inputs = expand_trace_inputs(options.inputs);
  if (inputs.empty()) throw Error("no traces to import");

  kineto::ImportSettings settings;
  settings.comm_kernel_patterns = options.comm_kernel_patterns;
  for (const std::string& pattern : settings.comm_kernel_patterns) {
    if (const std::string problem = comm_kernel_pattern_problem(pattern); !problem.empty()) {
      throw Error("--comm-kernel \"" + pattern + "\" " + problem);
    }
  }

  // The shards go beside the timeline, where every process can see them, in
  // a folder of a name no other folder has, so nothing there is replaced.
  std::string error;
  std::unique_ptr<TemporaryPath> shard_folder;
  if (process == 0) {
    std::string name = options.output + ".import-XXXXXX";
    // One level only: a missing folder for the timeline is the user's to make.
    if (::mkdtemp(name.data())) {
      shard_folder = std::make_unique<TemporaryPath>(name);
    } else {
      error = "cannot create " + name + ": " + errno_text(errno);
    }
  }
  check_all(comm, error);
  const std::string folder = allgather_strings(comm, {shard_folder ? shard_folder->path() : std::string()}).front();

  // 1. Each process reads its share of the traces.
  std::vector<size_t> mine;
  for (size_t i = static_cast<size_t>(process); i < inputs.size(); i += static_cast<size_t>(processes)) mine.push_back(i);
  std::vector<std::unique_ptr<TraceImport>> imports;
  const unsigned threads = options.threads ? options.threads : usable_cpus();
  error = read_traces(inputs, mine, folder, imports, settings, threads);
  check_all(comm, error);

  // 2. Everyone learns every trace's rank, clock base and communication
  // kernels, and whether they can be one job's.
  const std::vector<SharedFile> files = unpack(allgather_bytes(comm, pack(mine, imports)), inputs);
  std::vector<kineto::TraceSummary> traces;
  for (const SharedFile& f : files) traces.push_back(f.summary);
  std::map<int32_t, size_t> by_rank;
  kineto::ImportedJob job;
  for (size_t i = 0; i < traces.size(); ++i) {
    const kineto::TraceSummary& t = traces[i];
    if (t.rank < 0) {
      throw Error(inputs[i] + ": no rank: the trace has no distributedInfo.rank and the file name names none "
                              "(for example trace_rank-3.json)");
    }
    check_size(t);
    const auto [it, inserted] = by_rank.emplace(t.rank, i);
    if (!inserted) throw Error(inputs[it->second] + " and " + inputs[i] + " are both rank " + std::to_string(t.rank));
    job.world_size = std::max({job.world_size, t.world_size, t.rank + 1});
    // torch.profiler names no job: it is known by when its traces begin.
    const int64_t begins = t.base_ns + t.first_ns;
    if (t.first_ns <= t.last_ns && (job.identity.start_wall_ns == 0 || begins < job.identity.start_wall_ns)) {
      job.identity.start_wall_ns = begins;
    }
  }
  if (job.identity.start_wall_ns == 0) {
    std::string why;
    for (size_t i = 0; i < traces.size() && i < 3; ++i) {
      why += "; " + (traces[i].problem_lines.empty() ? inputs[i] + ": no event of a kind rankscope imports"
                                                      : traces[i].problem_lines.front());
    }
    throw Error("no trace holds an event rankscope imports, so there is nothing to import" + why);
  }
  KinetoImportResult result;
  const std::vector<std::string> disagreements = kineto::job_disagreements(traces);
  if (!disagreements.empty() && !options.same_job) {
    std::string message;
    for (const std::string& reason : disagreements) message += reason + "\n";
    throw Error(message + "(--same-job imports them as one job all the same)");
  }
  for (const std::string& reason : disagreements) result.warnings.push_back("--same-job: " + reason);

  // 3. Match the communication kernels and align the clocks, the same on every process.
  std::vector<RankCollectives> collectives;
  for (const SharedFile& f : files) collectives.push_back(f.collectives);
  const kineto::Alignment alignment = kineto::align_ranks(collectives);
  for (const SharedFile& f : files) {
    if (f.header.rank == alignment.reference) job.reference_base_ns = f.header.base_ns;
  }

  // 4. Each process completes its shards.
  try {
    for (size_t k = 0; k < mine.size(); ++k) {
      const size_t i = mine[k];
      imports[k]->finish(job, alignment.ranks[i], alignment.instance[i], alignment.unmatched[i]);
    }
  } catch (const Error& e) {
    error = e.what();
  }
  check_all(comm, error);
  // A --comm-kernel pattern that no trace's kernel names match is likely a mistake.
  std::vector<int> matched(settings.comm_kernel_patterns.size(), 0);
  for (const auto& trace : imports) {
    for (size_t p = 0; p < matched.size(); ++p) matched[p] |= trace->patterns_matched()[p] ? 1 : 0;
  }
  MPI_Allreduce(MPI_IN_PLACE, matched.data(), static_cast<int>(matched.size()), MPI_INT, MPI_LOR, comm);
  imports.clear();

  result.reference_rank = alignment.reference;
  for (size_t p = 0; p < matched.size(); ++p) {
    if (!matched[p]) result.unmatched_patterns.push_back(settings.comm_kernel_patterns[p]);
  }
  for (size_t i = 0; i < files.size(); ++i) {
    const FileHeader& h = files[i].header;
    const kineto::RankAlignment& a = alignment.ranks[i];
    if (!a.doubt.empty()) {
      result.warnings.push_back(inputs[i] + ": the clock of rank " + std::to_string(h.rank) + " is not aligned: " +
                                a.doubt);
    }
    if (!a.host_doubt.empty()) {
      result.warnings.push_back(inputs[i] + ": the clock of rank " + std::to_string(h.rank) + ": " + a.host_doubt);
    }
    KinetoFileResult file;
    file.path = inputs[i];
    file.rank = h.rank;
    file.events = h.events;
    file.bytes = h.bytes;
    file.problems = h.problems;
    file.problem_lines = files[i].summary.problem_lines;
    file.aligned = a.aligned;
    file.offset_ns = a.offset_ns;
    file.bound_ns = a.bound_ns;
    file.anchor = a.anchor;
    file.matched = a.matched;
    file.unmatched = alignment.unmatched[i];
    file.consistent = a.consistent;
    result.json_bytes += h.bytes;
    result.files.push_back(std::move(file));
  }
  std::sort(result.files.begin(), result.files.end(),
            [](const KinetoFileResult& a, const KinetoFileResult& b) { return a.rank < b.rank; });
  result.read_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  for (size_t i = 0; i < inputs.size(); ++i) result.shards.push_back(folder + "/trace-" + std::to_string(i) + ".shard");
  result.shard_folder = std::move(shard_folder);
  return result;
}

}  // namespace rankscope
