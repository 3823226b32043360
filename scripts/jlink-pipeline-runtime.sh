#!/usr/bin/env bash
# jlinks, from the JDK on the PATH, the Java runtime that runs the whole pipeline (Flink, Kafka, RocksDB, the
# engine) into folder $1: java.se less what nothing on the class path loads (compiler, scripting, XML signatures,
# row sets), less the X11 and sound natives a headless run never opens, and libjvm without its symbol table (JFR
# stays, for profiles). Used by scripts/gpu/build-pipeline-bundle.sh and, for the container images,
# docker/image-layers.sh.
set -euo pipefail
out=$1
rm -rf "$out"
mkdir -p "$(dirname "$out")"
jlink --add-modules java.base,java.datatransfer,java.desktop,java.instrument,java.logging,java.management,java.naming,\
java.management.rmi,java.net.http,java.prefs,java.rmi,java.security.jgss,java.security.sasl,java.sql,java.transaction.xa,java.xml,\
jdk.unsupported,jdk.management,jdk.crypto.ec,jdk.zipfs,jdk.jfr \
    --exclude-files='**/libawt_xawt.so,**/libsplashscreen.so,**/libjsound.so' \
    --strip-debug --no-header-files --no-man-pages --compress=2 --output "$out"
strip --strip-unneeded "$out/lib/server/libjvm.so"
