// damage_timeline FILE set DATASET ROW FIELD VALUE | get DATASET ROW FIELD | find DATASET FIELD VALUE |
//                 unlink DATASET | flip DATASET ROW BYTE
// For the command-line tests of damaged timelines (timeline_damage.h).
#include <cstdio>
#include <string>

#include "rankscope/model/error.h"
#include "timeline_damage.h"

int main(int argc, char** argv) {
  namespace t = rankscope::testing;
  const std::string verb = argc > 2 ? argv[2] : "";
  try {
    if (verb == "set" && argc == 7) {
      t::set_timeline_value(argv[1], argv[3], std::stoull(argv[4]), argv[5], std::stoll(argv[6]));
    } else if (verb == "get" && argc == 6) {
      std::printf("%lld\n", static_cast<long long>(t::get_timeline_value(argv[1], argv[3], std::stoull(argv[4]), argv[5])));
    } else if (verb == "find" && argc == 6) {  // the first row whose FIELD is VALUE
      const long long wanted = std::stoll(argv[5]);
      for (uint64_t row = 0;; ++row) {  // get throws past the last row
        if (t::get_timeline_value(argv[1], argv[3], row, argv[4]) == wanted) {
          std::printf("%llu\n", static_cast<unsigned long long>(row));
          break;
        }
      }
    } else if (verb == "unlink" && argc == 4) {  // as a timeline written before DATASET existed
      t::unlink_timeline_dataset(argv[1], argv[3]);
    } else if (verb == "flip" && argc == 6) {
      t::flip_timeline_byte(argv[1], argv[3], std::stoull(argv[4]), std::stoull(argv[5]));
    } else {
      std::fprintf(stderr,
                   "usage: damage_timeline FILE set DATASET ROW FIELD VALUE | get DATASET ROW FIELD | "
                   "find DATASET FIELD VALUE | unlink DATASET | flip DATASET ROW BYTE\n");
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "damage_timeline: %s\n", e.what());
    return 1;
  }
  return 0;
}
