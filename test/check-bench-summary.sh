#!/bin/bash
# check-bench-summary.sh - test/lab/bench-targets-summary.py turns a run's raw files into
# issue #16's verdicts: on a made-up run folder whose figures sit on both sides of each
# goal, every target must get the verdict its figure earns, and the README block the
# figures. The real run is an hour of emulation; its arithmetic is checked here.
#   check-bench-summary.sh SOURCE_DIR
set -euo pipefail
src=$1
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
lat() { # lat FILE SERIES=SAMPLES...: a bench JSON with 8-byte latency results
  local f=$1 first=1
  shift
  { echo '{"results": ['
    for kv in "$@"; do
      [ $first = 1 ] || echo ','
      first=0
      echo "{\"series\": \"${kv%%=*}\", \"size\": 8, \"samples\": [${kv#*=}]}"
    done
    echo ']}'; } > "$d/$f"
}
# mcpnet 13 us against ib_write_lat 10 (1.30: holds) and the IB plugin 20 (0.65: misses);
# the first pair of each also gives its round trips' quartiles (mcpnet-bench's
# round_trip_p25/p75; runs of older builds lack them): medians 12 and 22, 19 and 21
echo '{"results": [{"series": "mcpnet-lat", "size": 8, "samples": [12,13,14], "round_trip_p25": [11,12,12], "round_trip_p75": [20,22,24]}, {"series": "ib_write_lat", "size": 8, "samples": [10,10,11]}]}' > "$d/lat_1.json"
lat lat_2.json mcpnet-lat=13,13,13 ib_write_lat=9,10,10
echo '{"results": [{"series": "mcpnet-lat", "size": 8, "samples": [20,20,21], "round_trip_p25": [18,19,19], "round_trip_p75": [21,21,22]}]}' > "$d/reflat_1.json"
lat reflat_2.json mcpnet-lat=19,20,20
# a third pair where mcpnet is 0.55 of the IB plugin: the medians still miss, unsurely
lat lat_3.json mcpnet-lat=11,11,11 ib_write_lat=10,10,10
lat reflat_3.json mcpnet-lat=20,20,20
# bandwidth: plain at 1.00 or above, --nccl-steps 0.99 at one size in one round
echo '{"results": [{"series": "mcpnet-bw", "size": 16384, "samples": [100]}, {"series": "ib_write_bw", "size": 16384, "samples": [100]}]}' > "$d/plain_1.json"
echo '{"results": [{"series": "mcpnet-bw", "size": 16384, "samples": [99]}, {"series": "ib_write_bw", "size": 16384, "samples": [100]}]}' > "$d/steps_1.json"
# and over three rounds (0.99, 0.98, 1.03): the medians miss, the rounds fall both sides
echo '{"results": [{"series": "mcpnet-bw", "size": 16384, "samples": [98]}, {"series": "ib_write_bw", "size": 16384, "samples": [100]}]}' > "$d/steps_2.json"
echo '{"results": [{"series": "mcpnet-bw", "size": 16384, "samples": [103]}, {"series": "ib_write_bw", "size": 16384, "samples": [100]}]}' > "$d/steps_3.json"
echo '{"results": [{"series": "mcpnet-bw", "size": 65536, "samples": [100]}]}' > "$d/c1_1.json"
echo '{"results": [{"series": "mcpnet-bw", "size": 65536, "samples": [96]}]}' > "$d/c8_1.json"
printf 'cpu-cost: 900 instructions per message (isend + irecv + test, user space), 2000 messages\ncpu-cost:        400  libnccl-net-mcp.so\n' > "$d/cpu_mcp.txt"
printf 'cpu-cost: 1100 instructions per message (isend + irecv + test, user space), 2000 messages\ncpu-cost:        399  libnccl-net-ref.so\n' > "$d/cpu_ref.txt"
echo libnccl-net-ref.so > "$d/ref.txt"
scale() { # scale FILE RSS AVAIL OPEN CLOSE
  printf 'scale: opened 1024 pairs in %s s (1 ms per pair)\nscale: memory after data: VmRSS +%s KiB per pair (verbs mappings +1.0), MemAvailable -%s KiB per pair, fds +3\nscale: closed 1024 pairs in %s s (1 ms per pair)\nscale: ok: 1024 pairs opened, moved verified data and closed\n' "$4" "$2" "$3" "$5" > "$d/$1"
}
scale scale_mcp_1024.txt 180.4 250 10.0 1.20
scale scale_ref_1024.txt 355.0 400 20.0 1.12
echo 'packets: mcpnet 500 for 200 messages, 3000 for 1200' > "$d/packets.txt"
echo 'packets: perftest 400 for 200 messages, 2400 for 1200' >> "$d/packets.txt"
busy_pair() { # busy_pair "AMONG..." "ALONE...": msg/s of the rounds of a process pair in turns
  printf 'scale: busy: 3000 verified messages per round, in turns with 1024 pairs open; msg/s per round: %s\nscale: busy: 3000 verified messages per round, in turns with 1 pair open; msg/s per round: %s\n' "$@"
}
busy() { # busy "AMONG..." "ALONE..." INSTR-ALONE INSTR-AMONG: busy.txt of one pair, 300 messages counted
  { busy_pair "$1" "$2"
    printf 'scale: busy: instructions for 300 messages: %s alone, %s among 1024 pairs\n' "$3" "$4"; } > "$d/busy.txt"
}
# the rate holds (0.92), the instructions miss (1.12)
busy "920 910 950" "1000 1000 1000" 300000 336000

