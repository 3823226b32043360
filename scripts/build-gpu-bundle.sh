#!/usr/bin/env bash
# Builds, on a machine with a JDK 17, Maven and nvcc, everything the GPU machine needs to run the GPU
# harness without build tools, into the git-ignored folder gpu-bundle/: a jlinked Java runtime and the
# jars (harness, operators, kernels with the fatbin and CUDA JNI shim, Jackson, picocli, JCuda and its driver-API native library),
# the scripts that run there and two standalone CUDA programs (bin/). Then copy gpu-bundle to the GPU machine (with the working tree) and run
# `bash gpu-bundle/run-harness.sh` there (docs/guides/gpu-harness.md). Needs nothing installed in ~/.m2 beforehand.
#
# PACK_JRE=1 packs the runtime into jre.tar.xz (see the end).
#
# --baseline REV also builds the project's three jars of git revision REV (in a temporary worktree, installing
# nothing) into gpu-bundle/baseline/, for gpu-bundle/ab-harness.sh: both builds measured on one machine.
set -euo pipefail
cd "$(dirname "$0")/.."
BASELINE=
if [ "${1:-}" = "--baseline" ]; then
    BASELINE=$(git rev-parse --verify "${2:?--baseline needs a git revision}^{commit}")
fi
BUNDLE=gpu-bundle
JCUDA_VERSION=12.6.0
M2=${M2_REPO:-$HOME/.m2/repository}

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/lib"
# One reactor build, so the sibling modules resolve without being installed. The engine path needs Jackson
# (config.json: the harness writes and loads a checkpoint) and the SLF4J API (resources log through it; with no
# binding on the class path it logs nowhere); the harness reads its command line with picocli. The modules resolve
# different versions of some of these (slf4j-api: 1.7.32 through jinjava in the library, 1.7.36 through Flink in
# tools), so each is copied under its name alone: one version of it lands.
mvn -B -q ${MVN_OFFLINE:+-o} -pl kernels,flink-mstar-operators,tools -am package dependency:copy-dependencies \
    -DskipTests -Dkernels.require=true -DincludeScope=runtime -Dmdep.stripVersion=true \
    -DincludeArtifactIds=jackson-databind,jackson-core,jackson-annotations,slf4j-api,JTransforms,JLargeArrays,commons-math3,picocli -DoutputDirectory="$PWD/$BUNDLE/lib"
jlink --add-modules java.base,java.logging,jdk.unsupported,java.management --strip-debug --no-header-files --compress=2 \
    --no-man-pages --output "$BUNDLE/jre"
cp flink-mstar-operators/target/flink-mstar-operators-0.1.0-SNAPSHOT.jar kernels/target/mstar-kernels-*.jar \
    tools/target/mstar-tools-0.1.0-SNAPSHOT.jar "$BUNDLE/lib/"
cp "$M2/org/jcuda/jcuda/$JCUDA_VERSION/jcuda-$JCUDA_VERSION.jar" "$BUNDLE/lib/"
cp scripts/gpu/run-harness.sh scripts/gpu/run-many.sh scripts/gpu/ab-harness.sh scripts/gpu/cublas-path.sh scripts/gpu/profile-decode.sh scripts/gpu/kernel_profile.py scripts/gpu/torch_timing.py scripts/gpu/torch_gemm.py scripts/gpu/torch_fp8.py scripts/gpu/torch_prefill.py scripts/gpu/torch_decode.py scripts/gpu/torch_latent.py scripts/gpu/torch_hybrid.py scripts/gpu/perf_table.py scripts/gpu/torch_moe.py \
    scripts/gpu/whisper_reference.py scripts/gpu/run-whisper.sh scripts/fixtures/write_whisper_fixtures.py "$BUNDLE/"

# The standalone CUDA programs, built here so that the GPU machine's time goes to running them: the warpgroup
# products' layout probe and the prefill attention bench (gpu-bundle/bin/wgmma_probe, gpu-bundle/bin/prefill_attention_bench)
mkdir -p "$BUNDLE/bin"
nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -Ikernels/src/main/cuda -o "$BUNDLE/bin/wgmma_probe" \
    kernels/src/test/cuda/wgmma_probe.cu
nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Ikernels/src/main/cuda \
    -o "$BUNDLE/bin/prefill_attention_bench" tools/cuda/prefill_attention_bench.cu

# JCuda's natives jar also carries NVRTC and PTX-compiler bindings (24 MB) that link CUDA 12 libraries the
# GPU machine lacks and this project never loads; keep only the driver-API library.
natives="$M2/org/jcuda/jcuda-natives/$JCUDA_VERSION/jcuda-natives-$JCUDA_VERSION-linux-x86_64.jar"
tmp=$(mktemp -d)
(cd "$tmp" && unzip -q "$natives" "lib/libJCudaDriver-$JCUDA_VERSION-linux-x86_64.so" \
    && jar --create --file "jcuda-natives-driver-$JCUDA_VERSION-linux-x86_64.jar" lib)
mv "$tmp/jcuda-natives-driver-$JCUDA_VERSION-linux-x86_64.jar" "$BUNDLE/lib/"
rm -rf "$tmp"

if [ -n "$BASELINE" ]; then
    tree=$(mktemp -d)
    git worktree add -q --detach "$tree" "$BASELINE"
    # revisions before the tools module kept the harness in a module of its own
    harness=tools
    [ -d "$tree/tools" ] || harness=gpu-harness
    (cd "$tree" && mvn -B -q ${MVN_OFFLINE:+-o} -pl kernels,flink-mstar-operators,$harness -am package -DskipTests \
        -Dkernels.require=true)
    mkdir -p "$BUNDLE/baseline"
    cp "$tree"/flink-mstar-operators/target/flink-mstar-operators-0.1.0-SNAPSHOT.jar "$tree"/kernels/target/mstar-kernels-*.jar \
        "$tree/$harness/target/mstar-$harness-0.1.0-SNAPSHOT.jar" "$BUNDLE/baseline/"
    echo "$BASELINE" > "$BUNDLE/baseline/REVISION"
    git worktree remove --force "$tree"
fi

# PACK_JRE=1 packs the runtime as jre.tar.xz (35 MB down to about 16): room for a larger working tree beside it;
# run-many.sh unpacks it on the GPU machine
if [ -n "${PACK_JRE:-}" ]; then
    tar cJf "$BUNDLE/jre.tar.xz" -C "$BUNDLE/jre" . && rm -r "$BUNDLE/jre"
fi

size=$(du -sm "$BUNDLE" | cut -f1)
echo "gpu-bundle: ${size} MiB"
if [ "$size" -ge 60 ]; then
    echo "gpu-bundle is ${size} MiB: it must travel with the working tree in under 64 MiB" >&2
    exit 1
fi
