#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""relay.py PORT: what QEMU's user network runs for each connection the
guest makes to a guestfwd address (guestfwd=tcp:ADDR:PORT-cmd:...): the
connection on standard input and output, relayed to a server of the test
on 127.0.0.1:PORT.  Only this machine's loopback is ever connected to."""

import os
import select
import socket
import sys


def main():
    server = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    guest_open = True
    while True:
        ready, _, _ = select.select([0, server] if guest_open else [server], [], [])
        if 0 in ready:
            data = os.read(0, 65536)
            if data:
                server.sendall(data)
            else:
                guest_open = False
                server.shutdown(socket.SHUT_WR)
        if server in ready:
            data = server.recv(65536)
            if not data:
                return
            os.write(1, data)


if __name__ == "__main__":
    main()
