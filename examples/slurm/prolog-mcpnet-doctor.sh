#!/bin/bash
# prolog-mcpnet-doctor.sh - a Slurm prolog (e.g. /etc/slurm/prolog.d/50-mcpnet-doctor.sh,
# Prolog=/etc/slurm/prolog.d/* in slurm.conf) that runs mcpnet-doctor on each node before a
# job starts there. A non-zero exit makes Slurm drain the node and requeue the job, so a node
# with a DOWN port, a missing uverbs node or no usable GID takes no job.
# Needs the mcpnet package on the node itself (apt-get install ./mcpnet_*.deb).
#
# Node-local only: a prolog runs on one node with no node rank or node count
# (SLURM_NODEID and SLURM_NNODES are given to srun's tasks, not to the Prolog), so
# `mcpnet-doctor --fleet` cannot run here; it exits 2, and the node would be drained for
# it. Run the fleet check as the job's first step instead (allreduce.sbatch). By default
# slurmd runs the Prolog when the job's first step starts on the node; with
# PrologFlags=Alloc in slurm.conf it runs at allocation, before the batch script.
set -u
export NCCL_NET_PLUGIN=mcp NCCL_NET=MCP   # also checks that the loader finds the plugin
# The prolog runs with slurmd's limits, not the job's, so the memlock check is left to the
# job's own doctor step (examples/slurm/allreduce.sbatch): --min-memlock 0 here.
out=$(timeout 120 /usr/bin/mcpnet-doctor --min-memlock 0 2>&1)
rc=$?
if [ "$rc" -ne 0 ]; then
  # The FAIL lines name the problem and the fix; they go to the node's log.
  grep -E '\[FAIL\]|fix:' <<<"$out" | logger -t mcpnet-prolog
  logger -t mcpnet-prolog "mcpnet-doctor exited $rc on $(hostname) for job ${SLURM_JOB_ID:-?}"
  exit 1
fi
exit 0
