# SPDX-License-Identifier: GPL-3.0-or-later
"""Ask nmbl's grub-emu what a disk's grub.cfg makes of it, without booting:
the menus it would show and what the chosen entry would boot.

grub-emu runs without --kexec and with the GRUB variable nmbl_list set
(grub-emu-patches/0010): it prints each menu as lines of fields, boots
the entry the menu would boot after its timeout (the files are checked
through GRUB's own file systems, nothing is mounted) and exits.  Strings in
those lines are quoted as a shell quotes them: GRUB's terminal turns tabs
into spaces.  It starts
from nmbl's own first grub.cfg, as in the UKI, with the disk as (hd0).

    import menu; result = menu.run("disk.img", request="id")
"""

import fcntl
import os
import pty
import re
import select
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import time

BUILD = os.environ.get("NMBL_BUILD", "build")
TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BOOTSTRAP = os.path.abspath(os.path.join(TOP, "dracut", "modules.d", "97nmbl", "grub.cfg"))
sys.path.insert(0, os.path.join(TOP, "test", "vm"))
import mkdisk  # noqa: E402

ANSI = re.compile(r"\x1b\[[0-9;?=]*[A-Za-z]|\x1b[()][A-Za-z0-9]|\x1b[=>]")


class Result:
    """MENUS: each menu shown, outermost first, as a dict with "entries"
    ([kind, id, title, classes, users] each), "default" (index) and
    "timeout" ([seconds, style]).  KERNEL, INITRDS, CMDLINE: what the entry
    would boot (None when nothing was); CHAINLOADER: the EFI program it
    would have the firmware start.  ERRORS: GRUB's "error: ..." lines.
    OUTPUT: everything grub-emu printed, cleaned."""

    def __init__(self, output):
        self.output = output
        self.menus = []
        self.kernel = self.cmdline = self.chainloader = None
        self.initrds = []
        self.errors = []
        menu = None
        for line in output.splitlines():
            # GRUB's progress lines for the files it read end without a
            # newline: a listing line may follow one on the same line.
            listing = re.search(r"nmbl-(menu|default|timeout) .*", line)
            if listing:
                fields = shlex.split(listing.group(0))
                if fields[0] == "nmbl-menu":
                    if menu is None:
                        menu = {"entries": []}
                        self.menus.append(menu)
                    menu["entries"].append(fields[2:7])
                elif fields[0] == "nmbl-default" and menu is not None:
                    menu["default"] = int(fields[1])
                elif fields[0] == "nmbl-timeout" and menu is not None:
                    menu["timeout"] = [int(fields[1]), fields[2]]
                    menu = None
            elif line.startswith("kernel "):
                self.kernel = line[len("kernel "):]
            elif line.startswith("initrd "):
                self.initrds.append(line[len("initrd "):])
            elif line.startswith("cmdline "):
                self.cmdline = line[len("cmdline "):]
            elif line.startswith("chainloader "):
                self.chainloader = line[len("chainloader "):]
            else:
                # Errors too may follow a progress line.
                error = re.search(r"error: (.*)", line)
                if error and "--kexec" not in line:
                    self.errors.append(error.group(1))

    def titles(self, level=0):
        return [e[2] for e in self.menus[level]["entries"]]

    def ids(self, level=0):
        return [e[1] for e in self.menus[level]["entries"]]

    def default_id(self, level=0):
        menu = self.menus[level]
        return menu["entries"][menu["default"]][1]


def variant(case, name):
    """A copy of CASE, to change before making a disk of it, as a tool or a
    person would change the installed files; returns its directory."""
    here = os.path.dirname(os.path.abspath(__file__))
    copy = os.path.join(BUILD, "test", "grub-cfg-src", name)
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(os.path.join(here, case), copy)
    return copy


def edit(path, old, new):
    """Replace OLD, which must be there, by NEW in the file PATH."""
    with open(path) as f:
        text = f.read()
    assert old in text, (path, old)
    with open(path, "w") as f:
        f.write(text.replace(old, new))


