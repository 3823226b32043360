#!/usr/bin/env bash
# Lays out, under folder $1, the files the container images (jobs/pom.xml, profile images) take besides the
# project's jars, one folder per image layer, each a root file system fragment:
#   runtime/  the jlinked Java runtime at /opt/java, and /var/lib/mstar and /tmp, the folders the job writes to
#   libc/     for the CPU image, whose base is empty: the dynamic loader and every shared library the runtime and
#             the native libraries in the jars link (RocksDB, the tokenizer, JCuda, the CUDA shim), copied from
#             this machine at the paths they have here. The CUDA image's base brings its own.
# Jib copies files, not symbolic links, and sets every mode itself (jobs/pom.xml lists the executable ones).
set -euo pipefail
out=$(realpath -m "$1")
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rm -rf "$out/runtime" "$out/libc"
"$root/scripts/jlink-pipeline-runtime.sh" "$out/runtime/opt/java"
mkdir -p "$out/runtime/var/lib/mstar" "$out/runtime/tmp"

# What the JNI libraries inside the jars link, besides what the runtime's own libraries need (ldd below, less the
# runtime's libraries themselves).
jni_links="libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libgcc_s.so.1 libstdc++.so.6"
libs=$(
    for name in $jni_links; do
        ldconfig -p | awk -v n="$name" '$1 == n && /x86-64/ {print $NF; exit}'
    done
    find "$out/runtime/opt/java" -name '*.so' -exec ldd {} + 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' \
        | grep -v "^$out/"
)
loader=$(ldd "$out/runtime/opt/java/bin/java" | awk '/ld-linux/ {print $1}')
for lib in $(printf '%s\n' $libs "$loader" | sort -u); do
    mkdir -p "$out/libc$(dirname "$lib")"
    cp -L "$lib" "$out/libc$lib"
done
