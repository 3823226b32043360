#!/usr/bin/env bash
# The TaskManager kill test on a real Flink cluster (FlinkClusterKillITCase): builds the shaded job jar, then runs
# the test, which starts a Kafka broker, a JobManager and two TaskManagers (cluster.sh), submits `serve` with
# `flink run`, kills TaskManager 1 and later TaskManager 2 with SIGKILL while requests stream, and checks that a
# read_committed consumer sees every token and result exactly once, identical to an uninterrupted run.
# Logs: jobs/target/surefire-reports/ and the cluster's under the test's temporary folder (printed on failure).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
mvn -q -B -ntp -pl jobs -am install -DskipTests
mvn -B -ntp -pl jobs surefire:test -Dtest=FlinkClusterKillITCase -Dmstar.excluded.groups=gpu -Dgroups=cluster \
    -Dsurefire.failIfNoSpecifiedTests=false "$@"
