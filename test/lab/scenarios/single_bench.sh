# lab: topology=single deadline=500
# mcpnet-bench runs briefly in one guest (rxe0 on lo): as one process connected to
# itself, as two processes pinned to the two CPUs swapping handles through a folder,
# once more with NCCL-sized steps, grouped receives and two connections, then with
# grouped receives of 2. Every byte is verified and the JSON
# output parses with the sizes asked for. Then mcpnet-cpu-cost counts instructions per
# message under callgrind and must report every call and a share for the plugin. No
# speed is asserted: the lab is emulated and shared, so its numbers only mean
# something as ratios in one boot.
set -euo pipefail
. "$LAB_LIB"
ulimit -l unlimited

bench=$LAB_BIN/mcpnet-bench
sweep=(-b 8 -e 256K -f 8 --runs 2 --check --point-time 0.05)
expect_sizes="8 64 512 4096 32768 262144"

# check_json FILE SIZES...: the document parses, has every (series, size) with one
# sample per run (latency with its round trips' quartiles around it), and reports
# verified data with nothing wrong.
check_json() {
  python3 - "$@" <<'EOF'
import json, sys
path, sizes, runs = sys.argv[1], [int(s) for s in sys.argv[2].split()], int(sys.argv[3])
doc = json.load(open(path))
assert doc["tool"] == "mcpnet-bench", doc.get("tool")
assert doc["config"]["sizes"] == sizes, (doc["config"]["sizes"], sizes)
assert doc["check"]["enabled"] and doc["check"]["verified"] > 0 and doc["check"]["wrong"] == 0, doc["check"]
seen = {}
for r in doc["results"]:
    assert len(r["samples"]) == runs, r
    assert all(isinstance(v, (int, float)) and v > 0 for v in r["samples"]), r
    assert r["wrong"] == 0 and r["checked"] > 0, r
    seen.setdefault(r["series"], []).append(r["size"])
    if r["series"] == "mcpnet-lat":  # each run's median lies between its round trips' quartiles
        q = list(zip(r["round_trip_p25"], r["samples"], r["round_trip_p75"]))
        assert len(q) == runs and all(0 < a <= m <= b for a, m, b in q), r
assert seen == {"mcpnet-bw": sizes, "mcpnet-lat": sizes}, seen
print("json ok: %d results, %d messages verified" % (len(doc["results"]), doc["check"]["verified"]))
EOF
}

lab_log "one process connected to itself"
"$bench" "${sweep[@]}" --json /tmp/self.json > /tmp/self.out 2>&1 || { cat /tmp/self.out; lab_fail "self mode failed"; }
cat /tmp/self.out
lab_grep '^# check: [1-9][0-9]* messages verified on both sides, 0 wrong' /tmp/self.out "self: data verified"
lab_grep '^ +262144 +[0-9.]+ ' /tmp/self.out "self: the table has a row per size"
check_json /tmp/self.json "$expect_sizes" 2 || lab_fail "self: the JSON output does not parse or lacks sizes"

lab_log "two processes, handles through a folder"
mkdir -p /tmp/xchg
"$bench" --xchg /tmp/xchg --role a --pin 0 "${sweep[@]}" > /tmp/a.out 2>&1 &
apid=$!
"$bench" --xchg /tmp/xchg --role b --pin 1 "${sweep[@]}" --json /tmp/pair.json > /tmp/b.out 2>&1 || {
  cat /tmp/a.out /tmp/b.out
  lab_fail "two-process mode failed on role b"
}
wait "$apid" || { cat /tmp/a.out; lab_fail "two-process mode failed on role a"; }
cat /tmp/b.out
lab_grep '^# check: [1-9][0-9]* messages verified on this side, 0 wrong' /tmp/a.out "role a: data verified"
lab_grep '^# check: [1-9][0-9]* messages verified on both sides, 0 wrong' /tmp/b.out "role b: data verified"
lab_grep '^#  progress : one thread on CPU 1 ' /tmp/b.out "role b: pinned to CPU 1"
lab_grep '^# round trips at 262144 B: 25% within [0-9.]+ us, 75% within [0-9.]+ us' /tmp/b.out \
  "role b: the round trips' quartiles per size"
check_json /tmp/pair.json "$expect_sizes" 2 || lab_fail "pair: the JSON output does not parse or lacks sizes"

lab_log "NCCL steps, grouped receives, two connections"
"$bench" -b 1M -e 1M --runs 1 --check --point-time 0.05 --nccl-steps --step-size 128K --group 2 --conns 2 \
  --json /tmp/steps.json > /tmp/steps.out 2>&1 || { cat /tmp/steps.out; lab_fail "--nccl-steps mode failed"; }
cat /tmp/steps.out
lab_grep '^# check: [1-9][0-9]* messages verified on both sides, 0 wrong' /tmp/steps.out "steps: data verified"
check_json /tmp/steps.json "1048576" 1 || lab_fail "steps: the JSON output does not parse"
python3 -c 'import json,sys; r=json.load(open("/tmp/steps.json"))["results"][0]; sys.exit(r["steps_per_transfer"] != 8)' ||
  lab_fail "steps: 1 MiB in 128 KiB steps should be 8 steps per transfer"

# Grouped receives of 2, every byte verified. Each irecv writes its own clear-to-send
# (issue 36): MCPNET_CTS_BATCH, which used to batch them, is retired and says so.
lab_log "grouped receives, every byte verified; the retired MCPNET_CTS_BATCH is named"
MCPNET_CTS_BATCH=4 "$bench" -b 8 -e 256K -f 64 --runs 1 --check --point-time 0.05 --group 2 \
  > /tmp/group2.out 2>&1 || { cat /tmp/group2.out; lab_fail "--group 2: the run failed"; }
lab_grep '^# check: [1-9][0-9]* messages verified on both sides, 0 wrong' /tmp/group2.out "--group 2: data verified"
lab_grep 'MCPNET_CTS_BATCH=4 \(environment\) was retired and is ignored' /tmp/group2.out \
  "the retired MCPNET_CTS_BATCH is named as such"

lab_log "instructions per message on the success path (callgrind)"
"$LAB_BIN/mcpnet-cpu-cost" -n 500 > /tmp/cost.out 2>&1 || { cat /tmp/cost.out; lab_fail "mcpnet-cpu-cost failed"; }
cat /tmp/cost.out
lab_grep '^# cpu-cost calls: isend 500, irecv 500, test 1000$' /tmp/cost.out "cost: every call made once"
lab_grep '^# cpu-cost calls that found their work unfinished: ' /tmp/cost.out "cost: unfinished calls reported"
lab_grep '^cpu-cost: [1-9][0-9]* instructions per message' /tmp/cost.out "cost: a total per message"
lab_grep '^cpu-cost: +[1-9][0-9]* +libnccl-net-mcp\.so$' /tmp/cost.out "cost: the plugin's share"
lab_log "ok: mcpnet-bench verified data in every mode"
