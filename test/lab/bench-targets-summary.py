#!/usr/bin/env python3
"""bench-targets-summary.py - issue #16's targets from one bench-targets.sh run.

Reads the run's folder (the JSON of every mcpnet-bench pair, mcpnet-cpu-cost's output,
the packet counts, mcp-scale's output) and prints each target with its figure, its
spread and PASS or MISS, then writes targets.md there: the benchmark block, which
scripts/update-bench-readme puts between the markers of docs/benchmarking.md (all of it)
and of the README (the verdicts and the targets' table). Kept apart from the shell script
so the summary can be rerun on a finished run's folder:

    test/lab/bench-targets-summary.py build/lab/runs/targets/single [--ref NAME.so]
    test/lab/bench-targets-summary.py --blocks TARGETS.md STAMP README.md BENCHMARKING.md

(--ref: the reference plugin's file name, as callgrind names its object; by default
the one the run wrote into ref.txt.)
"""
import glob
import json
import os
import re
import statistics as st
import sys


def load(out, prefix):
    """(series, size) -> samples over all rounds, and per round, for files prefix_N.json."""
    acc, rounds = {}, []
    for f in sorted(glob.glob(f"{out}/{prefix}_*.json")):
        one = {}
        for r in json.load(open(f))["results"]:
            acc.setdefault((r["series"], r["size"]), []).extend(r["samples"])
            one[(r["series"], r["size"])] = r["samples"]
        rounds.append(one)
    return acc, rounds


def quartiles(out, prefix, size=8):
    """mcpnet-lat's round trips at size: the medians over all runs of their 25th and 75th
    percentiles (mcpnet-bench's round_trip_p25/p75), or None for runs without them."""
    p25, p75 = [], []
    for f in sorted(glob.glob(f"{out}/{prefix}_*.json")):
        for r in json.load(open(f))["results"]:
            if r["series"] == "mcpnet-lat" and r["size"] == size:
                p25 += r.get("round_trip_p25", [])
                p75 += r.get("round_trip_p75", [])
    return (st.median(p25), st.median(p75)) if p25 and p75 else None


def spread(v):
    m = st.median(v)
    return (max(v) - min(v)) / m * 100 if m else 0.0


def ratio_range(ra, ka, rb, kb):
    """Min and max over rounds of median(a)/median(b), a and b of the same round index."""
    rs = []
    for a, b in zip(ra, rb):
        if a.get(ka) and b.get(kb):
            rs.append(st.median(a[ka]) / st.median(b[kb]))
    return (min(rs), max(rs)) if rs else None


def rounds_text(rr):
    """The spread column's "rounds A-B; " for a ratio's range over rounds (empty without)."""
    return f"rounds {rr[0]:.2f}-{rr[1]:.2f}; " if rr else ""


def read(path):
    try:
        return open(path).read()
    except OSError:
        return ""


def scale_figures(text):
    """One mcp-scale run's figures: ok, open and close seconds, KiB per pair resident and
    of MemAvailable (None for what the run did not print)."""
    d = {"ok": "scale: ok" in text}
    for key, pat in (("open", r"opened \d+ pairs in ([\d.]+) s"), ("close", r"closed \d+ pairs in ([\d.]+) s"),
                     ("rss", r"memory after data: VmRSS ([-+\d.]+) KiB"),
                     ("avail", r"memory after data: .*MemAvailable ([-+\d.]+) KiB")):
        mm = re.search(pat, text)
        d[key] = float(mm.group(1)) if mm else None
    if d["avail"] is not None:
        d["avail"] = -d["avail"]  # printed as the change of MemAvailable: a drop is negative
    return d


def size_name(s):
    return f"{s // 1048576} MiB" if s >= 1048576 else f"{s // 1024} KiB" if s >= 1024 else f"{s} B"


