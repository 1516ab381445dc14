#!/bin/bash
# nccl-real.sh - real NCCL moves real data through mcpnet, on a GPU host without RDMA:
# mcpnet runs on the userspace verbs device (test/uverbs), loaded with
# MCPNET_VERBS_LIBRARY, and 2-4 ranks share the one GPU but look like separate hosts to
# NCCL (NCCL_HOSTID), so NCCL's net layer carries every byte, with NCCL_NET_PLUGIN=mcp
# NCCL_NET=MCP. One prepared run for a lent GPU host (one H200, 16 cores, no network, no
# RDMA, no kernel modules; PyTorch 2.11 with NCCL 2.28.9, CUDA 13), under 8 minutes of
# wall time, builds included. Without a GPU (CI: ctest device_nccl_real_dryrun) it runs
# up to the point NCCL needs one and says what it skipped.
#
#   nccl-real.sh [--from DIR] [--stages "LIST"] [--ranks N]
#   nccl-real.sh --pack DIR       (here, before a GPU session: what the host needs)
#
# --from DIR: binaries packed by --pack (the device has no network and maybe no
# rdma-core headers; a binary built here runs there, and when it does not, the script
# builds there from the tree, with the packed headers). Default: build/ of this tree.
#
# Stages, in order (STAGES or --stages picks some; each is a function stage_NAME below,
# so a later one is one more function and one more word in the list):
#   device       the userspace device and the plugin on it, no NCCL: the conformance
#                suite between two processes, host and GPU-like memory
#   gpu          a GPU and PyTorch are here; otherwise every NCCL stage is skipped with
#                the reason, and the run ends there (the dry run)
#   collectives  every collective (all_reduce, all_gather, reduce_scatter, broadcast,
#                reduce, alltoall, send/recv) from 8 B to 1 GiB, every result checked,
#                under NCCL_PROTO=LL, LL128 and Simple, with GPU-direct (NCCL registers
#                CUDA memory with mcpnet: NCCL_NET_GDR_LEVEL=SYS) and with host staging
#                (NCCL_NET_GDR_LEVEL=LOC); then 4 ranks; then DMA-BUF registrations
#   fault        an all_reduce loop through which the link between two ranks is cut for
#                2 s: mcpnet recovers, every result is still right
#   profiler     NCCL's example profiler plugin (built by --pack from NCCL's own source,
#                ext-profiler/example) loaded with net plugin events on: an all_reduce
#                job whose trace must hold mcpnet's QP events (cat NET_IB, name Qp, the
#                descriptor NCCL's IB transport uses)
#   bench        a table in nccl-tests' format: from nccl-tests where it builds and MPI is
#                here, else from nccl_collectives.py bench, which computes the same
#                figures the same way; the same job on NCCL's Socket transport beside it,
#                and mcpnet's busbw as a ratio of Socket's
# Every job's log must show NCCL using network MCP (or Socket for the Socket job).
# Sizes stop growing when a job's budget is spent (said, never hidden), and a stage that
# would not fit in what is left of NCCL_REAL_LIMIT_S (default 450) is skipped, said too.
# Output: a summary table last; logs and the summary under $OUT (the device tool's
# folder) or /tmp/mcpnet-nccl-real, packed into logs.tar.gz. Exit 0 when nothing failed.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
t_begin=$SECONDS
limit=${NCCL_REAL_LIMIT_S:-450}
stages=${STAGES:-"device gpu collectives fault profiler bench"}
from=
ranks=${NCCL_REAL_RANKS:-2}
pack=

while [ $# -gt 0 ]; do
  case $1 in
    --from) from=$2; shift 2 ;;
    --stages) stages=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --pack) pack=$2; shift 2 ;;
    -h|--help) sed -n '2,43p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "nccl-real: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

