# SPDX-License-Identifier: GPL-3.0-or-later
"""Make and run nmbl VMs the way a libvirt user does: virt-install, virsh.

    with Libvirt(), virt_install("nmbl-try", "disk.img",
                                 nvram_template=SNAKEOIL_VARS,
                                 serial_log="build/try.log") as dom:
        dom.wait_for(r"NMBL-TARGET-UP")

The disk is never written: the domain runs on a qcow2 overlay made next to
the serial log and deleted with the domain.  See README.md next to this file.
"""

import codecs
import grp
import os
import pwd
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "vm"))

from vm import FIRMWARE, OVMF_DIR, AnsiStripper  # noqa: E402

URI = "qemu:///system"
DEFAULT_TIMEOUT = 300  # seconds; a boot under TCG takes about a minute

# Debian's test-key firmware: the key nmbl's test builds are signed with is
# enrolled in this variable store (see README.md for why not firmware=efi).
SNAKEOIL_CODE, SNAKEOIL_VARS = (os.path.join(OVMF_DIR, f) for f in FIRMWARE[True])

# Started by hand without systemd; each writes its PID here when run as root.
DAEMONS = (("virtlogd", "/run/virtlogd.pid"), ("libvirtd", "/run/libvirtd.pid"))
QEMU_USER = "libvirt-qemu"  # Debian's build of libvirt runs QEMU as this user
QEMU_LOG_DIR = "/var/log/libvirt/qemu"  # QEMU's own stderr, one file per domain

# virsh domstate: a domain in one of these has no QEMU process any more.
STOPPED = ("shut off", "crashed")


class VirtError(Exception):
    pass


