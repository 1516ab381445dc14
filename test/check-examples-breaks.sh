#!/bin/bash
# check-examples-breaks.sh - check-examples.py must catch each way an example goes wrong:
# every case below breaks one thing in a scratch copy of examples/ and expects the checker
# to fail naming it. A checker that passes everything would pass unit_examples too; this
# is what shows that it can fail. Among the cases, each finding of issue 39 reintroduced:
# the MultiNetworkPolicy annotation, endPort without its minimum versions, the doctor step
# inheriting the allocation's tasks, --fleet in a prolog or an init container, the image
# named differently for enroot, MELLANOX_VISIBLE_DEVICES unmentioned, the Dockerfile
# checking before its ENV, NCCL_NET in the image, an unused build package.
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

D=Dockerfile K=kubernetes/pytorchjob.yaml S=slurm/allreduce.sbatch P=slurm/prolog-mcpnet-doctor.sh
# The Dockerfile against the project, and its order.
case_ $D 's#/build/mcpnet_\*\.deb#/build/mcpnet-plugin_*.deb#' "but CPack builds mcpnet_VERSION_ARCH.deb"
case_ $D 's#/build/mcpnet_\*\.deb#/build/mcpnet*.deb#' "also matches mcpnet-bench_"
case_ $D 's#"/usr/lib/$(uname -m)-linux-gnu/libnccl-net-mcp.so"#/usr/lib/libnccl-net-mcp.so#' "names /usr/lib/libnccl-net-mcp.so"
case_ $D 's/mcpnet-params --check/mcpnet-check/' "runs mcpnet-check, which the project does not install"
case_ $D 's/^ENV NCCL_NET_PLUGIN=mcp$/ENV NCCL_NET_PLUGIN=mcpnet/' "would open libnccl-net-mcpnet.so"
case_ $D 's/-DMCPNET_BUILD_TESTS=OFF/-DMCPNET_TESTS=OFF/' "passes -DMCPNET_TESTS"
case_ $D 's/cpack -G DEB/cpack -G TGZ/' "does not build the package with 'cpack -G DEB'"
case_ $D 's/^ENV NCCL_NET_PLUGIN=mcp$/ENV NCCL_NET_PLUGIN=mcp NCCL_NET=MCP/' "sets NCCL_NET=MCP in the image"
case_ $D '/^ENV NCCL_NET_PLUGIN=mcp$/d; /^COPY examples\/allreduce_check.py/i ENV NCCL_NET_PLUGIN=mcp' "runs mcpnet-params --check before the ENV that sets NCCL_NET_PLUGIN"
case_ $D 's/cmake file libibverbs-dev/cmake file libibverbs-dev pkg-config/' "drop ['pkg-config']"
case_ $D 's/-j"$(nproc)"/-j$(nproc)/' "[SC2046]"
case_ Dockerfile.dockerignore '/^build\/$/d' "does not keep build/ out of the build context"
# The PyTorchJob and the MultiNetworkPolicy against their CRDs and the names their projects read.
case_ $K 's#k8s.v1.cni.cncf.io/policy-for#k8s.v1beta1.cni.cncf.io/policy-for#' "annotation k8s.v1beta1.cni.cncf.io/policy-for is not one any project"
case_ $K 's/policy-for: rdma-net/policy-for: other-net/' "names none of the pods' networks"
case_ $K 's/multi-networkpolicy v1\.0\.1/multi-networkpolicy/' "the CRD of multi-networkpolicy before v1.0.1 drops what it uses"
case_ $K 's/nprocPerNode: "8"/nprocPerNode: 8/' "spec.nprocPerNode: wants string, got integer"
case_ $K '0,/  restartPolicy: Never/s//  restartpolicy: Never/' "restartpolicy: unknown field"
case_ $K 's/policyTypes:/policyType:/' "spec.policyType: unknown field"
case_ $K 's#rdma/rdma_shared_device_a#rdma/shared_device_a#' "requests rdma/shared_device_a, which no device plugin"
case_ $K '/command: \["mcpnet-doctor"/s/"--min-memlock", "1024"/"--fleet"/' "mcpnet-doctor --fleet cannot place itself here: no node count"
case_ $K '/command: \["mcpnet-doctor"/s/\["mcpnet-doctor", "--min-memlock", "1024"\]/["sh", "-c", "mcpnet-doctor --fleet --nodes \\"$PET_NNODES\\" --node-rank \\"$PET_NODE_RANK\\""]/' "its command uses \$PET_NNODES, which is not set in its environment"
case_ $K 's#image: registry.example.com/ml/pytorch-mcpnet:latest#image: my-registry/pytorch-mcpnet:latest#' "runs image docker.io/my-registry/pytorch-mcpnet:latest, but examples/Dockerfile builds"
case_ $K 's/MCPNET_OOB_PORT_RANGE/MCPNET_OOB_PORTS/' "MCPNET_OOB_PORTS=20000-20099 (environment) is not an mcpnet variable"
case_ $K 's/value: "mcp"/value: "mpc"/' "did you mean mcp?"
case_ $K 's/"20000-20099"/"20000-70000"/' "mcpnet-params --check fails on"
case_ $K 's/^  nprocPerNode:/ nprocPerNode:/' "is not valid YAML"
case_ $K 's/add: \["IPC_LOCK"\]/add: []/' "no IPC_LOCK capability"
case_ $K 's/endPort: 20099/endPort: 20050/' "opens TCP 20000-20099"
case_ $K 's/"--min-memlock"/"--min-mem-lock"/' "mcpnet-doctor has no option --min-mem-lock"
case_ $K 's/medium: Memory/medium: ""/' "/dev/shm is not a memory emptyDir"
case_ $K '/command: \["mcpnet-doctor"/s/mcpnet-doctor/true/' "no init container runs mcpnet-doctor"
# The batch script run against Slurm's stand-ins, and the prolog in a prolog's environment.
case_ $S 's/srun -N"$SLURM_JOB_NUM_NODES" --ntasks-per-node=1/srun --ntasks-per-node=1/' "runs [8, 8] tasks per node on 2 nodes"
case_ $S 's/registry.example.com#ml/registry.example.com\/ml/' "which pyxis/enroot read as docker.io/registry.example.com/ml/pytorch-mcpnet:latest"
case_ $S '/MELLANOX_VISIBLE_DEVICES/d' "does not mention MELLANOX_VISIBLE_DEVICES"
case_ $S '/shellcheck disable=SC2016/d' "[SC2016]"
case_ $S 's/^export NCCL_NET=MCP /export NCCL_NET=MPC /' "NCCL_NET=MPC names no network NCCL has"
case_ $S 's/^set -euo pipefail$/if then/' "bash -n"
case_ $S 's/srun --container-image=/srun --image=/' "srun without pyxis --container-image"
case_ $S 's/NCCL_NET_PLUGIN=mcp /NCCL_NETPLUGIN=mcp /' "NCCL_NETPLUGIN is neither an mcpnet parameter"
# The fleet preflight's run token is a secret: drawn per job or from a Secret, never literal.
case_ $S 's/^MCPNET_DOCTOR_TOKEN=.*/MCPNET_DOCTOR_TOKEN=a-token-everyone-copies/' "MCPNET_DOCTOR_TOKEN=a-token-everyone-copies: a secret written into the example"
case_ $K '/name: MCPNET_DOCTOR_TOKEN/{n;s/valueFrom:/value: "a-token-everyone-copies"/;n;N;N;d}' "a secret written into the example"
case_ $P 's/--min-memlock 0/--min-memlock 0 --fleet/' "exits 2 in a prolog's environment"
case_ $P 's/^exit 0$/exit 1/' "exits 1 on a healthy node: a failing Prolog drains the node"
case_ $P 's/--min-memlock 0/--memlock 0/' "mcpnet-doctor has no option --memlock"
case_ allreduce_check.py 's/NCCL_DEBUG_SUBSYS=/NCCL_DEBUG_SUBSYSTEMS=/' "NCCL_DEBUG_SUBSYSTEMS is neither"
case_ allreduce_check.py 's/^import os/imprt os/' "Python syntax"
exit $failed