# ---- --pack: what a GPU session carries (binaries, rdma-core's headers, nccl-tests) ----
if [ -n "$pack" ]; then
  b=${MCPNET_BUILD_DIR:-$repo/build}
  mkdir -p "$pack/plugin" "$pack/lib" "$pack/bin" "$pack/include" || exit 2
  cp "$b/plugin/libnccl-net-mcp.so" "$pack/plugin/" && cp "$b/lib/libmcp-uverbs.so" "$pack/lib/" &&
    cp "$b/bin/mcp-uverbs-ctl" "$b/bin/mcp-conformance" "$pack/bin/" || {
    echo "nccl-real: build first (cmake --build $b): a file is missing"
    exit 2
  }
  cp -r /usr/include/infiniband /usr/include/rdma "$pack/include/" 2> /dev/null
  tests=${NCCL_TESTS_SRC:-/work/.mirror/NVIDIA+nccl-tests/repo}
  if [ -d "$tests" ]; then
    rm -rf "$pack/nccl-tests" && mkdir -p "$pack/nccl-tests"
    if [ -d "$tests/src" ]; then cp -r "$tests/." "$pack/nccl-tests/"; else git -C "$tests" archive HEAD | tar -x -C "$pack/nccl-tests"; fi
  fi
  # NCCL's example profiler plugin, from the NCCL source of the version the host runs
  # (header-only C++ with its own copies of NCCL's profiler headers; CUDA's for types).
  nccl_src=${NCCL_SRC:-/work/.mirror/NVIDIA+nccl/repo}
  cuda_inc=${CUDA_INC:-$(dirname "$(dirname "$(command -v nvcc 2> /dev/null || echo /usr/local/cuda/bin/nvcc)")")/include}
  if [ -d "$nccl_src" ] && command -v g++ > /dev/null; then
    rm -rf "$pack/profiler-src" && mkdir -p "$pack/profiler-src" "$pack/lib"
    git -C "$nccl_src" archive "${NCCL_PROFILER_TAG:-v2.28.9-1}" ext-profiler/example | tar -x -C "$pack/profiler-src" &&
      (cd "$pack/profiler-src/ext-profiler/example" &&
        g++ -O2 -Inccl -I"$cuda_inc" -fPIC -shared -o "$pack/lib/libnccl-profiler-example.so" ./*.cc) ||
      echo "nccl-real: NCCL's example profiler did not build here; the profiler stage will skip"
  fi
  du -sh "$pack"
  echo "nccl-real: packed into $pack; carry it and run: test/device/nccl-real.sh --from $pack"
  exit 0
fi

out=${OUT:-/tmp/mcpnet-nccl-real}
logs=$out/logs
mkdir -p "$logs"
summary=$out/summary.txt
: > "$summary"
fails=0
note() { echo "$*" | tee -a "$summary"; }
result() { # result STAGE PASS|FAIL|SKIP TEXT
  printf '%-12s %-4s %s\n' "$1" "$2" "$3" >> "$out/results.txt"
  [ "$2" = FAIL ] && fails=$((fails + 1))
  echo "nccl-real: $1: $2: $3"
}
: > "$out/results.txt"
left() { echo $((limit - (SECONDS - t_begin))); }

# ---- the binaries: packed, built, or built here now ----
bin_dir=$repo/build
[ -n "$from" ] && bin_dir=$(cd "$from" && pwd)
plugin_so=$bin_dir/plugin/libnccl-net-mcp.so
uverbs_so=$bin_dir/lib/libmcp-uverbs.so
ctl=$bin_dir/bin/mcp-uverbs-ctl
conf=$bin_dir/bin/mcp-conformance
loads() { python3 -c "import ctypes,sys; ctypes.CDLL(sys.argv[1])" "$1" 2> /dev/null; }
runs() { # a program of ours that starts here (its usage exits 2); not "cannot execute" (126, 127)
  "$1" > /dev/null 2>&1
  [ $? = 2 ]
}
if ! { loads "$plugin_so" && loads "$uverbs_so" && runs "$ctl"; }; then
  echo "nccl-real: no usable binaries in $bin_dir: building the plugin and the device from this tree"
  inc=
  [ -f /usr/include/infiniband/verbs.h ] || inc=$bin_dir/include
  cmake -S "$repo" -B /tmp/mcpnet-real-build -DCMAKE_BUILD_TYPE=Release ${inc:+-DIBVERBS_INCLUDE_DIR=$inc} \
    > "$logs/cmake.log" 2>&1 &&
    cmake --build /tmp/mcpnet-real-build -j"$(nproc)" --target nccl-net-mcp mcp-uverbs mcp-uverbs-ctl \
      mcp-conformance > "$logs/build.log" 2>&1 || {
    tail -20 "$logs/cmake.log" "$logs/build.log"
    echo "nccl-real: the build failed (logs in $logs)"
    exit 2
  }
  bin_dir=/tmp/mcpnet-real-build
  plugin_so=$bin_dir/plugin/libnccl-net-mcp.so uverbs_so=$bin_dir/lib/libmcp-uverbs.so
  ctl=$bin_dir/bin/mcp-uverbs-ctl conf=$bin_dir/bin/mcp-conformance
fi

# ---- the environment every job shares ----
fabric=$(mktemp -d /tmp/mcp-uvreal.XXXXXX)
trap 'rm -rf "$fabric"' EXIT
export MCPNET_VERBS_LIBRARY=$uverbs_so UVERBS_FABRIC=$fabric NCCL_SOCKET_IFNAME=lo PYTHONUNBUFFERED=1
plugin_dir=$(dirname "$plugin_so")
mcp_env=(NCCL_NET_PLUGIN=mcp NCCL_NET=MCP "LD_LIBRARY_PATH=$plugin_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
nccl_log=(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET)
port=29600

# job NAME NRANKS TIMEOUT ENV... -- ARGS...: the ranks of one nccl_collectives.py job,
# in parallel; logs in $logs/NAME.R.log; job_rc is 0 when every rank exited 0.
job() {
  local name=$1 nr=$2 t=$3 envs=() pids=() r rc
  shift 3
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  port=$((port + 1))
  for r in $(seq 0 $((nr - 1))); do
    env "${envs[@]}" timeout "$t" python3 "$here/nccl_collectives.py" --rank "$r" --nranks "$nr" --port "$port" \
      --ctl "$ctl" "$@" > "$logs/$name.$r.log" 2>&1 &
    pids+=($!)
  done
  job_rc=0
  for r in "${!pids[@]}"; do
    wait "${pids[$r]}" || { rc=$?; job_rc=$rc; echo "nccl-real: $name rank $r exited $rc"; }
  done
}
# every_rank NAME NRANKS REGEX: each rank's log has a matching line
every_rank() {
  local r
  for r in $(seq 0 $(($2 - 1))); do grep -Eq -- "$3" "$logs/$1.$r.log" || return 1; done
}
rank0() { grep -E -- "$2" "$logs/$1.0.log"; }

# ---- stages ----

stage_device() {
  local x rc=0 mode r g pids
  [ -x "$conf" ] || { result device SKIP "no mcp-conformance in $bin_dir"; return 0; }
  for mode in host gpu; do
    x=$(mktemp -d /tmp/mcp-uvreal-x.XXXXXX)
    g=()
    pids=()
    [ $mode = gpu ] && g=(--gpu)
    for r in a b; do
      CONF_MAX_SIZE=$((16 << 20)) CONF_CONNS=8 timeout 120 "$conf" "${g[@]}" --plugin "$plugin_so" pair --role $r \
        --xchg "$x" props sizes grouped flush many > "$logs/device-$mode.$r.log" 2>&1 &
      pids+=($!)
    done
    wait "${pids[0]}" || rc=1
    wait "${pids[1]}" || rc=1
    rm -rf "$x"
    grep -q '^5 passed, 0 failed' "$logs/device-$mode.a.log" && grep -q '^5 passed, 0 failed' "$logs/device-$mode.b.log" || rc=1
  done
  if [ $rc = 0 ]; then
    result device PASS "the plugin on the userspace device, two processes, host and GPU-like memory: props sizes grouped flush many"
  else
    result device FAIL "the conformance suite on the userspace device failed (logs device-*.log)"
    return 1
  fi
}

stage_gpu() {
  local why
  if ! why=$(python3 -c 'import torch, sys
if not torch.cuda.is_available(): sys.exit("torch sees no GPU")
print(torch.cuda.get_device_name(0), "torch", torch.__version__, "NCCL", ".".join(map(str, torch.cuda.nccl.version())))' 2>&1); then
    result gpu SKIP "$(echo "$why" | tail -1): the NCCL stages need a GPU and PyTorch; this was the dry run"
    return 2
  fi
  result gpu PASS "$why"
}

# One check job per protocol and memory mode, 2 ranks (--ranks), 8 B to 1 GiB.
stage_collectives() {
  local proto mem name envs budget=${NCCL_REAL_CHECK_BUDGET:-15} ok=0 total=0 gdr
  for mem in gdr host; do
    for proto in Simple LL128 LL; do
      name=check-$mem-$proto
      total=$((total + 1))
      [ "$(left)" -gt 120 ] || { result "$name" SKIP "$(left) s left of NCCL_REAL_LIMIT_S=$limit"; continue; }
      if [ $mem = gdr ]; then
        envs=(NCCL_NET_GDR_LEVEL=SYS NCCL_NET_GDR_READ=1 NCCL_DMABUF_ENABLE=0)
      else
        envs=(NCCL_NET_GDR_LEVEL=LOC)
      fi
      job "$name" "$ranks" 240 "${mcp_env[@]}" "${nccl_log[@]}" "${envs[@]}" NCCL_PROTO=$proto -- check \
        --budget "$budget"
      gdr=$(grep -c 'via NET/MCP/[0-9]*/GDRDMA' "$logs/$name.0.log")
      if [ "$job_rc" != 0 ]; then
        result "$name" FAIL "exit $job_rc: $(grep -h FAIL "$logs/$name".*.log | head -2 | tr '\n' ' ')"
      elif ! every_rank "$name" "$ranks" 'Using network MCP'; then
        result "$name" FAIL "a rank's log does not show NCCL using network MCP"
      elif [ $mem = gdr ] && [ "$gdr" = 0 ]; then
        result "$name" FAIL "NCCL did not use GPU-direct (no 'via NET/MCP/.../GDRDMA' channel): $(grep -h 'GPU Direct RDMA' "$logs/$name.0.log" | head -1)"
      elif [ $mem = host ] && [ "$gdr" != 0 ]; then
        result "$name" FAIL "NCCL used GPU-direct although NCCL_NET_GDR_LEVEL=LOC"
      else
        ok=$((ok + 1))
        result "$name" PASS "$(rank0 "$name" '^check: .* wrong' | head -1 | sed 's/^check: //')$(rank0 "$name" 'budget reached' | sed 's/^check: /; /')"
      fi
    done
  done
  # More than two ranks, and DMA-BUF registrations (NCCL exports CUDA memory as a
  # DMA-BUF fd; a host whose driver cannot gets reported, not failed).
  if [ "$(left)" -gt 90 ]; then
    job check-4ranks 4 240 "${mcp_env[@]}" "${nccl_log[@]}" NCCL_NET_GDR_LEVEL=SYS NCCL_DMABUF_ENABLE=0 -- check \
      --budget "$budget" --max-bytes $((256 << 20))
    if [ "$job_rc" = 0 ] && every_rank check-4ranks 4 'Using network MCP'; then
      result check-4ranks PASS "$(rank0 check-4ranks '^check: .* wrong' | sed 's/^check: //')"
    else
      result check-4ranks FAIL "exit $job_rc (logs check-4ranks.*.log)"
    fi
  else
    result check-4ranks SKIP "$(left) s left"
  fi
  if [ "$(left)" -gt 90 ]; then
    job check-dmabuf "$ranks" 180 "${mcp_env[@]}" "${nccl_log[@]}" NCCL_NET_GDR_LEVEL=SYS NCCL_DMABUF_ENABLE=1 -- check \
      --budget 10 --max-bytes $((64 << 20))
    if [ "$job_rc" = 0 ]; then
      result check-dmabuf PASS "$(rank0 check-dmabuf '^check: .* wrong' | sed 's/^check: //')"
    elif grep -q 'cuMemGetHandleForAddressRange' "$logs/check-dmabuf".*.log; then
      result check-dmabuf SKIP "this host's CUDA driver cannot export DMA-BUFs (cuMemGetHandleForAddressRange failed)"
    else
      result check-dmabuf FAIL "exit $job_rc (logs check-dmabuf.*.log)"
    fi
  else
    result check-dmabuf SKIP "$(left) s left"
  fi
  [ "$ok" = "$total" ]
}

