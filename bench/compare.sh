#!/usr/bin/env bash
# Compare the engine of two commits side by side: build `silt-bench` at each (once; binaries
# are cached by commit under $COMPARE_DIR), run `silt-bench engine` alternately on both,
# RUNS times each (default 3), and print every figure of every run with the ratio of the
# medians (new / old; for times, old / new, so above 1 is always better).
#
#   bench/compare.sh OLD NEW [-- extra silt-bench engine arguments]
#   bench/compare.sh HEAD~1 HEAD
#   RUNS=5 bench/compare.sh b70d251 HEAD -- --cache-mb 16
#
# NEW may be `WORKTREE` to use the working tree as it is (uncommitted changes included).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
old="${1:?usage: bench/compare.sh OLD NEW [-- engine args]}"
new="${2:?usage: bench/compare.sh OLD NEW [-- engine args]}"
shift 2
[ "${1:-}" = "--" ] && shift
runs="${RUNS:-3}"
cache="${COMPARE_DIR:-$here/target/compare}"
mkdir -p "$cache"

# The silt-bench binary of a commit (or of the working tree), built once.
bin_of() {
    local rev="$1"
    if [ "$rev" = WORKTREE ]; then
        echo "building the working tree" >&2
        (cd "$here" && cargo build --release -q -p silt-bench >&2)
        cp "$here/target/release/silt-bench" "$cache/silt-bench-worktree"
        echo "$cache/silt-bench-worktree"
        return
    fi
    local sha
    sha="$(git -C "$here" rev-parse --short=12 "$rev^{commit}")"
    local out="$cache/silt-bench-$sha"
    if [ ! -x "$out" ]; then
        echo "building $rev ($sha)" >&2
        local wt="$cache/wt-$sha"
        rm -rf "$wt"
        git -C "$here" worktree add -f --detach "$wt" "$sha" >/dev/null
        (cd "$wt" && CARGO_TARGET_DIR="$cache/target" cargo build --release -q -p silt-bench >&2)
        cp "$cache/target/release/silt-bench" "$out"
        git -C "$here" worktree remove --force "$wt"
    fi
    echo "$out"
}

old_bin="$(bin_of "$old")"
new_bin="$(bin_of "$new")"
results="$cache/results-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$results"
for i in $(seq 1 "$runs"); do
    for side in old new; do
        bin="$old_bin"; [ "$side" = new ] && bin="$new_bin"
        echo "run $i/$runs: $side" >&2
        "$bin" engine --json "$results/$side-$i.json" "$@" >/dev/null 2>"$results/$side-$i.log" || {
            echo "run $i ($side) failed; see $results/$side-$i.log" >&2
            exit 1
        }
    done
done
python3 - "$results" "$runs" "$old" "$new" <<'PY'
import json, statistics, sys
d, runs, old, new = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
load = lambda side: [json.load(open(f"{d}/{side}-{i}.json")) for i in range(1, runs + 1)]
o, n = load("old"), load("new")
figures = [("random_insert_per_s", "random inserts/s (11x cache)", 1),
           ("random_insert_in_cache_per_s", "random inserts/s (in cache)", 1),
           ("sequential_insert_per_s", "sequential inserts/s", 1),
           ("blind_update_per_s", "blind updates/s", 1),
           ("rmw_update_per_s", "read-modify-write updates/s", 1),
           ("point_get_per_s", "point gets/s (out of cache)", 1),
           ("range_count_us", "range count us", -1),
           ("range_scan_us", "range scan us", -1),
           ("total_s", "whole run s", -1)]
fmt = lambda xs: " / ".join(f"{x:,.0f}" if x >= 100 else f"{x:.2f}" for x in xs)
print(f"{'figure':32} {old + ' (old)':>34} {new + ' (new)':>34} {'ratio':>7}")
for key, name, sense in figures:
    a = [r[key] for r in o if key in r]
    b = [r[key] for r in n if key in r]
    if not a or not b:
        continue
    ma, mb = statistics.median(a), statistics.median(b)
    ratio = (mb / ma if sense > 0 else ma / mb) if ma and mb else float("nan")
    print(f"{name:32} {fmt(a):>34} {fmt(b):>34} {ratio:7.2f}")
print(f"(ratio of medians, above 1 is better for the new; raw JSON in {d})")
PY
