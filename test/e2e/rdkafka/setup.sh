#!/usr/bin/env bash
# Creates .cache/venv with the confluent-kafka wheel of requirements.txt (librdkafka bundled, so
# the distribution's older librdkafka is not used) and prints its python. Cheap when nothing
# changed. Installs python3-venv with apt-get when the machine's python3 cannot make a venv.
set -euo pipefail
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="$dir/.cache"
venv="$cache/venv"
stamp="$cache/requirements.sha"
sum="$(sha256sum "$dir/requirements.txt" | cut -d' ' -f1)"
if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$sum" ]]; then
  echo "$venv/bin/python"
  exit 0
fi
command -v python3 >/dev/null 2>&1 || { echo "rdkafka: python3 not found" >&2; exit 1; }
rm -rf "$venv"
mkdir -p "$cache"
if ! python3 -m venv "$venv" >&2; then
  sudo=""
  [[ "$(id -u)" == 0 ]] || sudo="sudo"
  echo "rdkafka: installing python3-venv (apt-get)" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
fi
echo "rdkafka: installing $(grep -v '^#' "$dir/requirements.txt" | xargs) (first run only) ..." >&2
"$venv/bin/python" -m pip install -q --disable-pip-version-check --only-binary=:all: -r "$dir/requirements.txt" >&2
echo "$sum" >"$stamp"
echo "$venv/bin/python"
