#!/usr/bin/env bash
# A Flink session cluster on this machine, started the way Flink's bin/ scripts start one: a JobManager
# (StandaloneSessionClusterEntrypoint) and TaskManagers (TaskManagerRunner), each its own JVM, sized by Flink's
# BashJavaUtils, on a class path of Maven artifacts (flink-dist is not on Maven Central; pom.xml here lists what its
# lib/ holds). Jobs are submitted with Flink's own CLI (CliFrontend, i.e. `flink run`).
#
#   scripts/cluster/cluster.sh start [TASKMANAGERS]    JobManager + TaskManagers (default 2); waits until all registered
#   scripts/cluster/cluster.sh run ARGS...             flink run ARGS... (e.g. -d jobs/target/mstar-jobs-*.jar serve ...)
#   scripts/cluster/cluster.sh kill-taskmanager N      SIGKILL TaskManager N (1-based)
#   scripts/cluster/cluster.sh start-taskmanager N     (re)start TaskManager N
#   scripts/cluster/cluster.sh kill-jobmanager [N]     SIGKILL the JobManager (with high availability: JobManager N)
#   scripts/cluster/cluster.sh start-jobmanager        (re)start the JobManager (same ports; TaskManagers rejoin)
#   scripts/cluster/cluster.sh start-ha [TASKMANAGERS] high availability: ZooKeeper, JobManagers 1 and 2 (one leads,
#                                                      one stands by), TaskManagers; waits until all registered
#   scripts/cluster/cluster.sh stop                    SIGTERM everything this script started
#
# Settings (environment): MSTAR_CLUSTER_DIR (conf, logs, pids; default target/flink-cluster in the checkout),
# MSTAR_REST_PORT (8081), MSTAR_RPC_PORT (6123), MSTAR_TM_SLOTS (slots per TaskManager, 2),
# MSTAR_TM_MEMORY (taskmanager.memory.process.size, 1600m), MSTAR_TM_JAVA_OPTS (extra TaskManager JVM flags, as
# env.java.opts.taskmanager), MSTAR_FLINK_CONF (extra config.yaml lines); with
# start-ha: MSTAR_ZOOKEEPER_PORT (2181) and MSTAR_REST_PORT_2 (JobManager 2's REST port, 8082).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dir="${MSTAR_CLUSTER_DIR:-$root/target/flink-cluster}"
rest_port="${MSTAR_REST_PORT:-8081}"
rest_ports="$rest_port ${MSTAR_REST_PORT_2:-8082}" # JobManager 1's and 2's with high availability
zk_port="${MSTAR_ZOOKEEPER_PORT:-2181}"
cp_file="$here/target/flink.classpath"

classpath() {
  if [[ ! -s "$cp_file" ]]; then
    echo "resolving the Flink class path (first run only) ..." >&2
    mvn -q -B -ntp -f "$here/pom.xml" dependency:build-classpath -Dmdep.outputFile=target/flink.classpath >&2
  fi
  cat "$cp_file"
}

write_config() {
  mkdir -p "$dir/conf" "$dir/log"
  cat > "$dir/conf/config.yaml" <<EOF
jobmanager.rpc.address: localhost
jobmanager.bind-host: localhost
jobmanager.rpc.port: ${MSTAR_RPC_PORT:-6123}
jobmanager.memory.process.size: 1024m
rest.address: localhost
rest.bind-address: localhost
rest.port: $rest_port
taskmanager.host: localhost
taskmanager.bind-host: localhost
taskmanager.numberOfTaskSlots: ${MSTAR_TM_SLOTS:-2}
taskmanager.memory.process.size: ${MSTAR_TM_MEMORY:-1600m}
# one slot per TaskManager before a second on any, so losing one TaskManager loses part of the job
# (Flink 2 dropped cluster.evenly-spread-out-slots; this is its successor)
taskmanager.load-balance.mode: SLOTS
# notice a killed TaskManager within seconds rather than the default 50 s
heartbeat.interval: 1000
heartbeat.timeout: 5000
restart-strategy.type: exponential-delay
# the tokenizer's native library comes from the cluster's class path, one copy for every job (see pom.xml)
classloader.parent-first-patterns.additional: ai.djl.
env.java.opts.all: --add-opens=java.base/java.util=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED
${MSTAR_FLINK_CONF:-}
EOF
  if [[ "${1:-}" == ha ]]; then
    # leader election in ZooKeeper; job graphs and checkpoint pointers in the storage folder
    cat >> "$dir/conf/config.yaml" <<EOF
high-availability.type: zookeeper
high-availability.zookeeper.quorum: localhost:$zk_port
high-availability.storageDir: file://$dir/ha
high-availability.cluster-id: /mstar
EOF
  fi
  cp "$here/log4j2.properties" "$dir/conf/log4j.properties"
}

# BashJavaUtils prints the JVM memory flags and the dynamic properties that go with them, as taskmanager.sh uses.
resource_params() { # GET_JM_RESOURCE_PARAMS | GET_TM_RESOURCE_PARAMS
  java -cp "$(classpath)" org.apache.flink.runtime.util.bash.BashJavaUtils "$1" --configDir "$dir/conf" \
    | grep '^BASH_JAVA_UTILS_EXEC_RESULT:' | sed 's/^BASH_JAVA_UTILS_EXEC_RESULT://'
}