def disk(case, name, **layout):
    """A fresh disk image of CASE (a directory of test/grub-cfg/ holding the
    esp/, boot/ and root/ trees the distribution writes), named NAME below
    the build directory; LAYOUT goes to mkdisk.build (UUIDs and the like).
    Returns (path, layout).  Fresh each time: a run may write grubenv."""
    here = os.path.dirname(os.path.abspath(__file__))
    top = os.path.join(BUILD, "test", "grub-cfg", name)
    shutil.rmtree(top, ignore_errors=True)
    os.makedirs(top)
    path = os.path.join(top, "disk.img")
    trees = {role: os.path.join(here, case, role) for role in ("esp", "boot", "root")
             if os.path.isdir(os.path.join(here, case, role))}
    return path, mkdisk.build(path, **trees, **layout)


def _partition(path, layout, role):
    """Partition ROLE of image PATH copied to a file of its own, for
    debugfs; returns (that file, the partition's layout)."""
    part = next(p for p in layout["partitions"] if p["role"] == role)
    fs = f"{path}.{role}"
    with open(path, "rb") as src, open(fs, "wb") as dst:
        src.seek(part["start"])
        dst.write(src.read(part["size"]))
    return fs, part


def _dump(fs, file):
    out = fs + ".grubenv"
    subprocess.run(["debugfs", "-R", f"dump {file} {out}", fs], check=True, capture_output=True)
    return out


def grubenv(path, layout, role, file):
    """FILE (e.g. /grub2/grubenv) on ext4 partition ROLE of image PATH, as
    grub-editenv lists it."""
    fs, _ = _partition(path, layout, role)
    out = subprocess.run(["grub-editenv", _dump(fs, file), "list"], check=True,
                         capture_output=True, text=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines())


def set_grubenv(path, layout, role, file, **values):
    """grub-editenv FILE set NAME=VALUE..., on the disk image: the new
    block goes where the file's block is, as GRUB itself writes it."""
    fs, part = _partition(path, layout, role)
    env = _dump(fs, file)
    subprocess.run(["grub-editenv", env, "set"] + [f"{k}={v}" for k, v in values.items()],
                   check=True)
    blocks = subprocess.run(["debugfs", "-R", f"blocks {file}", fs], check=True,
                            capture_output=True, text=True).stdout.split()
    with open(env, "rb") as f:
        data = f.read()
    assert len(data) == 1024 and len(blocks) == 1, (len(data), blocks)
    with open(path, "r+b") as f:
        f.seek(part["start"] + int(blocks[0]) * 4096)  # mkdisk's block size
        f.write(data)


def grub_emu():
    return os.path.join(BUILD, "grub-emu")


def run(image, request=None, timeout=60):
    """List IMAGE's menu and boot its default entry, or the entry REQUEST
    names (as LoaderEntryOneShot would: an id, a glob, "id>id")."""
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "device.map"), "w") as f:
            f.write(f"(hd0) {os.path.abspath(image)}\n")
        with open(os.path.join(tmp, "grub.cfg"), "w") as f:
            f.write("set nmbl_list=1\nexport nmbl_list\n")
            if request:
                f.write(f"set nmbl_entry_oneshot='{request}'\nexport nmbl_entry_oneshot\n")
            f.write(f"source {BOOTSTRAP}\n")
        # A terminal as wide as any line: GRUB wraps at the terminal's width.
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 100, 4000, 0, 0))
        proc = subprocess.Popen(
            [grub_emu(), "--root=host", f"--directory={tmp}",
             f"--device-map={os.path.join(tmp, 'device.map')}"],
            stdin=slave, stdout=slave, stderr=slave, close_fds=True, env={"TERM": "dumb"})
        os.close(slave)
        out = bytearray()
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"grub-emu still running after {timeout} s:\n"
                                       + out.decode(errors="replace")[-3000:])
                ready, _, _ = select.select([master], [], [], left)
                if not ready:
                    continue
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the other side is closed
                    break
                if not chunk:
                    break
                out += chunk
        finally:
            proc.kill()
            proc.wait()
            os.close(master)
    text = ANSI.sub("", out.decode(errors="replace")).replace("\r", "")
    return Result(text)
