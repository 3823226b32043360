#!/usr/bin/env bash
# Builds, on a machine with a JDK 17, Maven and nvcc, everything a GPU machine without Java needs to run the
# whole pipeline (`mstar bench-pipeline`, `mstar bench-serving` with its sql side, `mstar demo`: Flink, its SQL
# planner, the in-process Kafka broker, RocksDB, the CUDA engine) into the git-ignored folder pipeline-bundle/,
# split into parts of at most PART_MIB (48) MiB, so that a remote runner carrying about 50 MiB per transfer can
# take them in consecutive calls:
#   jre/      a jlinked Java 17 runtime
#   lib1/ ... the class path (jobs, sql, operators, kernels with the fatbin, Flink with its table planner, Kafka,
#             RocksDB, ...), with the native libraries of other platforms removed from the jars (RocksDB's JNI jar
#             alone carries eleven)
#   bin/      run-pipeline.sh and MANIFEST (every file of every part with its size; the run script checks it)
# docs/guides/gpu-pipeline.md says how to run it.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUNDLE=${BUNDLE:-pipeline-bundle}
# A transfer carries about 50 MiB: each part, the runtime included, stays within 48.
PART_MIB=${PART_MIB:-48}
JCUDA_VERSION=12.6.0

mvn -B -q ${MVN_OFFLINE:+-o} -pl jobs,flink-mstar-sql -am install -DskipTests
# compile scope lists the provided dependencies too: Flink, Kafka and RocksDB for jobs; the table planner, its
# runtime and the JSON format for sql (which has jobs as provided, so jobs' own provided ones come from jobs' list)
for module in jobs flink-mstar-sql; do
    mvn -B -q ${MVN_OFFLINE:+-o} -pl $module dependency:build-classpath -Dmdep.outputFile=target/mstar.classpath \
        -DincludeScope=compile
done

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/.staging"
staging="$BUNDLE/.staging"
# the runtime (JFR included: JAVA_OPTS=-XX:StartFlightRecording=... run-pipeline.sh ...) and a 13 MiB working tree
# must fit one 64 MiB transfer
scripts/jlink-pipeline-runtime.sh "$BUNDLE/jre"

# Keeps, in a copy of jar $1, only the native libraries whose paths match $2 (an extended regex).
strip_natives() {
    local jar=$1 keep=$2 out="$staging/$(basename "$1")"
    cp "$jar" "$out"
    local drop
    drop=$(unzip -Z1 "$out" | grep -E '\.(so|dll|dylib|jnilib)$' | grep -Ev "$keep" || true)
    if [ -n "$drop" ]; then
        echo "$drop" | xargs zip -q -d "$out"
    fi
}

# the jobs and sql modules' own classes (their packaged jars are shaded: much of what is below again)
jar --create --file "$staging/mstar-jobs.jar" -C jobs/target/classes .
jar --create --file "$staging/mstar-sql.jar" -C flink-mstar-sql/target/classes .
# (each list is one line without a newline at its end)
for jar in $( (tr ':' '\n' < jobs/target/mstar.classpath; echo; tr ':' '\n' < flink-mstar-sql/target/mstar.classpath) | sort -u); do
    case "$(basename "$jar")" in
        mstar-jobs-*) ;;
        frocksdbjni-*) strip_natives "$jar" 'librocksdbjni-linux64\.so$' ;;
        tokenizers-*) strip_natives "$jar" '^native/lib/linux-x86_64/' ;;
        jna-*) strip_natives "$jar" '/linux-x86-64/' ;;
        flink-shaded-netty-*) strip_natives "$jar" '_x86_64\.so$' ;;
        async-profiler-*) strip_natives "$jar" '^linux-x64/' ;;
        # NVRTC and PTX-compiler bindings link CUDA 12 libraries the GPU machine lacks; only the driver API is used
        jcuda-natives-*) strip_natives "$jar" "libJCudaDriver-$JCUDA_VERSION-linux-x86_64\.so$" ;;
        *) cp "$jar" "$staging/" ;;
    esac
done

# Greedy packing, largest jars first, into parts of at most PART_MIB.
limit=$((PART_MIB * 1024 * 1024))
declare -a used=()
for f in $(ls -S "$staging"); do
    size=$(stat -c %s "$staging/$f")
    placed=
    for i in "${!used[@]}"; do
        if [ $((used[i] + size)) -le $limit ]; then
            used[i]=$((used[i] + size)); placed=$i; break
        fi
    done
    if [ -z "$placed" ]; then
        used+=("$size"); placed=$((${#used[@]} - 1))
    fi
    mkdir -p "$BUNDLE/lib$((placed + 1))"
    mv "$staging/$f" "$BUNDLE/lib$((placed + 1))/"
done
rmdir "$staging"

cp scripts/gpu/run-pipeline.sh scripts/gpu/llama-3.1-8b.json scripts/gpu/write_random_llama.py "$BUNDLE/bin/"
(cd "$BUNDLE" && find jre lib* -type f -printf '%s %p\n' | sort -k2 > bin/MANIFEST)

# the bytes of the files, which a transfer carries (du counts disk blocks, rounded up)
for part in "$BUNDLE"/jre "$BUNDLE"/lib* "$BUNDLE"/bin; do
    bytes=$(find "$part" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
    mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
    echo "$(basename "$part"): ${mib} MiB"
    if [ "$bytes" -gt "$limit" ]; then
        echo "$part is ${mib} MiB: each part must stay within ${PART_MIB} MiB" >&2
        exit 1
    fi
done
