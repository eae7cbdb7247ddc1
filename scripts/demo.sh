#!/usr/bin/env bash
# The main job: installs what is missing, builds, profiles the bundled example
# under mpirun, and prints where the results are.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${RANKSCOPE_DEMO_OUT:-$root/demo-output}
ranks=${RANKSCOPE_DEMO_RANKS:-4}
"$root/scripts/setup-deps.sh"
"$root/scripts/build.sh" "$root/build"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
rankscope=$root/build/coordinator/rankscope
rm -rf "$out" && mkdir -p "$out"

# The rank agent does not exist yet: the job's shards come from the synthetic
# job generator, which writes them as the agent will, each rank on a skewed
# clock with its clock measurements, so the merge has clocks to correct.
echo "== writing the shards of a synthetic $ranks-rank job with skewed clocks (rank agent: not yet available)"
"$root/build/tests/support/make_synthetic_shards" "$out/job.shards" "$ranks" 200000 --skewed 1

echo "== merging them in parallel: mpirun -n 2 rankscope merge"
mpirun -n 2 "$rankscope" merge "$out/job.shards" -o "$out/job.h5"

echo "== rankscope info"
"$rankscope" info "$out/job.h5" | tee "$out/info.txt"
"$rankscope" info --json "$out/job.h5" >"$out/info.json"

cat <<DONE

results in $out:
  timeline          $out/job.h5          (HDF5; docs/format.md)
  shards            $out/job.shards/     (kept until you delete them)
  summary           $out/info.txt, $out/info.json
  Perfetto trace    not yet available (rankscope export)
  analysis report   not yet available (rankscope report)
DONE
