#!/usr/bin/env bash
# A chaos run (issue #36): `mstar kafka` and `mstar serve --random` (one child process, or with `--target cluster`
# submitted to a session cluster of scripts/cluster/) under a steady load and a seeded fault schedule, then a check
# of everything a read_committed consumer saw. Options go to org.mstar.jobs.chaos.ChaosRun, for example:
#   scripts/chaos/chaos-run.sh --dir /tmp/chaos-1 --seconds 360 --rate 1 --seed 1 --faults-each 5
# Exit code 0 when every request ended exactly once with the reference's tokens, 1 otherwise.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cp_file="$root/jobs/target/chaos.classpath"
# Compiles the modules the job needs (not packaged: their classes folders go on the class path); the cluster target
# also needs the shaded job jar to submit.
goals=(compile)
if [[ " $* " == *" --target cluster "* ]]; then
  goals=(package -DskipTests)
fi
mvn -q -B -ntp -f "$root/pom.xml" -pl jobs -am "${goals[@]}" dependency:build-classpath \
    -Dmdep.outputFile=target/chaos.classpath -DincludeScope=compile ${MSTAR_MAVEN_OPTS:-} >&2
# DJL's tokenizer would otherwise try to report usage over the network
export OPT_OUT_TRACKING=true
exec java -Xmx1g --add-opens=java.base/java.util=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED \
    -Dmstar.root="$root" -cp "$root/jobs/target/classes:$(cat "$cp_file")" org.mstar.jobs.chaos.ChaosRun "$@"
