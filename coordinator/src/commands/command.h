// What the subcommands of `rankscope` share: how each registers itself and
// how those that may run under mpirun start MPI.
#pragma once

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>

#include "rankscope/coordinator/launcher.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope::cli {

// A subcommand registered with the command line; `run` is called when it was
// given, after parsing, and returns the process's exit status.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_merge(CLI::App& parent);
Command add_import_kineto(CLI::App& parent);
Command add_info(CLI::App& parent);
Command add_report(CLI::App& parent);
Command add_diff(CLI::App& parent);
Command add_export(CLI::App& parent);
Command add_accept(CLI::App& parent);
Command add_trigger(CLI::App& parent);
// `run` takes the application's command line, everything after the first
// `--`, unparsed: its arguments are its own.
Command add_run(CLI::App& parent, std::shared_ptr<std::vector<std::string>> application);

// A path given on the command line: "" names no file.
extern const CLI::Validator kNonEmptyPath;

// A finite number from `min` to `max` (CLI::Range lets NaN through).
CLI::Validator finite_range(double min, double max);

// Step numbers (rankscope/model/steps.h): A:B, A, A: or :B, and where
// `repeats` is allowed, A:B/PERIOD.
CLI::Validator step_selection_check(bool repeats);

// Whether mpirun (or another launcher) started this process: it is then one
// process of an MPI job, perhaps of several.
bool started_by_mpi_launcher();

// Runs `body` on every process of MPI_COMM_WORLD; errors are printed once,
// by process 0, as "rankscope COMMAND: error: ...". Temporary files are
// removed when a signal ends the process (remove_temporary_paths_on_signals).
// `lone_rank_zero`: whether the command's launcher rank 0, alone in a world
// of one, can do the command's whole job (check_launcher_joined).
int run_under_mpi(const char* command, LoneRankZero lone_rank_zero,
                  const std::function<void(int process, int processes)>& body);

// Runs `body` in one process; an Error it throws is printed as "rankscope
// COMMAND: error: ..." and becomes `error_status`.
int run_reporting_errors(const char* command, const std::function<int()>& body, int error_status = 1);

// Says on stderr, when reading `timeline` found damage, what was left out.
void warn_about_damage(const char* command, const Timeline& timeline);

// For the commands that run the analyses, which read a step's events, free
// them and read the next step's, as large: freed memory is kept for them
// rather than handed back to the kernel and faulted in again. Elsewhere it
// only raised the peak. A C library that refuses is noted on stderr.
void keep_freed_memory_for_the_analyses();

// The largest peak resident memory of the processes, in MiB, on process 0.
double job_peak_mib(MPI_Comm comm);

// MergeOptions::derive_tables of every command that writes a timeline: the
// collectives matched across ranks (docs/format.md, "/collectives"). Where
// the analyses cannot read the new timeline, it is kept without them and
// `command` warns why.
std::function<void(const std::string&)> matched_collectives_writer(const char* command);

}  // namespace rankscope::cli
