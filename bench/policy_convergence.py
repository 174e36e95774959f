#!/usr/bin/env python3
"""How often two container-replicator passes leave a split-brain container's primaries
disagreeing about its storage policy, in a model of Swift's rule (a replica takes another's
policy when that one's status-change time is older, and then takes "now" as its own), over
random interleavings of four nodes' passes. Compares what each replica offers its peers:

- stale: the info it read before its first peer (Swift 2.30's replicator);
- fresh-policy: its current info whenever its policy changed since then (Apus's replicator,
  container-server/db_replicator.cpp, offer_current_policy).

The model: primaries 1, 3 and 4 in ring order, node 2 a handoff holding a copy; each pass runs
the four nodes' syncs interleaved at random, one message at a time (a sync request, on which
the receiver may adopt the sender's policy; its answer, on which the sender may adopt the
receiver's, judged against the info the sender offered, as Swift judges it). Neither deleted
nor recreated containers: the oldest status-change time wins.

usage: bench/policy_convergence.py [RUNS]   (default 10000 per layout and mode)
"""
import random
import sys

PRIMARIES = [1, 3, 4]
NODES = [1, 2, 3, 4]


def converges(layout, mode, seed):
    rnd = random.Random(seed)
    clock = [10.0]

    def now():
        clock[0] += rnd.uniform(0.001, 0.01)
        return clock[0]

    state = dict(layout)  # node: (policy, status changed at)

    def better(remote, local):
        return remote[0] != local[0] and remote[1] < local[1]

    def adopt(node, remote):
        if better(remote, state[node]):
            state[node] = (remote[0], now())

    for _ in range(2):
        jobs = {}
        for n in NODES:
            if n in PRIMARIES:
                i = PRIMARIES.index(n)
                peers = [PRIMARIES[(i + k) % len(PRIMARIES)] for k in (1, 2)]
            else:
                peers = list(PRIMARIES)
            jobs[n] = {"offered": state[n], "peers": peers, "next": 0, "answer": None}
        active = set(NODES)
        while active:
            n = rnd.choice(sorted(active))
            job = jobs[n]
            if job["answer"] is not None:
                if better(job["answer"], job["offered"]):
                    adopt(n, job["answer"])
                job["answer"] = None
                job["next"] += 1
                if job["next"] == len(job["peers"]):
                    active.discard(n)
                continue
            if mode == "fresh-policy" and state[n][0] != job["offered"][0]:
                job["offered"] = state[n]
            peer = job["peers"][job["next"]]
            adopt(peer, job["offered"])
            job["answer"] = state[peer]
    return len({state[n][0] for n in PRIMARIES}) == 1


LAYOUTS = {
    "P on 1,2; Q on 3,4": {1: (0, 1.0), 2: (0, 1.0), 3: (1, 2.0), 4: (1, 2.0)},
    "P on 2,3; Q on 1,4": {1: (1, 2.0), 2: (0, 1.0), 3: (0, 1.0), 4: (1, 2.0)},
    "P on 1; Q on 2,3,4": {1: (0, 1.0), 2: (1, 2.0), 3: (1, 2.0), 4: (1, 2.0)},
    "P on 2,3,4; Q on 1": {1: (1, 2.0), 2: (0, 1.0), 3: (0, 1.0), 4: (0, 1.0)},
}


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    for name, layout in LAYOUTS.items():
        figures = []
        for mode in ("stale", "fresh-policy"):
            failed = runs - sum(converges(layout, mode, seed) for seed in range(runs))
            figures.append("%s %.2f%% disagree" % (mode, 100.0 * failed / runs))
        print("%-20s %s" % (name, ", ".join(figures)))


if __name__ == "__main__":
    main()
