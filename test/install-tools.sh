#!/usr/bin/env bash
# Installs what the console and deploy checks need beyond Go, each only when missing, so CI
# (.ci/run) can call it on every run: headless Chromium for test/integration/console_test.go,
# promtool for the Prometheus alert rules and kubeconform for the Kubernetes manifests
# (`make deploy-check`). Debian packages: chromium, prometheus (which ships promtool).
set -euo pipefail

need=()
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || need+=(chromium)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
if [ ${#need[@]} -gt 0 ]; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi

# kubeconform from the Go module proxy, pinned; it lands in $(go env GOPATH)/bin.
if ! command -v kubeconform >/dev/null 2>&1 && [ ! -x "$(go env GOPATH)/bin/kubeconform" ]; then
	go install github.com/yannh/kubeconform/cmd/kubeconform@v0.7.0
fi
