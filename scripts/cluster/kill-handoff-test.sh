#!/usr/bin/env bash
# The network hand-off kill test on a real Flink cluster (FlinkClusterKillITCase#networkHandOffs...): builds the
# shaded job jar, starts a Kafka broker, a JobManager and two TaskManagers of one slot each (cluster.sh), submits
# `serve --disaggregated` with the KV handed off by ticket over TCP (mstar.disaggregation.network-handoff) and the
# decode operator in a slot sharing group of its own, so prefill and decode run in different TaskManagers; kills with
# SIGKILL the TaskManager running prefill while a wave of requests is mid-generation, starts a replacement, then kills
# the one running decode; a read_committed consumer must see every token and result exactly once, identical to an
# uninterrupted run. Several minutes on a small machine, so not in the default build.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
mvn -q -B -ntp -pl jobs -am package -DskipTests
mvn -B -ntp -pl jobs -am test-compile surefire:test \
    -Dtest='FlinkClusterKillITCase#networkHandOffsLoseAndRepeatNothingWhenThePrefillThenTheDecodeTaskManagerDies' \
    -Dmstar.excluded.groups=gpu -Dgroups=cluster -Dsurefire.failIfNoSpecifiedTests=false "$@"
