#!/usr/bin/env bash
# The shell-helper tests: installs mongosh (pinned in package.json and package-lock.json) from
# the npm registry once, starts a standalone siltd, a one-member replica set and four
# `--replSet` servers on free loopback ports, and runs helpers.js, replset.js, members.js
# (three of the four made one set, the fourth added) and the REPL's `show` commands through
# a real mongosh. Needs node and npm.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$here"
if [ ! -x node_modules/.bin/mongosh ] || ! cmp -s package-lock.json node_modules/.package-lock.stamp; then
    npm ci --no-audit --no-fund --loglevel=error
    cp package-lock.json node_modules/.package-lock.stamp
fi
mongosh="$here/node_modules/.bin/mongosh"
(cd "$root" && cargo build --release -p siltd --quiet)
siltd="$root/target/release/siltd"

work="$(mktemp -d)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
start() { # dir port extra...
    local dir="$1" port="$2"; shift 2
    mkdir -p "$dir"
    "$siltd" --port "$port" --dbpath "$dir" --cache-size 64MB "$@" >"$dir/siltd.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "siltd did not start on $port"; cat "$dir/siltd.log"; exit 1
}

p1="$(free_port)"; start "$work/a" "$p1"
p2="$(free_port)"; start "$work/b" "$p2" --replSet rs0
members=()
for m in 1 2 3 4; do
    p="$(free_port)"; start "$work/m$m" "$p" --replSet rs0 --bind 127.0.0.1; members+=("$p")
done

status=0
"$mongosh" "mongodb://127.0.0.1:$p1/shelltest" --quiet --file "$here/helpers.js" || status=1
"$mongosh" "mongodb://127.0.0.1:$p2/admin?directConnection=true" --quiet --file "$here/replset.js" || status=1
"$mongosh" "mongodb://127.0.0.1:${members[0]}/admin?directConnection=true" --quiet \
    --eval "const MEMBER_PORTS = [$(IFS=,; echo "${members[*]}")];" --file "$here/members.js" || status=1

# The REPL's own `show` syntax, as a user types it.
out="$(printf 'db.r.insertOne({x: 1})\nshow dbs\nshow collections\nshow users\nshow roles\n' \
    | "$mongosh" "mongodb://127.0.0.1:$p1/repl" --quiet 2>&1)"
repl_ok=1
for want in "repl " "admin " "r" "role: 'dbOwner'"; do
    grep -q -- "$want" <<<"$out" || { echo "FAIL REPL output lacks '$want':"; echo "$out"; repl_ok=0; }
done
if grep -qi "error" <<<"$out"; then echo "FAIL REPL printed an error:"; echo "$out"; repl_ok=0; fi
if [ "$repl_ok" = 1 ]; then echo "ok   REPL: show dbs, show collections, show users, show roles"; else status=1; fi
exit "$status"
