#!/usr/bin/env python3
"""bench/accept_group_testing.py [TRIALS]: how many tests, and rounds of tests
run at once, it takes to find the d bad nodes among N when a test of a group
of nodes (a collective over them) fails exactly when the group holds a bad
node (node-level faults, as NVIDIA's Cluster Readiness Engine assumes).

Strategies, each simulated over TRIALS random placements of the bad nodes:
- all pairs: every pair of nodes once, in circle-method rounds (what
  `rankscope accept` measures today, which also finds bad links);
- staged group testing in the spirit of NVCRE ADR-055: groups of ceil(sqrt(N))
  tested at once, every failed group bisected (both halves tested at once,
  round by round, every failed group in parallel) down to single nodes, each
  suspect confirmed by a test with a known good node;
- Hwang's generalized binary splitting (one test at a time, d known): the
  fewest tests, the most rounds.
Prints a Markdown table: mean tests and rounds per strategy, N and d."""
import math
import random
import sys


def all_pairs(n, bad):
    return n * (n - 1) // 2, n - 1 if n % 2 == 0 else n


def staged(n, bad):
    size = math.ceil(math.sqrt(n))
    groups = [list(range(i, min(i + size, n))) for i in range(0, n, size)]
    tests, rounds = len(groups), 1
    failing = [g for g in groups if any(x in bad for x in g)]
    suspects = []
    while failing:
        rounds += 1
        halves = []
        for g in failing:
            if len(g) == 1:
                suspects.append(g[0])
                continue
            halves += [g[: len(g) // 2], g[len(g) // 2:]]
        tests += len(halves)
        failing = [h for h in halves if any(x in bad for x in h)]
        if not halves:
            rounds -= 1
    if suspects:
        tests, rounds = tests + len(suspects), rounds + 1  # each suspect with a known good node, all at once
    return tests, rounds


def hwang(n, bad):
    items, d, tests = list(range(n)), len(bad), 0
    while items and d > 0:
        if len(items) <= 2 * d - 2:
            return tests + len(items)
        alpha = max(int(math.floor(math.log2((len(items) - d + 1) / d))), 0)
        group, tests = items[: 2 ** alpha], tests + 1
        if not any(x in bad for x in group):
            items = items[2 ** alpha:]
            continue
        known_good = set()
        while len(group) > 1:  # binary search for one bad node of the group
            first, second = group[: len(group) // 2], group[len(group) // 2:]
            tests += 1
            if any(x in bad for x in first):
                group = first  # the second half goes back to the pool untested
            else:
                known_good.update(first)
                group = second
        items = [x for x in items if x != group[0] and x not in known_good]
        d -= 1
    return tests


def main():
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    rng = random.Random(1)
    print("| nodes | bad nodes | all pairs: tests | rounds | staged group testing: tests | rounds | generalized binary splitting: tests (one at a time) |")
    print("|---|---|---|---|---|---|---|")
    for n, d in [(232, 5), (1024, 1), (1024, 5), (4096, 1), (4096, 5), (4096, 20), (4096, 100)]:
        sums = [0.0] * 5
        for _ in range(trials):
            bad = set(rng.sample(range(n), d))
            pairs, pair_rounds = all_pairs(n, bad)
            s_tests, s_rounds = staged(n, bad)
            h_tests = hwang(n, bad)
            for i, v in enumerate((pairs, pair_rounds, s_tests, s_rounds, h_tests)):
                sums[i] += v / trials
        print(f"| {n} | {d} | {sums[0]:,.0f} | {sums[1]:,.0f} | {sums[2]:,.1f} | {sums[3]:.1f} | {sums[4]:,.1f} |")


if __name__ == "__main__":
    main()
