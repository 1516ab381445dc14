# nccl_collectives.py - one rank of a PyTorch job whose ranks share one GPU but look like
# separate hosts to NCCL (NCCL_HOSTID differs), so NCCL's net layer carries every byte.
# Run by nccl-real.sh, which sets NCCL's and mcpnet's environment; this program never
# chooses the transport itself.
#
#   python3 nccl_collectives.py --rank R --nranks N --port P MODE [options]
#
# MODE check: every collective NCCL has (all_reduce, all_gather, reduce_scatter,
#   broadcast, reduce, alltoall, send/recv in a ring) at sizes from 8 B up to
#   --max-bytes by 8x steps, each result compared element by element with what it must
#   be (int32 data computed from the rank and the index). Sizes stop growing where the
#   next one (8x the last, so about 8x its time) would end past --budget seconds, which is
#   said ("budget reached").
# MODE fault: --iters all_reduces of --bytes, each checked; at a third of them rank 0
#   cuts the link between its process and rank 1's (mcp-uverbs-ctl, the userspace verbs
#   device's fault control) for --cut seconds, then mends it. The loop goes on meanwhile:
#   mcpnet must recover and every result must still be right.
# MODE bench: the figures nccl-tests prints (size, count, type, redop, root, time in us,
#   algbw and busbw in GB/s, #wrong) for each collective, out of place, computed as
#   nccl-tests computes them: time the mean of the iterations on the slowest rank,
#   algbw = size / time, busbw = algbw x the collective's factor (all_reduce 2(n-1)/n,
#   all_gather, reduce_scatter and alltoall (n-1)/n, the others 1). Iterations per size
#   are calibrated to about --point-time seconds after a warm-up. A checked pass before
#   the timed one counts #wrong. Sizes stop growing when the collective's share of
#   --budget would be spent (said in the table).
# Output: lines starting "check:", "fault:" or the table (rank 0), "FAIL" lines from any
# rank; exit 0 only when every result was right.
import argparse
import os
import subprocess
import sys
import time

p = argparse.ArgumentParser()
p.add_argument('--rank', type=int, required=True)
p.add_argument('--nranks', type=int, required=True)
p.add_argument('--port', type=int, required=True)
p.add_argument('mode', choices=['check', 'fault', 'bench'])
p.add_argument('--max-bytes', type=int, default=1 << 30)
p.add_argument('--budget', type=float, default=60.0)
p.add_argument('--bytes', type=int, default=64 << 20)
p.add_argument('--iters', type=int, default=60)
p.add_argument('--cut', type=float, default=2.0)
p.add_argument('--ctl', default='mcp-uverbs-ctl')
p.add_argument('--point-time', type=float, default=0.3)
p.add_argument('--collectives', default='all_reduce,all_gather,reduce_scatter,broadcast,reduce,alltoall,sendrecv')
a = p.parse_args()
rank, n = a.rank, a.nranks
os.environ['NCCL_HOSTID'] = f'mcpnet-real-host{rank}'
import torch  # noqa: E402  (NCCL reads NCCL_HOSTID at its init)
import torch.distributed as dist  # noqa: E402

dev = torch.device('cuda:0')
torch.cuda.set_device(dev)
t_start = time.time()
dist.init_process_group('nccl', init_method=f'tcp://127.0.0.1:{a.port}', rank=rank, world_size=n,
                        device_id=dev)
wrong_total = 0


def say(msg):
    if rank == 0:
        print(msg, flush=True)


def fail(msg):
    global wrong_total
    wrong_total += 1
    print(f'FAIL rank {rank}: {msg}', flush=True)


def val(r, idx):
    """The data rank r contributes at element idx (int32, small enough never to overflow)."""
    return ((idx * 7 + r * 13) % 1021 + 1).to(torch.int32)


