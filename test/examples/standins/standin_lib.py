"""standin_lib.py - what the stand-ins of test/examples/standins share: the record each
writes to $STANDIN_LOG (one JSON object per line) and Slurm's host list expansion."""
import json
import os
import re
import sys


def record(tool, **fields):
    path = os.environ.get("STANDIN_LOG")
    if not path:
        sys.exit(f"stand-in {tool}: STANDIN_LOG is not set (run through test/check-examples.py)")
    with open(path, "a") as f:
        f.write(json.dumps(dict(tool=tool, **fields)) + "\n")


def refuse(tool, why):
    record(tool, refused=why, argv=sys.argv[1:])
    sys.exit(f"stand-in {tool}: {why}")


def expand_hostlist(text):
    """Slurm's compressed host list: gpu[01-03,07],login1 -> gpu01 gpu02 gpu03 gpu07 login1."""
    hosts = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^\]]+)\])?([^,]*)", text):
        prefix, ranges, suffix = m.group(1), m.group(2), m.group(3)
        if ranges is None:
            hosts.append(prefix + suffix)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            hi = hi or lo
            width = len(lo)
            for i in range(int(lo), int(hi) + 1):
                hosts.append(f"{prefix}{i:0{width}d}{suffix}")
    return [h for h in hosts if h]
