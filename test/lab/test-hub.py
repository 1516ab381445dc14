#!/usr/bin/env python3
"""test-hub.py LAB_HUB - the hub topology's switch (bin/lab-hub) on the host, no guests.

Plays three QEMU stream clients over the hub's UNIX sockets and checks what a lab run
relies on: QEMU's framing (4-byte big-endian length, then the frame) passes unchanged;
a broadcast reaches every other port and not its sender; a frame to a learnt MAC
reaches that port only; a port freed by a disconnect takes a new guest; a broken
length makes the hub fail loudly (non-zero exit, a message); and the hub ends when its
parent does (no hub outlives a lab run).
"""
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HUB = sys.argv[1]
failures = []


def check(what, ok):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def frame(dst, src, payload):
    body = bytes.fromhex(dst.replace(":", "")) + bytes.fromhex(src.replace(":", "")) + b"\x08\x00" + payload
    return struct.pack(">I", len(body)) + body


def recv_frames(sock, count=0, wait=0.5):
    """The framed records (as frame bodies) that arrive within `wait` seconds, or
    within 10 s once `count` are expected (returning as soon as they are there)."""
    data, out = b"", []
    end = time.time() + (10 if count else wait)
    while not (count and len(out) >= count):
        left = end - time.time()
        if left <= 0 or not select.select([sock], [], [], left)[0]:
            break
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        data += chunk
        while len(data) >= 4 and len(data) >= 4 + struct.unpack(">I", data[:4])[0]:
            (n,) = struct.unpack(">I", data[:4])
            out.append(data[4:4 + n])
            data = data[4 + n:]
    return out


def start(tmp, n=3):
    paths = [os.path.join(tmp, "hub-%c.sock" % (97 + i)) for i in range(n)]
    hub = subprocess.Popen([HUB] + paths, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = hub.stdout.readline()
    check("the hub says it is ready: %r" % line.strip(), line.startswith("lab-hub: ready: %d ports" % n))
    return hub, paths


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s


MAC = ["52:54:00:00:00:0%c" % c for c in "abc"]
BCAST = "ff:ff:ff:ff:ff:ff"

with tempfile.TemporaryDirectory() as tmp:
    hub, paths = start(tmp)
    socks = [connect(p) for p in paths]
    time.sleep(0.3)

    # A broadcast from a (large, to cross several reads) reaches b and c, not a.
    big = bytes(range(256)) * 256
    socks[0].sendall(frame(BCAST, MAC[0], big))
    got = [recv_frames(socks[0]), recv_frames(socks[1], 1), recv_frames(socks[2], 1)]
    want = frame(BCAST, MAC[0], big)[4:]
    check("a broadcast from a reaches b intact", got[1] == [want])
    check("a broadcast from a reaches c intact", got[2] == [want])
    check("a broadcast from a does not come back to a", got[0] == [])

    # b's and c's MACs are learnt from their frames; then a unicast goes to one port.
    socks[1].sendall(frame(BCAST, MAC[1], b"hello from b"))
    socks[2].sendall(frame(BCAST, MAC[2], b"hello from c"))
    recv_frames(socks[0], 2)
    recv_frames(socks[1], 1)
    recv_frames(socks[2], 1)
    socks[0].sendall(frame(MAC[2], MAC[0], b"to c only") * 3)
    got = [recv_frames(socks[0]), recv_frames(socks[1]), recv_frames(socks[2], 3)]
    check("three frames to c's learnt MAC reach c, in order", len(got[2]) == 3 and got[2][0].endswith(b"to c only"))
    check("a frame to c's learnt MAC does not reach b", got[1] == [])

    # c goes away; its port takes a new guest, which gets the broadcasts again.
    socks[2].close()
    time.sleep(0.3)
    socks[2] = connect(paths[2])
    time.sleep(0.3)
    socks[0].sendall(frame(BCAST, MAC[0], b"after reconnect"))
    got = recv_frames(socks[2], 1)
    check("a guest that reconnects to a freed port gets frames", len(got) == 1 and got[0].endswith(b"after reconnect"))
    check("the hub is still running", hub.poll() is None)

    # A length QEMU never sends: the hub stops with an error, for lab to report.
    socks[1].sendall(struct.pack(">I", 1 << 30))
    try:
        rc = hub.wait(5)
    except subprocess.TimeoutExpired:
        rc = None
        hub.kill()
    err = hub.stderr.read()
    check("a broken frame length ends the hub with a non-zero status (got %r)" % rc, rc not in (None, 0))
    check("... and a message naming it: %r" % err.strip(), "frame length" in err)
    for s in socks:
        s.close()

    # The hub dies with its parent: a shell that starts it and is then killed.
    sh = subprocess.Popen(["bash", "-c", '"$0" "$@" > "$1.log" & echo $!; wait', HUB] + paths[:3],
                          stdout=subprocess.PIPE, text=True)
    hub_pid = int(sh.stdout.readline())
    time.sleep(0.5)
    alive_before = os.path.exists("/proc/%d" % hub_pid)
    sh.send_signal(signal.SIGKILL)
    sh.wait()
    for _ in range(50):
        try:
            with open("/proc/%d/stat" % hub_pid) as f:
                gone = f.read().split(") ")[1].startswith("Z")
        except FileNotFoundError:
            gone = True
        if gone:
            break
        time.sleep(0.1)
    check("the hub ran under its parent", alive_before)
    check("the hub ended when its parent was killed", gone)
    if not gone:
        os.kill(hub_pid, signal.SIGKILL)

if failures:
    print("test-hub: %d check(s) failed" % len(failures))
    sys.exit(1)
print("test-hub: the hub forwards, learns, takes reconnects, fails loudly and dies with its parent")
