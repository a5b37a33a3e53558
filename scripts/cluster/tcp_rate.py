#!/usr/bin/env python3
"""One TCP copy between two nodes of the cluster in a box (scripts/cluster/box.sh rate).

  tcp_rate.py receive ADDR PORT     listen on ADDR:PORT, take one connection, read it to the end,
                                    print "MB/s SECONDS" (from the first byte to the last)
  tcp_rate.py send ADDR PORT MB     connect (retrying for 5 s) and send MB MiB, then close

No iperf on the machines this runs on; a plain copy is what a checkpoint or a collective's bytes see.
"""
import socket
import sys
import time

CHUNK = 1 << 16


def receive(addr, port):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((addr, port))
    srv.listen(1)
    print("listening", flush=True)
    srv.settimeout(30)
    conn, _ = srv.accept()
    conn.settimeout(120)
    total, first = 0, None
    while True:
        data = conn.recv(CHUNK)
        if not data:
            break
        if first is None:
            first = time.monotonic()
        total += len(data)
    seconds = time.monotonic() - (first or time.monotonic())
    print(f"{total / 2**20 / max(seconds, 1e-9):.2f} {seconds:.3f}")


def send(addr, port, mb):
    deadline = time.monotonic() + 5
    while True:
        try:
            sock = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    block = b"\0" * CHUNK
    for _ in range(mb * 2**20 // CHUNK):
        sock.sendall(block)
    sock.close()


def main(argv):
    if len(argv) == 3 and argv[0] == "receive":
        receive(argv[1], int(argv[2]))
    elif len(argv) == 4 and argv[0] == "send":
        send(argv[1], int(argv[2]), int(argv[3]))
    else:
        sys.exit("usage: tcp_rate.py receive ADDR PORT | send ADDR PORT MB")


if __name__ == "__main__":
    main(sys.argv[1:])