def main():
    out = sys.argv[1]
    ref = sys.argv[sys.argv.index("--ref") + 1] if "--ref" in sys.argv else read(f"{out}/ref.txt").strip() or None
    rows = []  # (target, goal, figure, spread, verdict)
    md = []

    def target(name, goal, figure, spr, ok, unsure=False):
        verdict = "not measured" if ok is None else "PASS" if ok else "MISS"
        if ok is not None and unsure:  # the fresh process pairs disagree: the median decides, say so
            verdict += " (rounds on both sides)"
        rows.append((name, goal, figure, spr, verdict))

    # latency
    lat, lat_r = load(out, "lat")
    rlat, rlat_r = load(out, "reflat")
    sizes = sorted({s for (k, s) in lat if k == "mcpnet-lat"})
    lat_rows = []
    for s in sizes:
        m, w, r = lat.get(("mcpnet-lat", s), []), lat.get(("ib_write_lat", s), []), rlat.get(("mcpnet-lat", s), [])
        if not m:
            continue
        lat_rows.append((s, m, w, r))
    by = {s: (m, w, r) for (s, m, w, r) in lat_rows}
    if 8 in by:
        m, w, r = by[8]
        def lat_target(name, goal, other, other_runs, other_key):
            rr = ratio_range(lat_r, ("mcpnet-lat", 8), other_runs, other_key)
            q = st.median(m) / st.median(other)
            target(name, f"<= {goal:.2f}", f"{q:.2f} ({st.median(m):.1f} / {st.median(other):.1f} us)",
                   f"rounds {rr[0]:.2f}-{rr[1]:.2f}; samples {spread(m):.0f}% / {spread(other):.0f}%", q <= goal,
                   rr[0] <= goal < rr[1])

        if w:
            lat_target("latency 8 B / ib_write_lat", 1.30, w, lat_r, ("ib_write_lat", 8))
        if r:
            lat_target("latency 8 B / IB plugin", 0.60, r, rlat_r, ("mcpnet-lat", 8))
        else:
            target("latency 8 B / IB plugin", "<= 0.60", "-", "-", None)
    else:
        target("latency 8 B / ib_write_lat", "<= 1.30", "-", "-", None)
        target("latency 8 B / IB plugin", "<= 0.60", "-", "-", None)

    # bandwidth, plain and NCCL steps: the lowest median ratio from 16 KiB on
    bw_tab = {}
    for prefix, label in (("plain", "bandwidth / ib_write_bw, 16 KiB-4 MiB"),
                          ("steps", "bandwidth --nccl-steps / ib_write_bw")):
        a, a_r = load(out, prefix)
        worst = None
        for s in sorted({s for (k, s) in a if k == "mcpnet-bw"}):
            mb, wb = a.get(("mcpnet-bw", s), []), a.get(("ib_write_bw", s), [])
            if mb and wb:
                q = st.median(mb) / st.median(wb)
                bw_tab.setdefault(s, {})[prefix] = (st.median(mb), st.median(wb), q, spread(mb), spread(wb))
                if worst is None or q < worst[0]:
                    worst = (q, s, spread(mb), spread(wb))
        if worst:
            rr = ratio_range(a_r, ("mcpnet-bw", worst[1]), a_r, ("ib_write_bw", worst[1]))
            target(label, ">= 1.00 at every size", f"lowest {worst[0]:.2f} at {size_name(worst[1])}",
                   rounds_text(rr) + f"samples {worst[2]:.0f}% / {worst[3]:.0f}%", worst[0] >= 1.0,
                   rr is not None and rr[0] < 1.0 <= rr[1])
        else:
            target(label, ">= 1.00 at every size", "-", "-", None)
    c1, c1_r = load(out, "c1")
    c8, c8_r = load(out, "c8")
    conn = []
    for s in sorted({s for (k, s) in c1}):
        a, b = c1.get(("mcpnet-bw", s), []), c8.get(("mcpnet-bw", s), [])
        if a and b:
            conn.append((s, st.median(b) / st.median(a), spread(a), spread(b)))
    if conn:
        w = min(conn, key=lambda c: c[1])
        rr = ratio_range(c8_r, ("mcpnet-bw", w[0]), c1_r, ("mcpnet-bw", w[0]))
        target("8 connections / 1 (aggregate)", ">= 0.95", f"lowest {w[1]:.2f} at {size_name(w[0])}",
               rounds_text(rr) + f"samples {w[2]:.0f}% / {w[3]:.0f}%", w[1] >= 0.95,
               rr is not None and rr[0] < 0.95 <= rr[1])
    else:
        target("8 connections / 1 (aggregate)", ">= 0.95", "-", "-", None)

    # CPU
    def cpu(text, obj):
        tot = re.search(r"cpu-cost: (\d+) instructions per message", text)
        own = re.search(r"cpu-cost:\s+(\d+)\s+" + re.escape(obj), text) if obj else None
        return (int(tot.group(1)) if tot else None, int(own.group(1)) if own else None)

    mtot, mown = cpu(read(f"{out}/cpu_mcp.txt"), "libnccl-net-mcp.so")
    rtot, rown = cpu(read(f"{out}/cpu_ref.txt"), ref)
    target("instructions per message in the plugin", "<= 400", f"{mown} (all user space {mtot})" if mown else "-",
           "one callgrind run (deterministic)", None if mown is None else mown <= 400)
    target("instructions per message / IB plugin", "< 1.00",
           f"{mown / rown:.2f} ({mown} / {rown})" if mown and rown else "-", "one run each",
           None if not (mown and rown) else mown < rown)

    # scale
    scale = {}
    for f in glob.glob(f"{out}/scale_*_*.txt"):
        who, n = re.match(r".*/scale_(\w+?)_(\d+)\.txt$", f).groups()
        scale[(who, int(n))] = scale_figures(read(f))
    m1, r1 = scale.get(("mcp", 1024)), scale.get(("ref", 1024))
    if m1 and m1["rss"] is not None:
        target("resident KiB per pair at 1,024 pairs", "<= 180", f"{m1['rss']:.1f}", "one run", m1["rss"] <= 180)
    else:
        target("resident KiB per pair at 1,024 pairs", "<= 180", "-", "-", None)
    if m1 and r1 and m1["rss"] is not None and r1["rss"]:
        target("resident per pair / IB plugin", "<= 0.50", f"{m1['rss'] / r1['rss']:.2f} ({r1['rss']:.1f} KiB)",
               "one run each", m1["rss"] / r1["rss"] <= 0.5)
    else:
        target("resident per pair / IB plugin", "<= 0.50", "-", "-", None)
    # close: round 1 is the scale run, rounds 2.. are close_WHO_1024_R.txt, alternating
    def closes(who, first):
        v = {1: first["close"]} if first else {}
        for f in glob.glob(f"{out}/close_{who}_1024_*.txt"):
            v[int(re.search(r"_(\d+)\.txt$", f).group(1))] = scale_figures(read(f))["close"]
        return v

    cm, cr = closes("mcp", m1), closes("ref", r1)
    both = [(cm[k], cr[k]) for k in sorted(cm) if cm[k] and cr.get(k)]
    # the rounds in order, for the printout and targets.md
    close_rounds = ("mcpnet " + ", ".join(f"{x:.2f}" for x, _ in both) + " s; IB plugin "
                    + ", ".join(f"{y:.2f}" for _, y in both) + " s")
    if both:
        a, b = st.median([x for x, _ in both]), st.median([y for _, y in both])
        qs = [x / y for x, y in both]
        target("close 1,024 pairs / IB plugin", "<= 1.00", f"{a / b:.2f} ({a:.2f} / {b:.2f} s)",
               f"rounds {min(qs):.2f}-{max(qs):.2f}; {len(both)} runs each" if len(both) > 1 else "one run each",
               a <= b, min(qs) <= 1.0 < max(qs))
    else:
        target("close 1,024 pairs / IB plugin", "<= 1.00", f"{m1['close']} s / -" if m1 else "-", "-", None)

    # many idle comms + one busy (mcp-scale --busy-turns): the busy pair's rate in a process
    # with 1,024 pairs open against one with that pair alone, the two in turns, and its
    # instructions per message among them and alone (callgrind, one process)
    busy = read(f"{out}/busy.txt")
    # The i-th round among all and the i-th alone ran one right after the other, so a slow
    # spell of the guest mostly falls on both: a process pair's ratio is the median of
    # its rounds' ratios. With several pairs the figure is the median of theirs, and the
    # spread gives their range and that of the single rounds' ratios.
    turns = re.findall(r"scale: busy: \d+ verified messages per round, in turns with (\d+) pairs? open; "
                       r"msg/s per round:([\d. ]+)", busy)
    pairs = [(list(map(float, a[1].split())), list(map(float, b[1].split())))
             for a, b in zip(turns, turns[1:]) if int(a[0]) > 1 and int(b[0]) == 1]
    mi = re.search(r"scale: busy: instructions for (\d+) messages: (\d+) alone, (\d+) among", busy)
    if pairs and mi:
        rates = [st.median([x / y for x, y in zip(a, b)]) for a, b in pairs]
        singles = [x / y for a, b in pairs for x, y in zip(a, b)]
        rate, n = st.median(rates), int(mi.group(1))
        # one pair: its single rounds say how sure its verdict is
        pr = (min(rates), max(rates)) if len(rates) > 1 else (min(singles), max(singles))
        alone, among = int(mi.group(2)) / n, int(mi.group(3)) / n
        procs = f"{len(rates)} process pairs {pr[0]:.2f}-{pr[1]:.2f}; " if len(rates) > 1 else ""
        target("1,024 idle + 1 busy / 1 comm", "rate >= 0.90, instr <= 1.10",
               f"rate {rate:.2f}, instr {among / alone:.3f} ({among:.0f} / {alone:.0f})",
               f"{procs}{rounds_text((min(singles), max(singles)))}instructions: one run each",
               rate >= 0.9 and among / alone <= 1.1, unsure=among / alone <= 1.1 and pr[0] < 0.9 <= pr[1])
    else:
        target("1,024 idle + 1 busy / 1 comm", "within 10%", "-", "-", None)

    # packets per message, and what follows for WRs and completions
    pk = {}
    for line in read(f"{out}/packets.txt").splitlines():
        mm = re.match(r"packets: (\w+) (-?\d+) for (\d+) messages, (-?\d+) for (\d+)", line)
        if mm:
            who, a, na, b, nb = mm.groups()
            pk[who] = (int(b) - int(a)) / (int(nb) - int(na))
    derived = {  # per one-way 8-byte message, receives posted ahead: from each one's protocol
        "mcpnet": "1 landing RDMA WRITE (data and trailer, inline, signalled) + 1 CTS write "
                  "(one per receive) send WRs, no receive WR; no receive completion (the receiver "
                  "watches the landing line), 1 send completion, "
                  "CTS 1 in 16 signalled",
        "ref": "1 data WRITE_WITH_IMM + 1 CTS write send WRs, 1 receive WR; "
               "1 send + 1 receive completion, CTS writes signalled now and then",
        "perftest": "1 RDMA WRITE, no receive WR; 1 send completion (the receiver polls memory)",
    }
    names = {"mcpnet": "mcpnet", "ref": "IB plugin", "perftest": "ib_write_lat"}

    # print
    lines = ["## issue #16 targets (one boot; medians; spread = (max - min) / median)"]
    lines.append(f"{'target':44} {'goal':24} {'figure':34} {'spread':36} verdict")
    for r in rows:
        lines.append(f"{r[0]:44} {r[1]:24} {r[2]:34} {r[3]:36} {r[4]}")
    lines.append("## latency (us, one-way, medians)")
    for s, m, w, r in lat_rows:
        lines.append(f"{size_name(s):>8} mcpnet {st.median(m):8.1f} ({spread(m):.0f}%)"
                     + (f"  ib_write_lat {st.median(w):8.1f} ({spread(w):.0f}%) x{st.median(m) / st.median(w):.2f}" if w else "")
                     + (f"  IB plugin {st.median(r):8.1f} ({spread(r):.0f}%) x{st.median(m) / st.median(r):.2f}" if r else ""))
    quart = [(who, q) for who, q in (("mcpnet", quartiles(out, "lat")), ("IB plugin", quartiles(out, "reflat"))) if q]
    if quart:
        lines.append("8 B round trips, one-way us, quartiles (medians over runs): "
                     + "; ".join(f"{who} p25 {q[0]:.1f}, p75 {q[1]:.1f}" for who, q in quart))
    lines.append("## scale (mcp-scale, one run each)")
    for (who, n), d in sorted(scale.items(), key=lambda x: (x[0][1], x[0][0])):
        lines.append(f"{names.get(who if who != 'mcp' else 'mcpnet', who):10} {n:5} pairs: open {d['open']} s, close "
                     f"{d['close']} s, VmRSS {d['rss']} KiB/pair, MemAvailable {d['avail']} KiB/pair"
                     + ("" if d["ok"] else "  (FAILED: see scale_*.txt)"))
    if len(both) > 1:
        lines.append(f"close 1,024 pairs by round: {close_rounds}")
    lines.append("## packets per one-way 8 B message (rxe sent_pkts; WRs and completions derived, not counted)")
    for who in ("mcpnet", "ref", "perftest"):
        if who in pk:
            lines.append(f"{names[who]:12} {pk[who]:.2f} packets; {derived[who]}")
    print("\n".join(lines))

    # the README block
    for verdict, say in (("PASS", "Hold"), ("MISS", "Missed"), ("not measured", "Not measured")):
        names_v = [r[0] + (" (unsure)" if r[4] != verdict else "") for r in rows if r[4].startswith(verdict)]
        if names_v:
            md.append(f"{say} ({len(names_v)} of {len(rows)}): " + "; ".join(names_v) + ".")
    md.append("")
    md.append("| target | goal | figure | spread | holds |")
    md.append("|---|---|---|---|---|")
    for r in rows:
        md.append(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} |")
    md.append("")
    md.append("| size | mcpnet µs | ib_write_lat µs | IB plugin µs | mcpnet / ib_write_lat | mcpnet / IB plugin |")
    md.append("|---:|---:|---:|---:|---:|---:|")
    for s, m, w, r in lat_rows:
        md.append(f"| {size_name(s)} | {st.median(m):.1f} | {st.median(w):.1f} | "
                  + (f"{st.median(r):.1f}" if r else "-") + f" | {st.median(m) / st.median(w):.2f} | "
                  + (f"{st.median(m) / st.median(r):.2f}" if r else "-") + " |")
    if quart:
        md.append("")
        md.append("8 B round trips, one-way, each quartile the median over runs: "
                  + "; ".join(f"{who} 25% within {q[0]:.1f} µs, 75% within {q[1]:.1f}" for who, q in quart) + ".")
    if bw_tab:
        md.append("")
        md.append("| size | mcpnet MB/s | ib_write_bw MB/s | ratio | `--nccl-steps` ratio |")
        md.append("|---:|---:|---:|---:|---:|")
        for s in sorted(bw_tab):
            p, q = bw_tab[s].get("plain"), bw_tab[s].get("steps")
            md.append(f"| {size_name(s)} | " + (f"{p[0]:.1f} | {p[1]:.1f} | {p[2]:.2f}" if p else "- | - | -")
                      + " | " + (f"{q[2]:.2f}" if q else "-") + " |")
    if scale:
        md.append("")
        md.append("| pairs | plugin | open s | close s | VmRSS KiB/pair | MemAvailable KiB/pair |")
        md.append("|---:|---|---:|---:|---:|---:|")
        for (who, n), d in sorted(scale.items(), key=lambda x: (x[0][1], x[0][0])):
            f = lambda v: "-" if v is None else f"{v:.2f}" if v < 100 else f"{v:.0f}"
            md.append(f"| {n} | {'mcpnet' if who == 'mcp' else 'IB plugin'} | {f(d['open'])} | {f(d['close'])} | "
                      f"{f(d['rss'])} | {f(d['avail'])} |" + ("" if d["ok"] else " failed"))
        if len(both) > 1:
            md.append("")
            md.append(f"Close of 1,024 pairs in {len(both)} alternating rounds (the table's is the first): "
                      f"{close_rounds}.")
    if pk:
        md.append("")
        md.append("| per one-way 8 B message | packets (counted) | WRs and completions (from the protocol) |")
        md.append("|---|---:|---|")
        for who in ("mcpnet", "ref", "perftest"):
            if who in pk:
                md.append(f"| {names[who]} | {pk[who]:.2f} | {derived[who]} |")
    with open(os.path.join(out, "targets.md"), "w") as f:
        f.write("\n".join(md) + "\n")


BEGIN, END = "<!-- bench-targets:begin -->", "<!-- bench-targets:end -->"


def write_blocks(targets, stamp, readme, doc):
    """A run's targets.md between the bench-targets markers of two files: the README gets
    the verdicts and the targets' table (what a user reads), docs/benchmarking.md all of
    it (every table), each under the same stamp. scripts/update-bench-readme calls this."""
    text = open(targets).read().rstrip("\n")
    short = text.split("\n| size ", 1)[0].rstrip("\n")
    for path, block in ((readme, short), (doc, text)):
        body = open(path).read()
        if BEGIN not in body or END not in body:
            sys.exit(f"bench-targets-summary: {path} has no {BEGIN} ... {END} block")
        head, rest = body.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        with open(path, "w") as f:
            f.write(head + BEGIN + "\n" + stamp + "\n\n" + block + "\n" + END + tail)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--blocks"]:
        write_blocks(*sys.argv[2:6])
    else:
        main()
