#!/usr/bin/env bash
# Issue 26's table: wall time and peak RSS of `remat solve` against --time-limit for every
# solver on random layered graphs and Checkmate chains of 20k, 100k and 1M nodes.
#
#   scripts/limits_table.sh [BIN] [OUT_DIR] [SIZES] [LIMITS]
#
# BIN defaults to target/release/remat; SIZES to "20000 100000 1000000"; LIMITS to "2 5 10".
# Prints one tab-separated line per run: graph, solver, limit, wall seconds, peak RSS in
# MiB, exit code, status (or the refusal). Budget 80% of the checkpoint-all peak.
set -u
BIN=${1:-target/release/remat}
OUT=${2:-/tmp/remat-limits}
SIZES=${3:-"20000 100000 1000000"}
LIMITS=${4:-"2 5 10"}
mkdir -p "$OUT"
SOLVERS=$("$BIN" solvers --json 2>/dev/null | python3 -c 'import json,sys; print(" ".join(s["name"] for s in json.load(sys.stdin)))' 2>/dev/null)
if [ -z "$SOLVERS" ]; then
  SOLVERS=$("$BIN" solvers | awk 'NR>1 && $1 != "" {print $1}' | tr '\n' ' ')
fi
printf 'graph\tsolver\tlimit_s\twall_s\trss_mib\texit\tstatus\n'
for n in $SIZES; do
  layers=$(( (n - 1) / 2 ))
  rl="$OUT/random-layered-$n.json"; ch="$OUT/chain-$n.json"
  [ -f "$rl" ] || "$BIN" gen random-layered --nodes "$n" --seed 1 -o "$rl"
  [ -f "$ch" ] || "$BIN" gen linear --layers "$layers" -o "$ch"
  for g in "$rl" "$ch"; do
    for s in $SOLVERS; do
      for t in $LIMITS; do
        log="$OUT/run.log"
        /usr/bin/time -f '%e %M' -o "$OUT/time" "$BIN" solve "$g" -b 80% --solver "$s" \
          --time-limit "$t" >"$log" 2>&1
        rc=$?
        read -r wall rss <"$OUT/time" 2>/dev/null || { wall=NA; rss=0; }
        status=$(grep -m1 -E '^status|^error' "$log" | sed 's/^status *//; s/^error: *//' | cut -c1-90)
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(basename "$g" .json)" "$s" "$t" "$wall" \
          "$((rss / 1024))" "$rc" "$status"
      done
    done
  done
done
