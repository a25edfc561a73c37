#!/usr/bin/env bash
# The benchmark harness's own test, run by `make test`:
#  1. every workload runs at tiny sizes (`silt-bench all --quick`) and its checks hold;
#  2. with SILT_BENCH_BREAK_CHECKS=1 each workload's final check expects one more than the
#     right answer, and each workload must then fail (exit non-zero) instead of printing figures;
#  3. the peer adapters run at tiny sizes where the peers are present (`bench/peers.sh install`
#     and `start`); otherwise this says that it skips them.
# Nothing here measures anything.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
cargo build --release -p siltd -p silt-bench --quiet || exit 1
bench="$root/target/release/silt-bench"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail=0

echo "== harness: every workload at tiny sizes"
if ! "$bench" all --quick --out "$tmp/ok" >"$tmp/ok.log" 2>&1; then
    tail -40 "$tmp/ok.log"; echo "FAIL: silt-bench all --quick"; fail=1
else
    grep -A40 "== summary" "$tmp/ok.log"
fi

echo "== harness: each check fails loudly on a wrong answer"
for w in engine w1 w2 w3 w4 w5; do
    if SILT_BENCH_BREAK_CHECKS=1 "$bench" all --quick --only "$w" --out "$tmp/broken-$w" >"$tmp/broken-$w.log" 2>&1; then
        echo "FAIL: $w passed although its check was broken"; fail=1
    else
        echo "ok: $w failed as it must ($(grep -o "silt-bench: .*" "$tmp/broken-$w.log" | head -1 | cut -c1-110))"
    fi
done

echo "== peers"
peers_bench="$root/target/peers/release/silt-bench"
if [ -x "$peers_bench" ] && [ -x "$root/target/peers/bin/ferretdb" ]; then
    if bash bench/peers.sh start >/dev/null 2>&1; then
        eval "$(bash bench/peers.sh env)"
        if ! "$peers_bench" all --quick --peers --out "$tmp/peers" >"$tmp/peers.log" 2>&1; then
            tail -40 "$tmp/peers.log"; echo "FAIL: peer smoke run"; fail=1
        else
            grep -A40 "== summary" "$tmp/peers.log"
        fi
        bash bench/peers.sh stop >/dev/null 2>&1
    else
        echo "FAIL: the peers are built but did not start"; fail=1
    fi
else
    echo "SKIPPED: peer smoke tests (FerretDB, PostgreSQL, RocksDB, SQLite): the peers are not built here; run 'bash bench/peers.sh install' to include them"
fi
exit $fail
