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
# Recompile when the sources' contents change (file times are no guide: a copied cache can be
# newer than the sources it was not built from).
src_sum="$(cat "$dir"/src/*.java | sha256sum | cut -d' ' -f1)"
if [[ ! -f "$cache/classes/WordCount.class" || ! -f "$cache/classes/GroupConsumer.class" || ! -f "$cache/classes/TxnProducer.class" || "$(cat "$cache/src.sha" 2>/dev/null)" != "$src_sum" ]]; then
  rm -rf "$cache/classes"
  mkdir -p "$cache/classes"
  javac -nowarn -d "$cache/classes" -cp "$cache/lib/*" "$dir"/src/*.java >&2
  echo "$src_sum" >"$cache/src.sha"
fi
echo "$cache/classes:$cache/lib/*"