out=$(python3 "$src/test/lab/bench-targets-summary.py" "$d")
fail=0
expect() { # expect TARGET-TEXT FIGURE-TEXT VERDICT
  local line
  line=$(grep -F -- "$1" <<< "$out" | head -1)
  if [[ $line != *"$2"* || $line != *" $3" || $line == *"$3 ("* ]]; then
    echo "check-bench-summary: FAIL: '$1' should show '$2' and end in '$3'; got: ${line:-nothing}"
    fail=1
  fi
}
expect "latency 8 B / ib_write_lat" "1.30 (13.0 / 10.0 us)" PASS
expect "latency 8 B / IB plugin" "0.65 (13.0 / 20.0 us)" "MISS (rounds on both sides)"
expect "bandwidth / ib_write_bw" "lowest 1.00 at 16 KiB" PASS
expect "bandwidth --nccl-steps" "lowest 0.99 at 16 KiB" "MISS (rounds on both sides)"
expect "8 connections / 1" "lowest 0.96 at 64 KiB" PASS
expect "instructions per message in the plugin" "400 (all user space 900)" PASS
expect "instructions per message / IB plugin" "1.00 (400 / 399)" MISS
expect "resident KiB per pair at 1,024 pairs" "180.4" MISS
expect "resident per pair / IB plugin" "0.51 (355.0 KiB)" MISS
expect "close 1,024 pairs / IB plugin" "1.07 (1.20 / 1.12 s)" MISS
expect "1,024 idle + 1 busy" "rate 0.92, instr 1.120 (1120 / 1000)" MISS
grep -qF "rounds 0.91-0.95; instructions: one run each" <<< "$(grep -F "1,024 idle + 1 busy" <<< "$out")" ||
  { echo "check-bench-summary: FAIL: the busy row should give the range of its single rounds"; fail=1; }
for p in "mcpnet       2.50 packets" "ib_write_lat 2.00 packets"; do
  grep -qF "$p" <<< "$out" || { echo "check-bench-summary: FAIL: no line '$p'"; fail=1; }
done
grep -q '^| 8 B | 13.0 | 10.0 | 20.0 | 1.30 | 0.65 |$' "$d/targets.md" ||
  { echo "check-bench-summary: FAIL: targets.md lacks the 8 B latency row"; cat "$d/targets.md"; fail=1; }
grep -qF '8 B round trips, one-way, each quartile the median over runs: mcpnet 25% within 12.0 µs, 75% within 22.0; IB plugin 25% within 19.0 µs, 75% within 21.0.' "$d/targets.md" ||
  { echo "check-bench-summary: FAIL: targets.md lacks the round trips' quartiles"; cat "$d/targets.md"; fail=1; }
grep -q '^| 1024 | mcpnet | 10.00 | 1.20 | 180 | 250 |$' "$d/targets.md" ||
  { echo "check-bench-summary: FAIL: targets.md lacks mcpnet's 1024-pair row"; cat "$d/targets.md"; fail=1; }
grep -q '^Hold (4 of 11): latency 8 B / ib_write_lat; bandwidth / ib_write_bw, 16 KiB-4 MiB; 8 connections' "$d/targets.md" ||
  { echo "check-bench-summary: FAIL: targets.md does not say which targets hold"; cat "$d/targets.md"; fail=1; }
# both on their goals: holds; single rounds on both sides of 0.90: the median decides, said;
# no busy figures at all: not measured
busy "900 900 1020" "1000 1000 1000" 300000 330000
grep -q " PASS$" <<< "$(grep -F "1,024 idle + 1 busy" <<< "$(python3 "$src/test/lab/bench-targets-summary.py" "$d")")" ||
  { echo "check-bench-summary: FAIL: rate 0.90 and instructions 1.10 should hold"; fail=1; }
busy "930 620 1400" "1000 1000 1000" 300000 300000
grep -F "1,024 idle + 1 busy" <<< "$(python3 "$src/test/lab/bench-targets-summary.py" "$d")" |
  grep -q " PASS (rounds on both sides)$" ||
  { echo "check-bench-summary: FAIL: single rounds 0.62-1.40 should mark the verdict"; fail=1; }
# the rounds' ratios (0.90, 1.25, 0.85) decide, not the ratio of the medians (1.00): a
# round among all and its round alone ran back to back
busy "900 1000 1100" "1000 800 1300" 300000 300000
grep -F "1,024 idle + 1 busy" <<< "$(python3 "$src/test/lab/bench-targets-summary.py" "$d")" |
  grep -qF "rate 0.90, instr 1.000" ||
  { echo "check-bench-summary: FAIL: the busy rate should be the median of the rounds' ratios (0.90)"; fail=1; }
