#!/usr/bin/env bash
# Checks deploy/kubernetes/mstar-serve.yaml against the FlinkDeployment CRD of the Flink Kubernetes Operator
# (KubernetesManifestTest, tag k8s): fetches the CRD of the operator release below once (checked by its SHA-256),
# then runs the test. Fields the CRD does not declare count as errors, since the API server would drop them.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
release=release-1.15.0
sha256=7977265fc26d5e13e46ea5a18b18ce71dc1b93a7c750d781843a7af0d1d13e47
crd=jobs/target/k8s/flinkdeployments.flink.apache.org-v1.yml
if ! echo "$sha256  $crd" | sha256sum -c --status 2>/dev/null; then
  mkdir -p "$(dirname "$crd")"
  curl -fsSL -o "$crd" "https://raw.githubusercontent.com/apache/flink-kubernetes-operator/$release/helm/flink-kubernetes-operator/crds/flinkdeployments.flink.apache.org-v1.yml"
  echo "$sha256  $crd" | sha256sum -c --quiet
fi
mvn -B -ntp -pl jobs -am test -Dtest=KubernetesManifestTest -Dmstar.excluded.groups=gpu,cluster \
    -Dsurefire.failIfNoSpecifiedTests=false "$@"