def virsh(*args, check=True):
    """Run virsh on the system connection; its output, or VirtError."""
    p = subprocess.run(["virsh", "--connect", URI, *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise VirtError(f"virsh {' '.join(args)}: {p.stderr.strip() or p.stdout.strip()}")
    return p


def defined():
    """Names of all domains, running or not."""
    return virsh("list", "--all", "--name").stdout.split()


def _alive(pid, name):
    """True if PID is a running (not zombie) process called NAME."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    comm, state = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2]
    return comm == name and state != "Z"


def _pid_from(pidfile, name):
    """The PID in PIDFILE if that process is NAME and running, else None."""
    try:
        with open(pidfile) as f:
            pid = int(f.read().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if _alive(pid, name) else None


def _wait(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise VirtError(f"{what} after {timeout} s")
        time.sleep(0.1)


def _prepare_host():
    """What libvirt-daemon-system and systemd would have made (see the README)."""
    os.makedirs(QEMU_LOG_DIR, exist_ok=True)  # virtlogd exits 1 without its log dir
    for group in ("libvirt", QEMU_USER):
        if subprocess.run(["getent", "group", group], capture_output=True).returncode:
            subprocess.run(["groupadd", "--system", group], check=True)
    if subprocess.run(["getent", "passwd", QEMU_USER], capture_output=True).returncode:
        subprocess.run(["useradd", "--system", "--gid", QEMU_USER, "--no-create-home",
                        "--home-dir", "/var/lib/libvirt", "--shell", "/usr/sbin/nologin",
                        QEMU_USER], check=True)
    # As Debian's package has it.  Where /dev/kvm exists but is closed to
    # QEMU_USER, libvirtd's QEMU probe finds KVM and its next look at the
    # cache says KVM is gone: it probes QEMU anew, 2 s each, some 100 times
    # while starting one domain: virt-install took 4 minutes, not 1 s.
    try:
        kvm = grp.getgrnam("kvm")
    except KeyError:
        return
    if QEMU_USER not in kvm.gr_mem and pwd.getpwnam(QEMU_USER).pw_gid != kvm.gr_gid:
        subprocess.run(["usermod", "--append", "--groups", "kvm", QEMU_USER], check=True)


class Libvirt:
    """A libvirtd to talk to: the one running, or one started here and
    stopped again (by PID) when the with-block ends.  start() alone leaves
    the daemons running."""

    def __init__(self, timeout=60):
        self.timeout = timeout
        self.started = []  # (name, pid) of the daemons this object started

    @staticmethod
    def answers():
        return virsh("version", check=False).returncode == 0

    def start(self):
        if self.answers():
            return self
        _prepare_host()
        try:
            for name, pidfile in DAEMONS:
                if _pid_from(pidfile, name):
                    continue  # someone else's: use it, leave it alone
                p = subprocess.run([name, "-d"], capture_output=True, text=True)
                if p.returncode != 0:
                    raise VirtError(f"{name} -d exited {p.returncode}: {p.stderr.strip()}")
                _wait(lambda: _pid_from(pidfile, name), self.timeout,
                      f"{name} wrote no PID to {pidfile}")
                self.started.append((name, _pid_from(pidfile, name)))
            _wait(self.answers, self.timeout, f"libvirtd does not answer on {URI}")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        """End the daemons start() started, libvirtd first; raise if one stays."""
        for name, pid in reversed(self.started):
            if _alive(pid, name):
                os.kill(pid, signal.SIGTERM)
            try:
                _wait(lambda: not _alive(pid, name), self.timeout, f"{name} {pid} still runs")
            except VirtError:
                os.kill(pid, signal.SIGKILL)
                _wait(lambda: not _alive(pid, name), 10, f"{name} {pid} survives SIGKILL")

    def still_running(self):
        """Those of the daemons start() started that run."""
        return [(name, pid) for name, pid in self.started if _alive(pid, name)]

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class Domain:
    """A domain virt_install() made; the with-block destroys and undefines it."""

    def __init__(self, name, serial_log, overlay):
        self.name = name
        self.serial_log = serial_log  # None: the serial console is a pty (virsh console)
        self.overlay = overlay
        self._read = 0  # bytes of serial_log decoded so far
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._text = ""
        self._stripper = AnsiStripper()
        self._cursor = 0  # where the next wait_for starts in clean_log()

    def state(self):
        """virsh domstate: "running", "shut off", ..."""
        return virsh("domstate", self.name).stdout.strip()

    def dominfo(self):
        return virsh("dominfo", self.name).stdout

    def log(self):
        """The serial console so far, escapes kept."""
        if self.serial_log is None:
            raise VirtError(f"{self.name}'s console is a pty: use virsh console")
        try:
            with open(self.serial_log, "rb") as f:
                f.seek(self._read)
                data = f.read()
        except FileNotFoundError:
            data = b""
        self._read += len(data)
        self._text += self._decoder.decode(data)
        return self._text

    def clean_log(self):
        """log() without escape sequences, see vm.strip_ansi()."""
        return self._stripper(self.log())

    def tail(self, n=2000):
        text = re.sub(r"[ \t]+\n", "\n", self.clean_log().rstrip())
        tail = re.sub(r"\n{3,}", "\n\n", text)[-n:]
        msg = f"--- last {len(tail)} chars of {self.serial_log} (escapes stripped) ---\n{tail}"
        try:
            with open(os.path.join(QEMU_LOG_DIR, f"{self.name}.log"), errors="replace") as f:
                # QEMU's messages, without the command lines libvirt logs.
                lines = [line for line in f if not re.match(r"-|.*\\$", line)]
            msg += f"\n--- {f.name} ---\n" + "".join(lines[-10:]).rstrip()
        except FileNotFoundError:
            pass
        return msg

    def wait_for(self, pattern, timeout=DEFAULT_TIMEOUT):
        """Wait until the regex PATTERN matches the console (escapes stripped),
        after where the previous wait_for matched; return the re.Match.
        Raises VirtError with the console's tail on timeout, or as soon as the
        domain stopped without the pattern having appeared."""
        rx = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            # State first: output written before it stopped is then read below.
            state = self.state()
            m = rx.search(self.clean_log(), self._cursor)
            if m:
                self._cursor = m.end()
                return m
            if state in STOPPED:
                raise VirtError(f"{self.name} is {state}; {rx.pattern!r} did not appear\n"
                                f"{self.tail()}")
            if time.monotonic() > deadline:
                raise VirtError(f"{rx.pattern!r} did not appear within {timeout} s\n"
                                f"{self.tail()}")
            time.sleep(0.5)

    def wait_stopped(self, timeout=60):
        """Wait for the guest to power off by itself."""
        _wait(lambda: self.state() in STOPPED, timeout, f"{self.name} still {self.state()}")

    def destroy(self):
        """Pull the plug, if it still runs."""
        if self.state() not in STOPPED:
            # It may power off by itself meanwhile: then destroy fails, and that is fine.
            virsh("destroy", self.name, check=False)
            if self.state() not in STOPPED:
                raise VirtError(f"virsh destroy {self.name}: still {self.state()}")

    def undefine(self):
        """Forget the domain and its variable store."""
        virsh("undefine", "--nvram", self.name)

    def close(self):
        """Destroy, undefine, delete the overlay; whatever of it can be done."""
        try:
            if self.name in defined():
                try:
                    self.destroy()
                finally:
                    self.undefine()
            if self.name in defined():
                raise VirtError(f"{self.name} is still defined")
        finally:
            if self.overlay and os.path.exists(self.overlay):
                os.unlink(self.overlay)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def qemu_ids():
    """The uid and gid libvirt runs QEMU as: its DAC base label for QEMU."""
    caps = ET.fromstring(virsh("capabilities").stdout)
    for model in caps.iterfind("host/secmodel"):
        if model.findtext("model") != "dac":
            continue
        for label in model.iterfind("baselabel"):
            if label.get("type") == "qemu":
                uid, gid = label.text.split(":")
                return int(uid.lstrip("+")), int(gid.lstrip("+"))
    raise VirtError("virsh capabilities names no DAC label for QEMU")


def _pools():
    return set(virsh("pool-list", "--all", "--name").stdout.split())


def _drop_new_pools(before, directory):
    """virt-install makes an autostarted storage pool of the directory of a
    disk that no pool holds (virtinst's diskbackend.manage_path), and keeps
    it when the domain goes.  A domain needs no pool: drop the ones it made."""
    for pool in _pools() - before:
        target = ET.fromstring(virsh("pool-dumpxml", pool).stdout).findtext("target/path")
        if target == directory:
            virsh("pool-destroy", pool, check=False)  # a dir pool keeps its files
            virsh("pool-undefine", pool)


def virt_install(name, disk, *, nvram_template, serial_log, memory=1024, cpu="mode=maximum",
                 extra=(), disk_format="raw", workdir=None):
    """Define and start domain NAME on a qcow2 overlay of DISK, with Secure
    Boot firmware and its variables made from NVRAM_TEMPLATE; the serial
    console goes to the file SERIAL_LOG (None: a pty, for virsh console).
    The overlay is WORKDIR/NAME.qcow2, WORKDIR by default SERIAL_LOG's
    directory.  EXTRA: more virt-install arguments.  Returns the Domain."""
    if name in defined():
        raise VirtError(f"a domain named {name} exists already (virsh undefine --nvram {name})")
    # A variable store of a domain that never got defined (a virt-install
    # that failed) stays behind, and libvirt would take it over the
    # template: the firmware would look for another disk's partitions.
    stale = f"/var/lib/libvirt/qemu/nvram/{name}_VARS.fd"
    if os.path.exists(stale):
        os.unlink(stale)
    if serial_log is None and workdir is None:
        raise ValueError("a pty console needs WORKDIR for the overlay")
    workdir = os.path.abspath(workdir or os.path.dirname(serial_log))
    overlay = os.path.join(workdir, f"{name}.qcow2")
    serial = "pty"
    if serial_log is not None:
        serial_log = os.path.abspath(serial_log)
        serial = f"file,path={serial_log}"
        if os.path.exists(serial_log):
            os.unlink(serial_log)  # else a stale console could match
    os.makedirs(workdir, exist_ok=True)
    cmd = ["virt-install", "--connect", URI, "--name", name, "--virt-type", "qemu",
           "--machine", "q35", "--cpu", cpu, "--memory", str(memory),
           "--osinfo", "detect=on,require=off", "--import",
           "--disk", f"path={overlay},format=qcow2,bus=virtio,"
           "source.seclabel.model=dac,source.seclabel.relabel=no",
           "--boot", f"loader={SNAKEOIL_CODE},loader.readonly=yes,loader.type=pflash,"
           f"loader.secure=yes,nvram.template={os.path.abspath(nvram_template)}",
           "--features", "smm.state=on", "--graphics", "none", "--network", "none",
           "--serial", serial, "--noautoconsole", *extra]
    dom = Domain(name, serial_log, overlay)
    try:
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b",
                        os.path.abspath(disk), "-F", disk_format, overlay], check=True)
        # libvirt would chown the overlay and DISK behind it to QEMU's user,
        # and at shutdown give back only the overlay: it leaves read-only
        # images as it made them.  So the chain is not relabelled; the
        # overlay is QEMU's from the start, DISK must be readable as it is.
        os.chown(overlay, *qemu_ids())
        pools = _pools()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True)
        finally:
            _drop_new_pools(pools, workdir)
        if p.returncode != 0:
            raise VirtError(f"virt-install exited {p.returncode}\n{p.stdout}{p.stderr}")
    except BaseException:
        dom.close()
        raise
    return dom
