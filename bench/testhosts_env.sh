# Sourced by the benchmarks on test hosts (scripts/testhosts.sh, as root):
# brings up HOSTS hosts of cluster CLUSTER, one slot each, in a work folder
# of their own ($work), both removed however the benchmark ends.
# Usage: . testhosts_env.sh CLUSTER HOSTS
set -euo pipefail
testhosts=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../scripts/testhosts.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 RANKSCOPE_TESTHOSTS_CLUSTER=$1
work=$(mktemp -d)
trap '"$testhosts" down; rm -rf "$work"' EXIT
"$testhosts" up "$2" --slots 1 >/dev/null
