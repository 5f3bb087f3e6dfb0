#!/usr/bin/env bash
# Resolves the Kafka Streams 4.4 jars (Maven) and compiles src/*.java with javac into
# .cache/classes. Prints the classpath to run it with. Cheap when nothing changed.
set -euo pipefail
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="$dir/.cache"
stamp="$cache/pom.sha"
sum="$(sha256sum "$dir/pom.xml" | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$sum" || ! -d "$cache/lib" ]]; then
  rm -rf "$cache/lib"
  echo "streamsapp: resolving Kafka Streams jars (first run only) ..." >&2
  mvn -B -q -f "$dir/pom.xml" dependency:copy-dependencies >&2
  echo "$sum" >"$stamp"
fi
if [[ ! -f "$cache/classes/WordCount.class" || ! -f "$cache/classes/GroupConsumer.class" || -n "$(find "$dir/src" -newer "$cache/classes/WordCount.class" -name "*.java")" ]]; then
  mkdir -p "$cache/classes"
  javac -nowarn -d "$cache/classes" -cp "$cache/lib/*" "$dir"/src/*.java >&2
fi
echo "$cache/classes:$cache/lib/*"
