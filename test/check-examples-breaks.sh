#!/bin/bash
# check-examples-breaks.sh - check-examples.py must catch each way an example goes wrong:
# every case below breaks one thing in a scratch copy of examples/ and expects the checker
# to fail naming it. A checker that passes everything would pass unit_examples too; this
# is what shows that it can fail.
#   check-examples-breaks.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=${1:?usage: check-examples-breaks.sh SOURCE_DIR BUILD_DIR}
build=${2:?usage: check-examples-breaks.sh SOURCE_DIR BUILD_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

# case FILE SED-EXPRESSION EXPECTED-SUBSTRING
case_() {
  local file=$1 expr=$2 want=$3 out
  rm -rf "$work/ex" && cp -a "$src/examples" "$work/ex"
  sed -i -e "$expr" "$work/ex/$file"
  if cmp -s "$src/examples/$file" "$work/ex/$file"; then
    echo "BROKEN CASE: '$expr' changes nothing in $file"; failed=1; return
  fi
  if out=$(python3 "$src/test/check-examples.py" "$src" "$build" --examples "$work/ex" 2>&1); then
    echo "MISSED: $file with '$expr' passes the check"; failed=1; return
  fi
  if ! grep -qF -- "$want" <<<"$out"; then
    echo "WRONG REASON: $file with '$expr': wanted '$want', got:"; echo "$out"; failed=1; return
  fi
  echo "caught: $file '$expr': $(grep -F -- "$want" <<<"$out" | head -n 1)"
}

case_ Dockerfile 's/mcpnet_\*_amd64\.deb/mcpnet-plugin_*_amd64.deb/' "but CPack builds mcpnet_"
case_ Dockerfile 's#/usr/lib/x86_64-linux-gnu/libnccl-net-mcp.so#/usr/lib/libnccl-net-mcp.so#' "names /usr/lib/libnccl-net-mcp.so"
case_ Dockerfile 's/mcpnet-params --check/mcpnet-check/' "runs mcpnet-check, which the project does not install"
case_ Dockerfile 's/NCCL_NET_PLUGIN=mcp/NCCL_NET_PLUGIN=mcpnet/' "would open libnccl-net-mcpnet.so"
case_ Dockerfile 's/-DMCPNET_BUILD_TESTS=OFF/-DMCPNET_TESTS=OFF/' "passes -DMCPNET_TESTS"
case_ Dockerfile 's/cpack -G DEB/cpack -G TGZ/' "does not build the package with 'cpack -G DEB'"
case_ Dockerfile.dockerignore '/^build\/$/d' "does not keep build/ out of the build context"
case_ kubernetes/pytorchjob.yaml 's/MCPNET_OOB_PORT_RANGE/MCPNET_OOB_PORTS/' "MCPNET_OOB_PORTS=20000-20099 (environment) is not an mcpnet variable"
case_ kubernetes/pytorchjob.yaml 's/"20000-20099"/"20000-70000"/' "mcpnet-params --check fails on"
case_ kubernetes/pytorchjob.yaml 's/^  nprocPerNode:/ nprocPerNode:/' "is not valid YAML"
case_ kubernetes/pytorchjob.yaml 's/add: \["IPC_LOCK"\]/add: []/' "no IPC_LOCK capability"
case_ kubernetes/pytorchjob.yaml 's/endPort: 20099/endPort: 20050/' "opens TCP 20000-20099"
case_ kubernetes/pytorchjob.yaml 's/"--min-memlock"/"--min-mem-lock"/' "mcpnet-doctor has no option --min-mem-lock"
case_ kubernetes/pytorchjob.yaml 's/rdma\/rdma_shared_device_a/example.com\/nic/' "requests no RDMA resource"
case_ kubernetes/pytorchjob.yaml 's/medium: Memory/medium: ""/' "/dev/shm is not a memory emptyDir"
case_ kubernetes/pytorchjob.yaml '/command: \["mcpnet-doctor"/s/mcpnet-doctor/true/' "no init container runs mcpnet-doctor"
case_ slurm/allreduce.sbatch 's/^set -euo pipefail$/if then/' "bash -n"
case_ slurm/allreduce.sbatch 's/srun --container-image=/srun --image=/' "srun without pyxis --container-image"
case_ slurm/allreduce.sbatch 's/NCCL_NET_PLUGIN=mcp /NCCL_NETPLUGIN=mcp /' "NCCL_NETPLUGIN is neither an mcpnet parameter"
case_ slurm/prolog-mcpnet-doctor.sh 's/--min-memlock 0/--memlock 0/' "mcpnet-doctor has no option --memlock"
case_ allreduce_check.py 's/NCCL_DEBUG_SUBSYS=/NCCL_DEBUG_SUBSYSTEMS=/' "NCCL_DEBUG_SUBSYSTEMS is neither"
case_ allreduce_check.py 's/^import os/imprt os/' "Python syntax"
exit $failed