stage_fault() {
  [ "$(left)" -gt 80 ] || { result fault SKIP "$(left) s left of NCCL_REAL_LIMIT_S=$limit"; return 0; }
  # QP timers that fail within the 2 s cut (67 ms x 4), as the lab's flap scenarios do.
  job fault 2 240 "${mcp_env[@]}" "${nccl_log[@]}" NCCL_IB_TIMEOUT=14 NCCL_IB_RETRY_CNT=3 NCCL_NET_GDR_LEVEL=SYS \
    NCCL_DMABUF_ENABLE=0 -- fault --iters 60 --bytes $((64 << 20)) --cut 2
  if [ "$job_rc" != 0 ]; then
    result fault FAIL "exit $job_rc: $(grep -h 'FAIL\|fault:' "$logs"/fault.*.log | head -3 | tr '\n' ' ')"
  elif ! grep -qE 'recovered from .* in [0-9.]+ s' "$logs"/fault.*.log; then
    result fault FAIL "the results were right, but no rank logged a recovery: the cut did not reach the QPs"
  else
    result fault PASS "$(rank0 fault '^fault: [0-9]+ all_reduces' | sed 's/^fault: //'); $(grep -hoE 'recovered from .* in [0-9.]+ s' "$logs"/fault.*.log | head -1)"
  fi
}

