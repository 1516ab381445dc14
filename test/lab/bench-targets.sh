# bench-targets.sh - the measurement behind the lab table in docs/benchmarking.md (issue #6's targets).
# Not a test: it asserts no speed. Run it in the single lab with the vCPUs pinned:
#
#   test/lab/lab --pin-vcpus --deadline 2400 --name targets single -- bash test/lab/bench-targets.sh
#
# Two mcpnet-bench processes pinned to the guest's two CPUs (perftest inherits the
# pins), rxe0 on lo, --compare. Each configuration runs as 3 fresh process pairs x 3
# interleaved runs, so a point's median is over 9 samples; then 1 against 8
# connections, alternating, 5 pairs x 3 runs each; then instructions per message.
# Results (tables, JSON per invocation) land in /run/lab, i.e. the run's folder.
set -uo pipefail
. "$LAB_LIB"
ulimit -l unlimited
bench=$LAB_BIN/mcpnet-bench
out=/run/lab

pair() { # pair NAME ARGS...: role a in the background, role b writes the JSON
  local name=$1
  shift
  rm -rf "/tmp/x.$name"
  mkdir -p "/tmp/x.$name"
  "$bench" --xchg "/tmp/x.$name" --role a --pin 0 "$@" > "/tmp/$name.a" 2>&1 &
  "$bench" --xchg "/tmp/x.$name" --role b --pin 1 "$@" --json "$out/$name.json" > "$out/$name.txt" 2>&1 ||
    { cat "/tmp/$name.a" "$out/$name.txt"; lab_fail "$name: mcpnet-bench failed"; }
  wait || { cat "/tmp/$name.a"; lab_fail "$name: role a failed"; }
  echo "== $name: $*"
  grep -E '^ +[0-9]|^# note' "$out/$name.txt"
}

for i in 1 2 3; do
  pair "lat_$i" --compare -b 8 -e 2K -f 16 --runs 3 --point-time 0.3
  pair "plain_$i" --compare -b 16K -e 4M -f 4 --runs 3 --point-time 0.3
  pair "steps_$i" --compare --nccl-steps -b 16K -e 4M -f 4 --runs 3 --point-time 0.3
done
for i in 1 2 3 4 5; do
  pair "c1_$i" -b 64K -e 1M -f 16 --runs 3 --point-time 0.3
  pair "c8_$i" --conns 8 -b 64K -e 1M -f 16 --runs 3 --point-time 0.3
done

python3 - "$out" <<'PY'
import glob, json, statistics as st, sys
out = sys.argv[1]

def load(prefix):
    acc = {}
    for f in sorted(glob.glob(f"{out}/{prefix}_*.json")):
        for r in json.load(open(f))["results"]:
            acc.setdefault((r["series"], r["size"]), []).extend(r["samples"])
    return acc

def spread(v):
    m = st.median(v)
    return (max(v) - min(v)) / m * 100 if m else 0.0

for prefix in ("lat", "plain", "steps"):
    a = load(prefix)
    print(f"## {prefix}: medians over all samples; spread = (max - min) / median")
    print(f"{'size':>9} {'mcp MB/s':>9} {'wr MB/s':>8} {'bw/wr':>6} {'mcp us':>9} {'wr us':>9} {'lat/wr':>6}"
          f"  samples  spreads: mcp-bw wr-bw mcp-lat wr-lat")
    for size in sorted({s for (_, s) in a}):
        mb, wb, ml, wl = (a.get((k, size), []) for k in ("mcpnet-bw", "ib_write_bw", "mcpnet-lat", "ib_write_lat"))
        if not (mb and wb and ml and wl):
            print(f"{size:>9} incomplete: {len(mb)} {len(wb)} {len(ml)} {len(wl)} samples")
            continue
        print(f"{size:>9} {st.median(mb):9.2f} {st.median(wb):8.2f} {st.median(mb) / st.median(wb):6.3f} "
              f"{st.median(ml):9.2f} {st.median(wl):9.2f} {st.median(ml) / st.median(wl):6.3f}"
              f"  {len(mb)}/{len(wb)}      {spread(mb):.0f}% {spread(wb):.0f}% {spread(ml):.0f}% {spread(wl):.0f}%")
c1, c8 = load("c1"), load("c8")
print("## connections: aggregate MB/s, medians over all samples")
for size in sorted({s for (_, s) in c1}):
    a, b = c1[("mcpnet-bw", size)], c8[("mcpnet-bw", size)]
    print(f"{size:>9}  1 conn {st.median(a):7.2f} (spread {spread(a):.0f}%)  8 conns {st.median(b):7.2f} "
          f"(spread {spread(b):.0f}%)  8/1 {st.median(b) / st.median(a):.3f}")
PY

cd /tmp && "$LAB_BIN/mcpnet-cpu-cost" -n 2000
