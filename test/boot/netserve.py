# SPDX-License-Identifier: GPL-3.0-or-later
"""What a network boot's machine is served with, for the tests and the
benchmark: QEMU's user network (restrict=on: no packet leaves the VM
process), its TFTP server, and an HTTP(S) server of the test's on
127.0.0.1 that the machine reaches at 10.0.2.100 through guestfwd."""

import http.server
import os
import ssl
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MAC = "52:54:00:12:34:56"
HTTP = "10.0.2.100"
# Bytes the stalling server sends before it stops sending.
STALL_AFTER = 300 * 1024


class Files(http.server.BaseHTTPRequestHandler):
    """The test's HTTP server: the files of its directory; /slow/NAME sends
    NAME a little at a time, /stops/NAME sends its start and then nothing."""

    root = None
    requests = []

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        """The firmware asks the size of what it HTTP-boots first."""
        path = os.path.join(self.root, self.path.lstrip("/"))
        if not os.path.isfile(path):
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(os.path.getsize(path)))
        self.end_headers()

    def do_GET(self):
        Files.requests.append(self.path)
        mode, _, name = self.path.lstrip("/").partition("/")
        if mode not in ("slow", "stops"):
            mode, name = "whole", self.path.lstrip("/")
        path = os.path.join(self.root, name if mode == "whole" else os.path.basename(name))
        if not os.path.isfile(path):
            self.send_error(404)
            return
        with open(path, "rb") as f:
            data = f.read()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if mode == "whole":
            self.wfile.write(data)
        elif mode == "slow":
            for at in range(0, len(data), 16 * 1024):
                self.wfile.write(data[at:at + 16 * 1024])
                self.wfile.flush()
                time.sleep(0.5)
        else:
            self.wfile.write(data[:STALL_AFTER])
            self.wfile.flush()
            # Held open, silent, until the client gives up.
            self.connection.settimeout(120)
            try:
                self.connection.recv(1)
            except OSError:
                pass


def http_server(www, tls=None):
    """The test's HTTP server on 127.0.0.1 (HTTPS with TLS, a certificate
    and key file), serving WWW."""
    Files.root = www
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Files)
    server.daemon_threads = True
    if tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def forwards(ports):
    """A user network's options that map each port of 10.0.2.100 in PORTS
    to a server of the test's on 127.0.0.1 (relay.py)."""
    return "".join(f",guestfwd=tcp:{HTTP}:{guest}-cmd:{sys.executable} "
                   f"{os.path.join(HERE, 'relay.py')} {port}"
                   for guest, port in ports.items())


def net_args(ports, tftp=None, bootfile="nmbl/nmbl-net.efi"):
    """QEMU's arguments for a machine that boots from its network card
    (first in the boot order), on QEMU's own network with restrict=on:
    its TFTP server serves TFTP when given, and PORTS maps a port of
    10.0.2.100 (HTTP) to a server of the test's on 127.0.0.1 (relay.py).
    A URL for BOOTFILE makes the firmware HTTP-boot (its PXE options off,
    so that no PXE attempt fails first: a minute each under TCG)."""
    netdev = f"user,id=n0,restrict=on,bootfile={bootfile}{forwards(ports)}"
    firmware = []
    if tftp:
        netdev += f",tftp={tftp}"
    else:
        firmware = ["-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=no",
                    "-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=no"]
    return ["-netdev", netdev, *firmware,
            "-device", f"virtio-net-pci,netdev=n0,mac={MAC},romfile=,bootindex=0"]
