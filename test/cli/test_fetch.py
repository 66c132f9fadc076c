# SPDX-License-Identifier: GPL-3.0-or-later
"""nmbl-fetch, the helper a network boot reads its files with, against an
HTTP server of the test on 127.0.0.1: the file whole, or one sentence and
the exit status libnmbl reads (NMBL_FETCH_*), within the limits given."""

import http.server
import os
import subprocess
import tempfile
import threading
import time

BUILD = os.environ.get("NMBL_BUILD", "build")
FAILED, USAGE, NOT_FOUND = 1, 2, 3
DATA = bytes(range(256)) * 4096  # 1 MiB


class Server(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/file":
            self.send_response(200)
            self.send_header("Content-Length", str(len(DATA)))
            self.end_headers()
            self.wfile.write(DATA)
        elif self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/file")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/stops":
            self.send_response(200)
            self.send_header("Content-Length", str(len(DATA)))
            self.end_headers()
            self.wfile.write(DATA[:1000])
            self.wfile.flush()
            time.sleep(4)
        elif self.path == "/short":
            self.send_response(200)
            self.send_header("Content-Length", str(len(DATA)))
            self.end_headers()
            self.wfile.write(DATA[:1000])
        elif self.path == "/forbidden":
            self.send_error(403)
        else:
            self.send_error(404)


def serve():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Server)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def fetch(*args):
    """nmbl-fetch ARGS, its output into a file: (status, bytes, stderr)."""
    with tempfile.TemporaryFile() as out:
        p = subprocess.run([os.path.join(BUILD, "nmbl-fetch"), *args], stdout=out,
                           stderr=subprocess.PIPE, text=True, timeout=60)
        out.seek(0)
        return p.returncode, out.read(), p.stderr


def test_fetch_the_file_whole_or_one_sentence():
    server, base = serve()
    try:
        assert fetch(f"{base}/file") == (0, DATA, "")
        # Redirects within HTTP are followed.
        assert fetch(f"{base}/moved") == (0, DATA, "")
        status, _, said = fetch(f"{base}/nothing")
        assert (status, said) == (NOT_FOUND, f"{base}/nothing: the HTTP server has no such "
                                             "file (404)\n")
        status, _, said = fetch(f"{base}/forbidden")
        assert (status, said) == (FAILED, f"{base}/forbidden: the HTTP server answered 403\n")
        # Larger than allowed: refused, at most what is allowed kept.
        status, got, said = fetch("--max-size", "4096", f"{base}/file")
        assert (status, said) == (FAILED, f"{base}/file: larger than the 4096 bytes allowed\n")
        assert len(got) <= 4096
        # A server that stops sending, and one that closes early.
        start = time.monotonic()
        status, _, said = fetch("--stall", "1", f"{base}/stops")
        assert status == FAILED and time.monotonic() - start < 4, said
        assert said == f"{base}/stops: the server stopped sending for 1 s after 1000 bytes\n"
        status, _, said = fetch(f"{base}/short")
        assert (status, said) == (FAILED, f"{base}/short: the server stopped in the middle, "
                                          "after 1000 bytes\n")
    finally:
        server.shutdown()


def test_refuses_what_a_network_boot_must_not_read():
    server, base = serve()
    try:
        for url, said in (
                ("ftp://127.0.0.1/x", "only tftp://, http:// and https:// are read"),
                ("file:///etc/shadow", "only tftp://, http:// and https:// are read"),
                ("https://127.0.0.1:1/x", "no certificates to check an HTTPS server with")):
            status, got, err = fetch(url)
            assert status == FAILED and got == b"" and said in err, (url, err)
        # Nothing listens on port 1.
        status, _, err = fetch("http://127.0.0.1:1/x")
        assert (status, err) == (FAILED, "http://127.0.0.1:1/x: cannot connect to the server\n")
        # The file goes to a file, never a pipe or terminal; usage errors exit 2.
        p = subprocess.run([os.path.join(BUILD, "nmbl-fetch"), f"{base}/file"],
                           capture_output=True, text=True)
        assert p.returncode == USAGE and "standard output is not a file" in p.stderr, p
        for args in ((), ("--max-size", "-1", "x"), ("--timeout", "0", "x"), ("a", "b")):
            assert fetch(*args)[0] == USAGE, args
    finally:
        server.shutdown()