# three process pairs (0.59, 1.13, 0.95): the median of theirs holds, their range
# straddles 0.90; a failed pair between them is left out, and pairs only an among
# process with the alone one after it
{ busy_pair "590 580 610" "1000 1000 1000"
  echo "scale: busy: FAIL (turns run 2: see busy_among_2.txt and busy_alone_2.txt)"
  busy_pair "1130 900 1180" "1000 1000 1000" | head -1
  busy_pair "1130 900 1180" "1000 1000 1000"
  busy_pair "950 930 970" "1000 1000 1000"
  printf 'scale: busy: instructions for 300 messages: 300000 alone, 300000 among 1024 pairs\n'; } > "$d/busy.txt"
line=$(grep -F "1,024 idle + 1 busy" <<< "$(python3 "$src/test/lab/bench-targets-summary.py" "$d")")
[[ $line == *"rate 0.95, instr 1.000"*"3 process pairs 0.59-1.13; rounds 0.58-1.18; instructions: one run each"*" PASS (rounds on both sides)" ]] ||
  { echo "check-bench-summary: FAIL: three busy process pairs should give their median 0.95 over 0.59-1.13; got: $line"; fail=1; }
rm "$d/busy.txt"
grep -q "not measured$" <<< "$(grep -F "1,024 idle + 1 busy" <<< "$(python3 "$src/test/lab/bench-targets-summary.py" "$d")")" ||
  { echo "check-bench-summary: FAIL: no busy figures should read 'not measured'"; fail=1; }
# close over three alternating rounds (1.20/1.12, 0.80/1.00, 0.90/1.00): the medians hold
# (0.90 / 1.00), the rounds fall on both sides; a round the reference lacks is left out
scale close_mcp_1024_2.txt 180.4 250 10.0 0.80
scale close_ref_1024_2.txt 355.0 400 20.0 1.00
scale close_mcp_1024_3.txt 180.4 250 10.0 0.90
scale close_ref_1024_3.txt 355.0 400 20.0 1.00
scale close_mcp_1024_4.txt 180.4 250 10.0 0.10
out2=$(python3 "$src/test/lab/bench-targets-summary.py" "$d")
line=$(grep -F "close 1,024 pairs / IB plugin" <<< "$out2")
[[ $line == *"0.90 (0.90 / 1.00 s)"*"rounds 0.80-1.07; 3 runs each"*" PASS (rounds on both sides)" ]] ||
  { echo "check-bench-summary: FAIL: three close rounds should give 0.90 over rounds 0.80-1.07; got: $line"; fail=1; }
grep -qF 'Close of 1,024 pairs in 3 alternating rounds (the table'"'"'s is the first): mcpnet 1.20, 0.80, 0.90 s; IB plugin 1.12, 1.00, 1.00 s.' "$d/targets.md" ||
  { echo "check-bench-summary: FAIL: targets.md does not list the close rounds"; cat "$d/targets.md"; fail=1; }
# scripts/update-bench-readme's last step, on copies: the README gets the verdicts and the
# targets' table, docs/benchmarking.md every table, under one stamp.
cp "$src/README.md" "$d/README.md"
cp "$src/docs/benchmarking.md" "$d/benchmarking.md"
python3 "$src/test/lab/bench-targets-summary.py" --blocks "$d/targets.md" "Measured at test." "$d/README.md" \
  "$d/benchmarking.md"
block() { sed -n '/<!-- bench-targets:begin -->/,/<!-- bench-targets:end -->/p' "$1"; }
grep -q '^| target | goal | figure | spread | holds |$' <<< "$(block "$d/README.md")" &&
  ! grep -q '^| size |' <<< "$(block "$d/README.md")" ||
  { echo "check-bench-summary: FAIL: the README's block should hold the targets' table and no other"; fail=1; }
grep -q '^| 8 B | 13.0 | 10.0 | 20.0 | 1.30 | 0.65 |$' <<< "$(block "$d/benchmarking.md")" &&
  grep -q '^| target | goal |' <<< "$(block "$d/benchmarking.md")" ||
  { echo "check-bench-summary: FAIL: docs/benchmarking.md's block should hold every table"; fail=1; }
# ...and the committed files show one run: the README's block is the start of the docs' one.
readme_block=$(block "$src/README.md" | sed '$d')
doc_block=$(block "$src/docs/benchmarking.md")
[ -n "$readme_block" ] && [ "${doc_block#"$readme_block"}" != "$doc_block" ] ||
  { echo "check-bench-summary: FAIL: README.md's benchmark block is not the start of docs/benchmarking.md's:" \
      "run scripts/update-bench-readme"; fail=1; }
[ $fail = 0 ] || { echo "$out"; exit 1; }
echo "check-bench-summary: every verdict and row as its figures earn; README and docs/benchmarking.md show one run"