launch() { # name main-class jvm-params args...
  local name="$1" main="$2" jvm="$3"; shift 3
  # shellcheck disable=SC2086  # jvm holds several flags
  nohup java $jvm --add-opens=java.base/java.util=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED \
      -Dlog.file="$dir/log/$name.log" -Dlog4j.configurationFile="$dir/conf/log4j.properties" \
      -cp "$(classpath)" "$main" --configDir "$dir/conf" "$@" > "$dir/log/$name.out" 2>&1 &
  echo $! > "$dir/$name.pid"
}

start_jobmanager() { # [N]: JobManager N of a cluster with high availability, on its REST port and any RPC port
  local name=jobmanager extra=()
  if [[ -n "${1:-}" ]]; then
    name="jobmanager-$1"
    extra=(-Drest.port="$(cut -d' ' -f"$1" <<< "$rest_ports")" -Djobmanager.rpc.port=0)
  fi
  launch "$name" org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint \
      "$(head -n1 <<< "$(resource_params GET_JM_RESOURCE_PARAMS)")" "${extra[@]}"
}

start_zookeeper() { # one ZooKeeper server on 127.0.0.1, from Flink's shaded copy
  mkdir -p "$dir/zookeeper"
  printf 'clientPort=%s\nclientPortAddress=127.0.0.1\ndataDir=%s\ntickTime=500\n' "$zk_port" "$dir/zookeeper" \
      > "$dir/conf/zoo.cfg"
  nohup java -Dzookeeper.admin.enableServer=false -cp "$(classpath)" \
      org.apache.flink.shaded.zookeeper3.org.apache.zookeeper.server.ZooKeeperServerMain "$dir/conf/zoo.cfg" \
      > "$dir/log/zookeeper.out" 2>&1 &
  echo $! > "$dir/zookeeper.pid"
}

start_taskmanager() {
  local n="$1" params jvm dynamic
  params="$(resource_params GET_TM_RESOURCE_PARAMS)"
  jvm="$(head -n1 <<< "$params")"
  dynamic="$(tail -n1 <<< "$params")"
  mkdir -p "$dir/tmp/taskmanager-$n"
  # shellcheck disable=SC2086  # dynamic holds several -D key=value pairs
  launch "taskmanager-$n" org.apache.flink.runtime.taskexecutor.TaskManagerRunner "$jvm ${MSTAR_TM_JAVA_OPTS:-}" $dynamic \
      -Dtaskmanager.resource-id="taskmanager-$n" -Dio.tmp.dirs="$dir/tmp/taskmanager-$n"
}

registered_taskmanagers() { # as the leading JobManager counts them (a standby answers none)
  local most=0 count port
  for port in $rest_port ${ha_ports:-}; do
    count="$({ curl -sf "http://localhost:$port/taskmanagers" || true; } | grep -o '"id":"[^"]*"' | wc -l)"
    if (( count > most )); then most=$count; fi
  done
  echo "$most"
}

await_taskmanagers() { # count
  for _ in $(seq 1 120); do
    if [[ "$(registered_taskmanagers)" -ge "$1" ]]; then
      return 0
    fi
    sleep 0.5
  done
  echo "fewer than $1 TaskManagers registered within 60 s; logs in $dir/log" >&2
  return 1
}

case "${1:-}" in
  start)
    count="${2:-2}"
    write_config
    start_jobmanager
    for n in $(seq 1 "$count"); do
      start_taskmanager "$n"
    done
    await_taskmanagers "$count"
    echo "Flink cluster up: http://localhost:$rest_port, $count TaskManagers; conf and logs in $dir" >&2
    ;;
  start-ha)
    count="${2:-2}"
    ha_ports="$rest_ports"
    write_config ha
    start_zookeeper
    start_jobmanager 1
    start_jobmanager 2
    for n in $(seq 1 "$count"); do
      start_taskmanager "$n"
    done
    await_taskmanagers "$count"
    echo "Flink cluster with high availability up: JobManagers at ports ${rest_ports}, $count TaskManagers," \
        "ZooKeeper at 127.0.0.1:$zk_port; conf and logs in $dir" >&2
    ;;
  run)
    shift
    FLINK_CONF_DIR="$dir/conf" java --add-opens=java.base/java.util=ALL-UNNAMED \
        --add-opens=java.base/java.lang=ALL-UNNAMED -Dlog.file="$dir/log/client.log" \
        -Dlog4j.configurationFile="$dir/conf/log4j.properties" \
        -cp "$(classpath)" org.apache.flink.client.cli.CliFrontend run "$@"
    ;;
  kill-taskmanager)
    kill -9 "$(cat "$dir/taskmanager-${2:?which TaskManager}.pid")"
    echo "killed TaskManager ${2} (SIGKILL)" >&2
    ;;
  start-taskmanager)
    start_taskmanager "${2:?which TaskManager}"
    ;;
  kill-jobmanager)
    kill -9 "$(cat "$dir/jobmanager${2:+-$2}.pid")"
    echo "killed the JobManager ${2:-}(SIGKILL)" >&2
    ;;
  start-jobmanager)
    start_jobmanager
    await_taskmanagers "${2:-1}"
    ;;
  stop)
    for pid_file in "$dir"/*.pid; do
      [[ -e "$pid_file" ]] || continue
      kill "$(cat "$pid_file")" 2>/dev/null || true
      rm -f "$pid_file"
    done
    ;;
  *)
    sed -n '2,20p' "$0" >&2
    exit 2
    ;;
esac