# NCCL's example profiler with net plugin events: mcpnet's QP events in its trace.
stage_profiler() {
  local so=$bin_dir/lib/libnccl-profiler-example.so n m
  [ -f "$so" ] || { result profiler SKIP "no NCCL example profiler in $bin_dir/lib (--pack builds it)"; return 0; }
  [ "$(left)" -gt 60 ] || { result profiler SKIP "$(left) s left of NCCL_REAL_LIMIT_S=$limit"; return 0; }
  # Coll (2) | ProxyOp (8) | ProxyStep (16) | NetPlugin (128): the steps net events hang under.
  job profiler 2 180 "${mcp_env[@]}" "${nccl_log[@]}" NCCL_NET_GDR_LEVEL=SYS NCCL_DMABUF_ENABLE=0 \
    NCCL_PROFILER_PLUGIN="$so" NCCL_PROFILE_EVENT_MASK=154 NCCL_PROFILE_DUMP_FILE="$logs/prof" -- check \
    --budget 5 --max-bytes $((4 << 20)) --collectives all_reduce
  n=$(cat "$logs"/prof-* 2> /dev/null | grep -c '"cat": "NET_IB", "ph": "b"')
  m=$(cat "$logs"/prof-* 2> /dev/null | grep -c '"cat": "NET_IB", "ph": "e"')
  if [ "$job_rc" != 0 ]; then
    result profiler FAIL "exit $job_rc with NCCL's example profiler loaded (logs profiler.*.log)"
  elif [ "$n" -eq 0 ]; then
    result profiler FAIL "the example profiler's trace holds no NET_IB QP event (files $(ls "$logs"/prof-* 2> /dev/null | wc -l))"
  else
    result profiler PASS "$n QP events in NCCL's example profiler trace ($m ended), e.g. $(grep -h -m1 '"cat": "NET_IB", "ph": "b"' "$logs"/prof-* | grep -o '"args": {[^}]*}')"
  fi
}

