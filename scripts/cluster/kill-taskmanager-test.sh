#!/usr/bin/env bash
# The TaskManager kill test on a real Flink cluster (FlinkClusterKillITCase): builds the shaded job jar, then runs
# the test, which starts a Kafka broker, a JobManager and two TaskManagers (cluster.sh), submits `serve` with
# `flink run`, twice kills with SIGKILL a TaskManager that runs a generate subtask while a wave of requests is
# mid-generation (it sends waves until it sees one so), and checks that a read_committed consumer sees every token
# and result exactly once, identical to an uninterrupted run; then the same with the JobManager killed, and with
# prefill and decode in different TaskManagers handing KV off over TCP (kill-handoff-test.sh runs that one alone).
# Nothing is installed into the local Maven repository: the jar is packaged, then the test runs in the reactor.
# Logs: jobs/target/surefire-reports/ and the cluster's under the test's temporary folder (printed on failure).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
mvn -q -B -ntp -pl jobs -am package -DskipTests
mvn -B -ntp -pl jobs -am test-compile surefire:test -Dtest=FlinkClusterKillITCase -Dmstar.excluded.groups=gpu \
    -Dgroups=cluster -Dsurefire.failIfNoSpecifiedTests=false "$@"
