#!/usr/bin/env bash
# make mutate: gremlins on the packages whose mistakes lose data or money,
# one at a time, then the efficacy of each (killed ÷ killed + lived).
# Slow (tens of minutes on 2 cores): not part of make test; run it before
# resolving work that touches these packages. MUTATE_PKGS narrows the list.
set -euo pipefail
cd "$(dirname "$0")"
gremlins=(go run github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0)
# gremlins times each mutant's tests against a first coverage run (its
# timeout: ten times that run, plus 2 s). A cached coverage run takes no
# time, and every mutant then dies of go test's timeout: never cache.
export GOFLAGS=-count=1
pkgs=(${MUTATE_PKGS:-./engine ./engine/objective ./engine/judge ./engine/field ./engine/id ./persist/pebblelog ./persist/jslog ./actors ./transport/idempotency ./transport/tenancy})
out=$(mktemp -d)
# A mutant that times out can leave its test binary running, even past its
# own -test.timeout (one grew to 21 GB in three minutes): reap any that has
# run three times its timeout plus half a minute, or holds over 4 GB.
(
	while sleep 10; do
		ps -eo pid=,etimes=,rss=,args= | awk '$4 ~ /^\/tmp\/gremlins-.*\.test$/ {
			limit = 1200
			for (i = 5; i <= NF; i++) if ($i ~ /^-test\.timeout=/) { t = substr($i, 15); sub(/s$/, "", t); if (t ~ /^[0-9.]+$/) limit = 3 * t + 30 }
			if ($2 > limit || $3 > 4194304) print $1
		}' | xargs -r kill -9 2>/dev/null || true
	done
) &
reaper=$!
trap 'kill $reaper 2>/dev/null' EXIT
for p in "${pkgs[@]}"; do
	echo "== $p"
	# -E /: only the package's own files (gremlins would also mutate its
	# sub-packages, each of which has a line of its own here).
	"${gremlins[@]}" unleash --config .gremlins.yaml -E / --output "$out/$(echo "$p" | tr / _).json" "$p" | tee "$out/$(echo "$p" | tr / _).log" | grep -E "LIVED|TIMED OUT|Test efficacy|Mutator coverage|Killed:" || true
done
echo
echo "efficacy per package:"
for p in "${pkgs[@]}"; do
	printf '  %-26s %s\n' "$p" "$(grep -E '^Test efficacy' "$out/$(echo "$p" | tr / _).log" | head -1)"
done
