#!/usr/bin/env bash
# The hand-off transport between two TaskManagers (mstar bench-handoff): builds the shaded job jar, starts a
# JobManager and two TaskManagers of one slot each (cluster.sh), so that the prefill side (slot sharing group default)
# and the decode side (group decode) run in different TaskManager processes, submits the bench with `flink run`
# (records, then tickets pulled over TCP), prints its table and stops the cluster. Arguments go to bench-handoff,
# e.g. --prompt-lens 1024,4096,12288 --repeats 10. The TaskManagers hold a 12k-token prompt's KV (1.5 GiB) several
# times on their heaps: MSTAR_TM_MEMORY (default 6g here) sizes them. MSTAR_SKIP_BUILD=1 reuses the jar.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
if [[ -z "${MSTAR_SKIP_BUILD:-}" ]]; then
  mvn -q -B -ntp -pl jobs -am package -DskipTests
fi
export MSTAR_CLUSTER_DIR="${MSTAR_CLUSTER_DIR:-$root/target/handoff-bench-cluster}"
export MSTAR_TM_SLOTS=1 MSTAR_TM_MEMORY="${MSTAR_TM_MEMORY:-6g}"
export MSTAR_FLINK_CONF="${MSTAR_FLINK_CONF:-taskmanager.memory.managed.size: 64m}"
# the receiver's fresh arrays fault their pages in one by one (about 1 GB/s on a small host) unless the heap is
# touched at start; docs/architecture/disaggregation.md has the numbers
export MSTAR_TM_JAVA_OPTS="${MSTAR_TM_JAVA_OPTS--XX:+AlwaysPreTouch}"
scripts/cluster/cluster.sh start 2
trap 'scripts/cluster/cluster.sh stop' EXIT
scripts/cluster/cluster.sh run jobs/target/mstar-jobs-*.jar bench-handoff "$@"
