# lab: topology=pair deadline=500
# mcpnet-bench across two hosts, handles swapped over TCP (--server on a, --client on
# b), with --compare: perftest's ib_write_bw and ib_write_lat run between the same two
# devices, interleaved with mcpnet, role a holding the perftest servers. Role b's table
# must have a row per size whose mcpnet/perftest ratio columns parse as numbers, the
# perftest command lines must be printed, the JSON must carry the ratios and the plot
# must be a PNG. No speed is asserted.
set -euo pipefail
. "$LAB_LIB"
ulimit -l unlimited

bench=$LAB_BIN/mcpnet-bench
port=18600
sweep=(-b 8 -e 128K -f 128 --runs 1 --check --compare --point-time 0.05)

if [ "$LAB_HOST" = a ]; then
  "$bench" --server "$LAB_SELF_IP:$port" "${sweep[@]}" > /tmp/a.out 2>&1 || { cat /tmp/a.out; lab_fail "role a failed"; }
  cat /tmp/a.out
  lab_grep '^# check: [1-9][0-9]* messages verified on this side, 0 wrong' /tmp/a.out "role a: data verified"
  exit 0
fi

"$bench" --client "$LAB_PEER_IP:$port" "${sweep[@]}" --json /tmp/pair.json --plot /run/lab/pair_bench.png \
  > /tmp/b.out 2>&1 || { cat /tmp/b.out; lab_fail "role b failed"; }
cat /tmp/b.out
lab_grep '^# check: [1-9][0-9]* messages verified on both sides, 0 wrong' /tmp/b.out "role b: data verified"
lab_grep "^#   \[role a\] ib_write_bw -d [^ ]+ -x [0-9]+ -p 18515 -s 8 -n [0-9]+\$" /tmp/b.out \
  "role a's perftest server command line is printed"
lab_grep "^#   \[role b\] ib_write_lat -d [^ ]+ -x [0-9]+ -p 18515 -s 8 -n [0-9]+ $LAB_PEER_IP\$" /tmp/b.out \
  "role b's perftest client command line is printed"

# The table: the header names the ratio columns; every size has a row with numbers there.
awk '
  /^# +size / { for (i = 2; i <= NF; i++) col[$i] = i - 1; hdr = 1; next }
  hdr && /^ +[0-9]+ / {
    if (!("bw/wr" in col) || !("lat/wr" in col)) { print "no ratio columns"; exit 1 }
    bw = $(col["bw/wr"]); lat = $(col["lat/wr"])
    if (bw !~ /^[0-9]+\.[0-9]+$/ || lat !~ /^[0-9]+\.[0-9]+$/ || bw + 0 <= 0 || lat + 0 <= 0) {
      print "size " $1 ": ratios do not parse: bw/wr=" bw " lat/wr=" lat; exit 1
    }
    rows[$1] = 1
  }
  END { if (!(8 in rows) || !(1024 in rows) || !(131072 in rows)) { print "missing rows"; exit 1 } }
' /tmp/b.out || lab_fail "the table lacks a row per size with numeric mcpnet/perftest ratios"
lab_log "ok: the table has numeric bw/wr and lat/wr ratios for 8, 1024 and 131072 bytes"

python3 - <<'EOF' || lab_fail "the JSON output lacks the comparison"
import json
doc = json.load(open("/tmp/pair.json"))
assert doc["config"]["mode"] == "pair" and doc["config"]["role"] == "b", doc["config"]
assert any("ib_write_bw" in c for c in doc["perftest_commands"]), doc["perftest_commands"]
by = {(r["series"], r["size"]): r for r in doc["results"]}
for size in (8, 1024, 131072):
    for series, pt in (("mcpnet-bw", "ib_write_bw"), ("mcpnet-lat", "ib_write_lat")):
        ratio = by[(series, size)]["ratio"][pt]
        assert isinstance(ratio, float) and ratio > 0, (series, size, ratio)
        assert by[(pt, size)]["samples"], (pt, size)
print("json ok: ratios for every size")
EOF
grep -q 'P   N   G' <<<"$(head -c 8 /run/lab/pair_bench.png | od -An -c)" || lab_fail "--plot did not write a PNG"
lab_log "ok: --plot wrote a PNG"
