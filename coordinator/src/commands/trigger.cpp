// rankscope trigger JOB start|stop|dump
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <string>

#include "command.h"
#include "rankscope/clocksync/clock.h"
#include "rankscope/model/error.h"
#include "rankscope/model/shard.h"
#include "rankscope/model/text.h"
#include "rankscope/rank_agent/agent.h"

namespace rankscope::cli {
namespace {

namespace fs = std::filesystem;

// Every rank looks for the control file once a second, when its writer
// thread wakes (every --flush-ms, 200 ms by default): two seconds ahead, the
// trigger reaches every rank before its time.
constexpr std::chrono::seconds kLead{2};

}  // namespace

Command add_trigger(CLI::App& parent) {
  struct Options {
    std::string job;
    std::string action;
  };
  auto options = std::make_shared<Options>();
  CLI::App* app = parent.add_subcommand(
      "trigger", "Start or stop capture, or write the flight recorder's window, on every rank of a running job "
                 "(through a file in its shard folder; every rank carries it out at the same instant, 2 s on)");
  app->add_option("job", options->job, "The running job's timeline (its `run -o`), or its shard folder")
      ->required()
      ->check(kNonEmptyPath);
  app->add_option("action", options->action, "start, stop, or dump (with --ring)")
      ->required()
      ->check(CLI::IsMember({"start", "stop", "dump"}));
  return {app, [options] {
            return run_reporting_errors("trigger", [&] {
              const fs::path given(options->job);
              const fs::path shards = given.extension() == ".shards" ? given : fs::path(options->job + ".shards");
              std::error_code error;
              if (!fs::is_directory(shards, error)) {
                throw Error("no running job writes " + shards.string() + " (the shard folder of `rankscope run -o " +
                            options->job + "`): it does not exist or has been merged");
              }
              // A folder left behind by a job that ended (killed, or never merged) has no rank to carry it out.
              if (!shard_folder_in_use(shards.string())) {
                throw Error("no running job writes " + shards.string() + ": no process holds any of its shards (the "
                            "job ended; `rankscope merge " + shards.string() + " -o FILE` merges what it left)");
              }
              const fs::path control = shards / agent::kControlFileName;
              // The earlier triggers stay, the latest kControlFileTriggers of
              // them: a rank reads the file once a second, and takes every
              // trigger it has not seen.
              uint64_t serial = 0;
              // A later trigger is carried out after the latest one, even where
              // the wall clock stepped back between the two commands.
              int64_t latest_at = 0;
              std::deque<std::string> kept;
              if (std::ifstream earlier(control); earlier) {
                for (std::string line; std::getline(earlier, line);) {
                  agent::Trigger trigger;
                  if (!agent::parse_trigger(line, trigger)) continue;
                  serial = std::max(serial, trigger.serial);
                  latest_at = std::max(latest_at, trigger.at_wall_ns);
                  kept.push_back(line + "\n");
                  if (kept.size() >= agent::kControlFileTriggers) kept.pop_front();
                }
              }
              const int64_t at = std::max(clocksync::wall_now_ns() + std::chrono::nanoseconds(kLead).count(), latest_at);
              kept.push_back(std::to_string(serial + 1) + " " + options->action + " " + std::to_string(at) + "\n");
              // Whole or not at all: a rank may read it at any moment.
              const fs::path partial = control.string() + ".partial";
              {
                std::ofstream out(partial, std::ios::trunc);
                for (const std::string& line : kept) out << line;
                if (!out.flush()) throw Error("cannot write " + partial.string() + ": " + errno_text(errno));
              }
              fs::rename(partial, control, error);
              if (error) throw Error("cannot write " + control.string() + ": " + error.message());
              const std::time_t seconds = static_cast<std::time_t>(at / 1'000'000'000);
              std::tm utc{};
              gmtime_r(&seconds, &utc);
              char when[32];
              std::strftime(when, sizeof(when), "%H:%M:%S", &utc);
              std::printf("rankscope trigger: %s at %s.%01d UTC on every rank of %s (trigger %llu)\n",
                          options->action.c_str(), when, static_cast<int>(at / 100'000'000 % 10), shards.string().c_str(),
                          static_cast<unsigned long long>(serial + 1));
              return 0;
            });
          }};
}

}  // namespace rankscope::cli
