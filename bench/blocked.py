#!/usr/bin/env python3
"""Where a server's threads go to sleep: count the blocking context switches of a
`perf record -e sched:sched_switch --call-graph dwarf` capture by the code that blocked.

    perf record -e sched:sched_switch --call-graph dwarf,16384 -p "$(pgrep -x siltd)" -o sw.data -- sleep 3
    perf script -i sw.data -F comm,event,trace,ip,sym > sw.txt
    python3 bench/blocked.py sw.txt

Each line is a count and the first user-space frames of the stacks that slept there. Waiting
for the next request (a socket read) is one per request; everything else is a lock, a
condition or the allocator, and the ratio to the socket reads is what to compare between
builds (the absolute counts depend on how much perf itself slowed the server).
"""
import collections
import re
import sys

KERNEL = re.compile(
    r"^(__schedule|schedule|.*futex.*|do_syscall.*|entry_SYSCALL.*|x64_sys.*|__x64.*|syscall|"
    r"__GI.*|__libc.*|.*sk_wait.*|.*tcp_.*|inet_.*|sock_.*|__sys_.*|.*recv.*|schedule_timeout|"
    r"wait_woken|.*_ks)$"
)
# Frames of the lock and allocator libraries: skip to the caller that took the lock.
PLUMBING = re.compile(r"^(parking_lot|<parking_lot|std::sync::|<std::thread|std::thread|alloc::|<alloc::|core::)")


def main(path, depth=3):
    counts = collections.Counter()
    states = collections.Counter()
    for block in open(path, errors="replace").read().split("\n\n"):
        lines = block.strip().split("\n")
        if not lines or "sched_switch" not in lines[0]:
            continue
        m = re.search(r"prev_state=(\S+)", lines[0])
        state = m.group(1) if m else "?"
        states[state] += 1
        if state.startswith("R"):
            continue  # preempted, not blocked
        frames = []
        for line in lines[1:]:
            parts = line.split(None, 1)
            if len(parts) == 2:
                frames.append(parts[1].replace(" (inlined)", ""))
        user = [f for f in frames if not KERNEL.match(f)]
        what = next((f for f in user if not PLUMBING.match(f)), user[0] if user else "?")
        i = user.index(what) if what in user else 0
        counts[" < ".join(f[:90] for f in user[i : i + depth])] += 1
    print("switches by state:", dict(states.most_common()))
    for sig, n in counts.most_common(20):
        print(f"{n:8} {sig}")


if __name__ == "__main__":
    main(sys.argv[1])
