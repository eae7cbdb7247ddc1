// rankscope info TIMELINE [--json] [--check], info --counters, info --environment
#include <cstdio>

#include "rankscope/coordinator/info.h"
#include "command.h"
#include "rankscope/model/error.h"
#include "rankscope/model/input_files.h"
#include "rankscope/rank_agent/agent_settings.h"

namespace rankscope::cli {

Command add_info(CLI::App& parent) {
  struct Options {
    std::string path;
    bool json = false;
    bool counters = false;
    bool check = false;
    bool environment = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* app = parent.add_subcommand("info", "Summarize a timeline: ranks, events, drops, missing or dead ranks");
  app->add_option("timeline", options->path, "The HDF5 timeline")->check(kNonEmptyPath);
  app->add_flag("--json", options->json, "Print JSON instead of text");
  app->add_flag("--counters", options->counters, "List every data-quality counter and what it means");
  app->add_flag("--environment", options->environment,
                "List every environment variable the rank agent reads, with the option that sets it");
  app->add_flag("--check", options->check,
                "Read and check every event too; exit status 1 when anything is damaged (named with dataset, row "
                "and field)");
  app->callback([options] {
    if (options->path.empty() && !options->counters && !options->environment) {
      throw CLI::ValidationError("give a timeline, --counters or --environment");
    }
  });
  return {app, [options] {
            if (options->counters) {
              std::fputs(counters_text().c_str(), stdout);
              return 0;
            }
            if (options->environment) {
              std::fputs(agent::agent_variables_table().c_str(), stdout);
              return 0;
            }
            return run_reporting_errors("info", [&] {
              require_regular_file(options->path);
              const Timeline timeline(options->path);
              EventsRead events_read;
              if (options->check) events_read = timeline.check_events();
              std::fputs((options->json ? info_json(timeline, events_read) : info_text(timeline, events_read)).c_str(),
                         stdout);
              warn_about_damage("info", timeline);
              return options->check && !timeline.damage().empty() ? 1 : 0;
            });
          }};
}

}  // namespace rankscope::cli