# nccl-tests with MPI when both are here; the table is then nccl-tests' own.
nccl_tests_build() {
  local src=${NCCL_TESTS_SRC:-} nccl_home cuda mpi
  [ -n "$src" ] || for d in "$bin_dir/nccl-tests" "$repo/.device/nccl-tests"; do [ -d "$d/src" ] && src=$d && break; done
  [ -n "$src" ] || { echo "no nccl-tests source (pack one with --pack)"; return 1; }
  command -v mpicc > /dev/null && command -v mpirun > /dev/null || { echo "no MPI (mpicc, mpirun) on this host"; return 1; }
  nccl_home=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2> /dev/null) ||
    { echo "no NCCL headers (the nvidia-nccl wheel)"; return 1; }
  [ -f "$nccl_home/include/nccl.h" ] || { echo "no nccl.h under $nccl_home"; return 1; }
  cuda=$(dirname "$(dirname "$(command -v nvcc)")")
  mpi=$(dirname "$(dirname "$(command -v mpicc)")")
  rm -rf /tmp/nccl-tests && cp -r "$src" /tmp/nccl-tests
  make -C /tmp/nccl-tests -j"$(nproc)" MPI=1 MPI_HOME="$mpi" NCCL_HOME="$nccl_home" CUDA_HOME="$cuda" \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" > "$logs/nccl-tests-build.log" 2>&1 ||
    { echo "nccl-tests did not build (nccl-tests-build.log)"; return 1; }
  echo "/tmp/nccl-tests/build $nccl_home/lib"
}

