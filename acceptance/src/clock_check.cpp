// The check `clock`: how well a node's event clock is known against rank 0's.
#include "rankscope/acceptance/fleet_rules.h"
#include "rankscope/acceptance/measurements.h"
#include "rankscope/acceptance/verdict.h"
#include "rankscope/model/text.h"

namespace rankscope::acceptance {

Check clock_check(const NodeClock& clock, const Rules& rules) {
  const double limit_us = static_cast<double>(rules.clock_bound_limit_ns) / 1e3;
  Check check{"clock", "", printf_string("%.0f us", limit_us) + " (limit)", 1,
              printf_string("fail when a clock sync round measured nothing, or its bound is above %.0f us: events of "
                            "the node could not be ordered against other nodes' at the scale of a collective",
                            limit_us),
              Verdict::pass};
  if (!clock.error.empty()) {
    check.value = "not synchronised: " + clock.error;
    check.ratio = 0;
    check.verdict = Verdict::fail;
    return check;
  }
  check.value = printf_string("offset %.1f us", static_cast<double>(clock.offset_ns) / 1e3) +
                printf_string(", bound %.1f us", static_cast<double>(clock.bound_ns) / 1e3);
  // Lower is worse, as for every check: the limit over the bound, 1 within it.
  check.ratio = clock.bound_ns > rules.clock_bound_limit_ns
                    ? static_cast<double>(rules.clock_bound_limit_ns) / static_cast<double>(clock.bound_ns)
                    : 1;
  if (clock.bound_ns > rules.clock_bound_limit_ns) check.verdict = Verdict::fail;
  return check;
}

}  // namespace rankscope::acceptance