def prepare(coll, nbytes):
    """Buffers for one out-of-place collective of about nbytes: (op, wrong, bytes, count).
    op() runs the collective alone (what is timed); wrong() counts the elements of the
    last result that differ from what they must be."""
    grouped = coll in ('all_gather', 'reduce_scatter', 'alltoall')
    cnt = max(1, nbytes // 4 // (n if grouped else 1))
    total = cnt * n if grouped else cnt
    idx_c = torch.arange(cnt, device=dev, dtype=torch.int64)
    idx_t = torch.arange(total, device=dev, dtype=torch.int64)
    if coll == 'all_reduce':
        src, out = val(rank, idx_c), torch.empty(cnt, device=dev, dtype=torch.int32)

        def op():
            out.copy_(src)  # torch's all_reduce works in place: the input first (a device copy, ~0.1% of the time)
            dist.all_reduce(out)
        exp = sum(val(r, idx_c) for r in range(n))
    elif coll == 'all_gather':
        src, out = val(rank, idx_c), torch.empty(total, device=dev, dtype=torch.int32)

        def op():
            dist.all_gather_into_tensor(out, src)
        exp = torch.cat([val(r, idx_c) for r in range(n)])
    elif coll == 'reduce_scatter':
        src, out = val(rank, idx_t), torch.empty(cnt, device=dev, dtype=torch.int32)

        def op():
            dist.reduce_scatter_tensor(out, src)
        exp = sum(val(r, idx_t) for r in range(n))[rank * cnt:(rank + 1) * cnt]
    elif coll == 'broadcast':
        src, out = val(rank, idx_c), torch.empty(cnt, device=dev, dtype=torch.int32)

        def op():
            out.copy_(src)
            dist.broadcast(out, src=0)
        exp = val(0, idx_c)
    elif coll == 'reduce':
        src, out = val(rank, idx_c), torch.empty(cnt, device=dev, dtype=torch.int32)

        def op():
            out.copy_(src)
            dist.reduce(out, dst=0)
        exp = sum(val(r, idx_c) for r in range(n)) if rank == 0 else val(rank, idx_c)
    elif coll == 'alltoall':
        src, out = val(rank, idx_t), torch.empty(total, device=dev, dtype=torch.int32)

        def op():
            dist.all_to_all_single(out, src)
        exp = torch.cat([val(j, idx_t)[rank * cnt:(rank + 1) * cnt] for j in range(n)])
    else:  # sendrecv: a ring, each rank sends to the next and receives from the previous
        src, out = val(rank, idx_c), torch.empty(cnt, device=dev, dtype=torch.int32)

        def op():
            ops = [dist.P2POp(dist.isend, src, (rank + 1) % n), dist.P2POp(dist.irecv, out, (rank - 1) % n)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
        exp = val((rank - 1) % n, idx_c)

    def wrong():
        torch.cuda.synchronize()
        return int((out != exp).sum().item())
    return op, wrong, total * 4, total


def run(coll, nbytes):
    """One checked collective: (wrong elements, bytes, count)."""
    op, wrong, nb, count = prepare(coll, nbytes)
    op()
    return wrong(), nb, count


def sizes(maxb):
    s, out = 8, []
    while s <= maxb:
        out.append(s)
        s *= 8
    if out[-1] != maxb:
        out.append(maxb)
    return out


colls = a.collectives.split(',')
say(f'job: {n} ranks on one GPU as {n} hosts, NCCL {".".join(map(str, torch.cuda.nccl.version()))}, '
    f'torch {torch.__version__}, init {time.time() - t_start:.1f} s, '
    f'NCCL_PROTO={os.environ.get("NCCL_PROTO", "(default)")}, '
    f'NCCL_NET_GDR_LEVEL={os.environ.get("NCCL_NET_GDR_LEVEL", "(default)")}')

def within_budget(t0, last):
    """Whether the next size (8x the last) is expected to end inside --budget; every rank
    must answer the same, so rank 0's answer is the job's."""
    go = torch.tensor([1 if time.time() - t0 + 8 * last <= a.budget else 0], device=dev)
    dist.broadcast(go, src=0)
    return bool(go.item())


if a.mode == 'check':
    t0 = time.time()
    checked, reached, top, last = 0, None, 0, 0.0
    for s in sizes(a.max_bytes):
        if not within_budget(t0, last):
            reached = s
            break
        t1 = time.time()
        for c in colls:
            bad, nb, _ = run(c, s)
            checked += 1
            if bad:
                fail(f'{c} of {nb} B: {bad} element(s) wrong')
        top, last = s, time.time() - t1
    w = torch.tensor([wrong_total], device=dev)
    dist.all_reduce(w)
    say(f'check: {len(colls)} collectives ({",".join(colls)}) at sizes 8 B..{top} B, {checked} results '
        f'checked on each rank, {int(w.item())} wrong (all ranks), {time.time() - t0:.1f} s')
    if reached is not None:
        say(f'check: budget reached ({a.budget:.0f} s): sizes from {reached} B up were not run')
    wrong_total = int(w.item())
elif a.mode == 'fault':
    pids = [None] * n
    dist.all_gather_object(pids, os.getpid())
    cut_at = a.iters // 3
    t0 = time.time()
    for i in range(a.iters):
        if rank == 0 and i == cut_at:
            subprocess.run([a.ctl, str(pids[0]), 'link', str(pids[1]), 'down'], check=True, capture_output=True)
            say(f'fault: iteration {i}: link between rank 0 (pid {pids[0]}) and rank 1 (pid {pids[1]}) cut')
        bad, nb, _ = run('all_reduce', a.bytes)
        if bad:
            fail(f'all_reduce {i} of {nb} B: {bad} element(s) wrong')
        if rank == 0 and i == cut_at:
            time.sleep(a.cut)  # NCCL's proxy keeps calling mcpnet meanwhile
            subprocess.run([a.ctl, str(pids[0]), 'link', str(pids[1]), 'up'], check=True, capture_output=True)
            say(f'fault: iteration {i}: link mended after {a.cut:.1f} s')
    w = torch.tensor([wrong_total], device=dev)
    dist.all_reduce(w)
    wrong_total = int(w.item())
    say(f'fault: {a.iters} all_reduces of {a.bytes} B checked, {wrong_total} wrong, '
        f'link cut at iteration {cut_at} for {a.cut:.1f} s, {time.time() - t0:.1f} s')
else:
    factor = {'all_reduce': 2 * (n - 1) / n, 'all_gather': (n - 1) / n, 'reduce_scatter': (n - 1) / n,
              'alltoall': (n - 1) / n, 'broadcast': 1.0, 'reduce': 1.0, 'sendrecv': 1.0}
    name = {'all_reduce': 'all_reduce_perf', 'all_gather': 'all_gather_perf',
            'reduce_scatter': 'reduce_scatter_perf', 'broadcast': 'broadcast_perf', 'reduce': 'reduce_perf',
            'alltoall': 'alltoall_perf', 'sendrecv': 'sendrecv_perf'}
    t0 = time.time()
    for c in colls:
        say(f'# {name[c]} (out of place), {n} ranks, int32')
        say('#       size         count      type   redop    root     time   algbw   busbw #wrong')
        say('#        (B)    (elements)                               (us)  (GB/s)  (GB/s)')
        last, tc = 0.0, time.time()
        for s in sizes(a.max_bytes):
            # --budget is the whole table's: each collective gets its share.
            share = a.budget / len(colls)
            go = torch.tensor([1 if time.time() - tc + 8 * last <= share else 0], device=dev)
            dist.broadcast(go, src=0)
            if not go.item():
                say(f'# sizes from {s} B up not run: the budget ({a.budget:.0f} s for the table) is spent')
                break
            t1 = time.time()
            op, wrong, nb, count = prepare(c, s)
            op()  # checked, untimed
            bad = wrong()
            t = time.time()
            op()
            torch.cuda.synchronize()
            one = max(time.time() - t, 1e-6)
            it = torch.tensor([max(1, min(200, int(a.point_time / one)))], device=dev)
            dist.all_reduce(it, op=dist.ReduceOp.MIN)  # every rank runs the same number
            iters = int(it.item())
            dist.barrier()
            torch.cuda.synchronize()
            t = time.time()
            for _ in range(iters):
                op()
            torch.cuda.synchronize()
            us = torch.tensor([(time.time() - t) / iters * 1e6], device=dev, dtype=torch.float64)
            dist.all_reduce(us, op=dist.ReduceOp.MAX)
            b = torch.tensor([bad], device=dev)
            dist.all_reduce(b)
            if int(b.item()):
                wrong_total += 1
            algbw = nb / 1e3 / float(us.item())  # bytes/us/1e3 = GB/s
            redop = 'sum' if c in ('all_reduce', 'reduce_scatter', 'reduce') else 'none'
            root = '0' if c in ('broadcast', 'reduce') else '-1'
            say(f'{nb:12d}  {count:12d}     int32  {redop:>6s}  {root:>6s}  {float(us.item()):9.1f}  '
                f'{algbw:6.2f}  {algbw * factor[c]:6.2f}  {int(b.item()):6d}')
            last = time.time() - t1
dist.destroy_process_group()
sys.exit(0 if wrong_total == 0 else 1)
