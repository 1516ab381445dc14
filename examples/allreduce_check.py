# allreduce_check.py - one all_reduce across every rank, then the transport NCCL chose.
# Run with torchrun (it sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR). NCCL's log goes to
# a file per process so this can print NCCL's own "Using network ..." line (MCP, IB, Socket).
import os, torch, torch.distributed as dist

log = f"/tmp/nccl-allreduce-check.{os.getpid()}.log"
os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,NET", NCCL_DEBUG_FILE=log)
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
x = torch.full((64 << 20,), float(rank + 1), device="cuda")  # 256 MiB: crosses the network
dist.all_reduce(x)
torch.cuda.synchronize()
ok = bool(torch.all(x == world * (world + 1) / 2))
dist.destroy_process_group()
with open(log, errors="replace") as f:
    chosen = [l.strip() for l in f if "Using network" in l or "NET/Plugin" in l]
print(f"rank {rank}/{world} local {local_rank}: all_reduce {'OK' if ok else 'WRONG'};",
      " | ".join(chosen) or f"no 'Using network' line in {log}", flush=True)
raise SystemExit(0 if ok and any("Using network MCP" in l for l in chosen) else 1)
