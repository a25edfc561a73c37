#!/usr/bin/env bash
# Run every fuzz target for SECONDS (default 120) each: `bash fuzz/run.sh [SECONDS] [TARGET...]`.
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). Crashes are written
# to fuzz/artifacts/<target>/; copy one into fuzz/regressions/<target>/ once it is fixed, and
# `make test` replays it from then on. Each run prints libFuzzer's final statistics.
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-120}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(wire keyenc matcher_update node)
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "artifacts/$t"
    seeds=()
    [ -d "seeds/$t" ] && seeds=("seeds/$t")
    echo "== $t: ${secs}s"
    cargo +nightly fuzz run "$t" "corpus/$t" "${seeds[@]}" -- \
        -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        -artifact_prefix="artifacts/$t/" 2>&1 | grep -E "^(stat::|==|SUMMARY|#[0-9]+ +DONE)|panicked|ERROR" || true
done
