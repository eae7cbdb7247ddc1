#!/usr/bin/env bash
# Clock-sync accuracy and cost for 2 to 64 ranks on this machine, each rank
# with an injected clock (offsets up to ±10 s, drifts up to ±200 ppm, seeded),
# and the modelled cost of a round at 4,096 nodes.
# Usage: bench/clocksync_bench.sh [ROUNDS=20]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-20}
"$root/scripts/build.sh" "$root/build" >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
echo "# clock sync: $rounds rounds per job, $(nproc) cores, $(date -u +%F)"
echo
echo "| ranks | error max ns | error p99 ns | bound median ns | bound max ns | bound covers truth | round median ms | round max ms |"
echo "|---|---|---|---|---|---|---|---|"
for np in 2 4 8 16 32 64; do
  spec=$(python3 -c "
import random
random.seed($np)
print(','.join(f'{r}:{random.randint(-10**10, 10**10):+d}:{random.uniform(-200, 200):+.3f}' for r in range($np)))")
  line=$(RANKSCOPE_FAKE_CLOCK=$spec mpirun -n "$np" "$root/build/bench/bench_clocksync" "$rounds" 50)
  awk '{printf "| %s | %s | %s | %s | %s | %.2f %% | %s | %s |\n", $2, $6, $8, $10, $12, 100*$14, $16, $18}' <<<"$line"
done
