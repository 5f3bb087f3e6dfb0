#!/usr/bin/env bash
# Differential conformance run: every scenario of test/conformance/testdata against coordinatord
# and a real Apache Kafka 4.4 broker. Entry point of `make conformance` and .ci/run.
#
#   test/conformance/run.sh [go test flags...]     e.g. -run 'TestConformance/metadata.txt'
#
# Installs Java (17+) and Maven with apt-get when they are missing, fetches the broker's jars
# (test/kafka/kafka.sh fetch), then runs `go test ./test/conformance` with CONFORMANCE=1; the
# test starts and stops coordinatord and the broker. Exits non-zero on any failure or any
# difference not explained in docs/conformance.md.
#
# Environment: CONFORMANCE_GATEWAY=1 (make conformance-gateway) runs coordinatord in gateway mode
# in front of the broker instead of standalone; KAFKA_ADDR=host:port uses a broker that is already running instead of starting
# one; CONFORMANCE_FULL=1 prints whole values in difference tables; CONFORMANCE_KEEP=1 keeps the
# servers' folders (logs) in $TMPDIR; CONFORMANCE_COORDINATORD=path runs that binary instead of
# building this tree.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
KAFKA_SH="$ROOT/test/kafka/kafka.sh"
cd "$ROOT"

log() { echo "conformance: $*" >&2; }

# shellcheck source=../kafka/deps.sh
source "$ROOT/test/kafka/deps.sh"

if [[ -z "${KAFKA_ADDR:-}" ]]; then
  install_java_maven
  "$KAFKA_SH" fetch
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/conformance-run.XXXXXX")"
cleanup() {
  # The test stops the broker itself; this catches a test binary killed by its timeout.
  "$KAFKA_SH" stop --dir "$tmp/kafka" >/dev/null 2>&1 || true
  [[ -n "${CONFORMANCE_KEEP:-}" ]] || rm -rf "$tmp"
}
trap cleanup EXIT

start=$SECONDS
set +e
CONFORMANCE=1 CONFORMANCE_KAFKA_DIR="$tmp/kafka" \
  go test -count=1 -timeout 10m -v ./test/conformance "$@" 2>&1 |
  grep -v -e '^=== RUN' -e '^=== PAUSE' -e '^=== CONT' -e '^=== NAME'
status=${PIPESTATUS[0]}
set -e
if (( status != 0 )); then
  log "FAILED after $(( SECONDS - start )) s (see above; a difference is either fixed in coordinatord or explained in docs/conformance.md)"
  exit 1
fi
log "passed in $(( SECONDS - start )) s"
