# nccl_two_hosts.py - one rank of a two-rank PyTorch job whose ranks share one GPU but
# look like two hosts to NCCL (NCCL_HOSTID differs), so NCCL's net layer carries the
# traffic: an all-reduce and a send/recv, checked. Run by nccl-no-rdma.sh.
#   python3 nccl_two_hosts.py RANK PORT
import os
import sys
import time

rank, port = int(sys.argv[1]), sys.argv[2]
os.environ['NCCL_HOSTID'] = f'mcpnet-check-host{rank}'
import torch  # noqa: E402  (NCCL reads NCCL_HOSTID at its init)
import torch.distributed as dist  # noqa: E402

t0 = time.time()
dist.init_process_group('nccl', init_method=f'tcp://127.0.0.1:{port}', rank=rank, world_size=2,
                        device_id=torch.device('cuda:0'))
x = torch.full((1 << 22,), float(rank + 1), device='cuda')
dist.all_reduce(x)
ref = torch.arange(1 << 20, device='cuda', dtype=torch.float32)
y = torch.empty_like(ref)
if rank == 0:
    dist.send(ref, 1)
else:
    dist.recv(y, 0)
torch.cuda.synchronize()
ok = bool((x == 3).all()) and (rank == 0 or bool((y == ref).all()))
print(f'nccl_two_hosts: rank {rank}: all-reduce and send/recv correct={ok}, '
      f'NCCL {torch.cuda.nccl.version()}, {time.time() - t0:.1f} s', flush=True)
dist.destroy_process_group()
sys.exit(0 if ok else 1)