stage_bench() {
  local how nt lib t name env_mcp env_sock
  [ "$(left)" -gt 100 ] || { result bench SKIP "$(left) s left of NCCL_REAL_LIMIT_S=$limit"; return 0; }
  env_mcp=("${mcp_env[@]}" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT NCCL_NET_GDR_LEVEL=SYS NCCL_DMABUF_ENABLE=0)
  env_sock=(NCCL_NET=Socket NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT)
  if how=$(nccl_tests_build); then
    nt=${how% *} lib=${how#* }
    cat > /tmp/nccl-tests/rank.sh << 'EOF'
#!/bin/bash
r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${PMIX_RANK:-0}}}
export NCCL_HOSTID=mcpnet-real-host$r NCCL_TESTS_DEVICE=0
exec "$@"
EOF
    chmod +x /tmp/nccl-tests/rank.sh
    for t in mcp sock; do
      for name in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
        local e=("${env_mcp[@]}")
        [ $t = sock ] && e=("${env_sock[@]}")
        env "${e[@]}" LD_LIBRARY_PATH="$lib:$plugin_dir" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
          timeout 120 mpirun -np "$ranks" /tmp/nccl-tests/rank.sh "$nt/${name}_perf" -b 8 -e 1G -f 8 -g 1 -n 5 -w 2 \
          > "$logs/bench-$t.$name.log" 2>&1 || result bench FAIL "nccl-tests $name on $t failed"
      done
    done
    note "bench: nccl-tests ($nt), MPI, $ranks ranks"
  else
    note "bench: nccl-tests not used: $how; nccl_collectives.py bench computes nccl-tests' figures the same way"
    job bench-mcp "$ranks" 200 "${env_mcp[@]}" -- bench --budget "${NCCL_REAL_BENCH_BUDGET:-40}"
    [ "$job_rc" = 0 ] || result bench FAIL "the mcpnet bench job failed (exit $job_rc)"
    every_rank bench-mcp "$ranks" 'Using network MCP' || result bench FAIL "the bench job did not use network MCP"
    job bench-sock "$ranks" 200 "${env_sock[@]}" -- bench --budget "${NCCL_REAL_BENCH_BUDGET:-40}"
    [ "$job_rc" = 0 ] || result bench FAIL "the Socket bench job failed (exit $job_rc)"
    every_rank bench-sock "$ranks" 'Using network Socket' || result bench FAIL "the Socket job did not use network Socket"
    grep -vE '^\[|NCCL INFO|^job:' "$logs/bench-mcp.0.log" > "$out/bench-mcp.txt"
    grep -vE '^\[|NCCL INFO|^job:' "$logs/bench-sock.0.log" > "$out/bench-sock.txt"
  fi
  # mcpnet's busbw against Socket's, size by size (the column 8 of nccl-tests' rows,
  # out of place, in both formats).
  python3 - "$out" "$logs" << 'EOF' | tee -a "$summary"
