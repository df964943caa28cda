#!/usr/bin/env bash
# Issue 26's table: wall time and peak RSS of `remat solve` against --time-limit for every
# solver on random layered graphs (seed 1) and Checkmate linear chains of about 20k, 100k
# and 1M nodes, budget 80% of the checkpoint-all peak.
#
#   scripts/limits_table.sh [BIN] [OUT_DIR] [SIZES] [LIMITS]
#
# BIN defaults to target/release/remat, SIZES to "20000 100000 1000000", LIMITS to "2 5 10";
# the environment may narrow the runs: SOLVERS (names, default every solver) and KINDS
# ("random-layered chain").
# One tab-separated line per run: graph, solver, limit, wall seconds (load, solve and
# output), the solve's own seconds (`time` line), peak RSS in MiB, exit code, and the status
# or the refusal. A solver refused at the first limit (exit 2) is refused at every limit:
# it runs once.
set -u
BIN=${1:-target/release/remat}
OUT=${2:-/tmp/remat-limits}
SIZES=${3:-"20000 100000 1000000"}
LIMITS=${4:-"2 5 10"}
mkdir -p "$OUT"
SOLVERS=${SOLVERS:-$("$BIN" solvers | awk '/^[^ ]/ {print $1}' | tr '\n' ' ')}
KINDS=${KINDS:-"random-layered chain"}
printf 'graph\tsolver\tlimit_s\twall_s\tsolve_s\trss_mib\texit\tstatus\n'
for n in $SIZES; do
  [ -f "$OUT/random-layered-$n.json" ] ||
    "$BIN" gen random-layered --nodes "$n" --seed 1 -o "$OUT/random-layered-$n.json"
  [ -f "$OUT/chain-$n.json" ] || "$BIN" gen linear --layers $(( (n - 1) / 2 )) -o "$OUT/chain-$n.json"
  for kind in $KINDS; do
    g="$OUT/$kind-$n.json"
    for s in $SOLVERS; do
      for t in $LIMITS; do
        /usr/bin/time -f '%e %M' -o "$OUT/time" "$BIN" solve "$g" -b 80% --solver "$s" \
          --time-limit "$t" >"$OUT/run.log" 2>&1
        rc=$?
        read -r wall rss < <(tail -n 1 "$OUT/time") || { wall=NA; rss=0; }
        solve=$(awk '/^time/ {print $2}' "$OUT/run.log")
        status=$(grep -m1 -E '^status|^error' "$OUT/run.log" | sed 's/^status *//' | cut -c1-110)
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(basename "$g" .json)" "$s" "$t" "$wall" \
          "${solve:--}" "$((rss / 1024))" "$rc" "$status"
        [ "$rc" = 2 ] && break
      done
    done
  done
done