import glob, os, re, sys
out, logs = sys.argv[1], sys.argv[2]
def table(paths):
    res, coll = {}, None
    for path in paths:
        for line in open(path, errors='replace'):
            m = re.match(r'#\s*(?:nccl-tests )?(\w+?)_perf', line) or re.search(r'Collective test .*?(\w+)_perf', line)
            base = os.path.basename(path)
            mm = re.match(r'bench-\w+\.(\w+)\.log', base)
            if mm:
                coll = mm.group(1)
            elif m:
                coll = m.group(1)
            f = line.split()
            if coll and len(f) >= 8 and f[0].isdigit():
                try:
                    res[(coll, int(f[0]))] = float(f[7])
                except ValueError:
                    pass
    return res
mcp = table(sorted(glob.glob(f'{out}/bench-mcp.txt') + glob.glob(f'{logs}/bench-mcp.*.log')))
sock = table(sorted(glob.glob(f'{out}/bench-sock.txt') + glob.glob(f'{logs}/bench-sock.*.log')))
print('# busbw, GB/s: mcpnet on the userspace device / NCCL Socket, same ranks, same run')
print(f'# {"collective":16s} {"size":>12s} {"mcpnet":>9s} {"Socket":>9s} {"ratio":>7s}')
for k in sorted(mcp):
    if k in sock:
        r = mcp[k] / sock[k] if sock[k] > 0 else float('nan')
        print(f'  {k[0]:16s} {k[1]:12d} {mcp[k]:9.2f} {sock[k]:9.2f} {r:7.2f}')
if not mcp:
    print('# no mcpnet figures were found')
EOF
  grep -q 'ratio' "$summary" && [ "$fails" = 0 ] && result bench PASS "tables in bench-mcp, bench-sock; busbw ratios in summary.txt"
}

# ---- run ----
note "nccl-real: $(date -u +%FT%TZ) on $(hostname), $(nproc) CPUs; plugin $plugin_so; device $uverbs_so; fabric $fabric"
for s in $stages; do
  if ! declare -F "stage_$s" > /dev/null; then
    result "$s" FAIL "no such stage"
    continue
  fi
  t0=$SECONDS
  "stage_$s"
  rc=$?
  echo "nccl-real: stage $s took $((SECONDS - t0)) s" >> "$summary"
  if [ "$rc" = 2 ]; then # no GPU: the rest needs one
    for r in $stages; do
      case " device gpu " in *" $r "*) ;; *) grep -q "^$r " "$out/results.txt" || result "$r" SKIP "no GPU here" ;; esac
    done
    break
  fi
done
{
  echo
  echo "== nccl-real: results (wall $((SECONDS - t_begin)) s of NCCL_REAL_LIMIT_S=$limit)"
  cat "$out/results.txt"
} | tee -a "$summary"
tar -czf "$out/logs.tar.gz" -C "$out" logs 2> /dev/null && rm -rf "$logs"
[ "$fails" = 0 ] && echo "nccl-real: nothing failed" && exit 0
echo "nccl-real: $fails check(s) failed (logs in $out/logs.tar.gz)"
exit 1
