#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Boot a raw disk image under QEMU (TCG) + OVMF with Secure Boot, drive its serial console.

    with VM("disk.img", snapshot=True) as vm:
        vm.wait_for(r"GNU GRUB")
        vm.send(KEY_DOWN + KEY_ENTER)
        vm.wait_exit()

    vm.py run  --disk disk.img [--expect REGEX | --send KEYS]... [--interactive]
    vm.py boot --esp DIR [--boot DIR] [--root DIR] [run options]

See README.md next to this file.
"""

import argparse
import atexit
import bisect
import codecs
import fcntl
import hashlib
import json
import os
import re
import select
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import termios
import threading
import time
import weakref

# --- phases, and the timeouts derived from them ---------------------------
#
# A boot passes through phases, each ended by what the console shows: the
# firmware starting the boot option; nmbl's kernel and initramfs, up to
# nmbl-init's first word; nmbl's menu drawn and counting down; the target
# up (the test's target, or the real Debian's multi-user.target: "system").
# Each machine records when each phase ended (VM.phases); the test runner
# prints their medians and keeps them in the build (phases.json, below),
# and the timeouts of the next run derive from what this machine took.
# What nmbl's menu shows once grub-emu has drawn it and started counting down.
MENU_READY = r"executed automatically in"
PHASES = (("firmware", re.compile(r"BdsDxe: starting Boot")),
          ("kernel", re.compile(r"nmbl(?:-init)?: ")),
          ("menu", re.compile(MENU_READY)),
          ("target", re.compile(r"NMBL-TARGET-UP ")),
          ("system", re.compile(r"NMBL-SYSTEM-UP ")))
# The last two end a boot either way: after one, nothing more is recorded.
LAST_PHASES = ("target", "system")
# Seconds each phase takes on a two-CPU machine under TCG, about the
# medians of the suite's boots there, two modules at once (clean clones:
# firmware 4.5-4.7, kernel 7.6-8.3, menu 1.6-1.7, target 15.2-15.5 with
# the kexec hand-over, the real Debian's system 32-34, its first start
# longer): what a phase is given at least, before this machine has
# measured its own.
PHASE_SECONDS = {"firmware": 6, "kernel": 9, "menu": 3, "target": 15, "system": 60}
# A wait is given this many times what its phases take at their median: a
# machine five times slower than usual still passes (two test modules at
# once on two CPUs make each boot slower by a tenth).
PHASE_ROOM = 5
# The suite's record of what phases took, kept in the build (test/run sets
# NMBL_BUILD): the latest PHASE_RECORD of each.
PHASE_RECORD = 200


def phase_file():
    build = os.environ.get("NMBL_BUILD")
    return os.path.join(build, "test", "phases.json") if build else None


def recorded_phases():
    """{phase: [seconds, ...]} as earlier runs recorded them."""
    path = phase_file()
    try:
        with open(path) as f:
            return json.load(f)
    except (TypeError, OSError, ValueError):
        return {}


def record_phases(boots):
    """Add the phases of BOOTS (VM.phases dicts) to the build's record."""
    path = phase_file()
    if not path or not boots:
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = recorded_phases()
        for phases in boots:
            for name, seconds in phases.items():
                record[name] = (record.get(name, []) + [round(seconds, 2)])[-PHASE_RECORD:]
        with open(path + ".tmp", "w") as f:
            json.dump(record, f)
        os.replace(path + ".tmp", path)


def _median(values):
    values = sorted(values)
    n = len(values)
    return (values[n // 2] + values[(n - 1) // 2]) / 2 if n else 0.0


def phase_budget(*phases):
    """Seconds a wait spanning PHASES may take: PHASE_ROOM times what they
    take, each its median on this machine as recorded, or PHASE_SECONDS
    where that is more."""
    record = recorded_phases()
    return PHASE_ROOM * sum(max(PHASE_SECONDS[p], _median(record.get(p, []))) for p in phases)


# Firmware to the test's target, and to the real Debian's multi-user.target.
DEFAULT_TIMEOUT = phase_budget("firmware", "kernel", "menu", "target")
SYSTEM_TIMEOUT = phase_budget("firmware", "kernel", "menu", "system")

# Debian's ovmf package; the "snakeoil" pair has Debian's test key enrolled as PK/KEK/db.
OVMF_DIR = os.environ.get("NMBL_OVMF_DIR", "/usr/share/OVMF")
FIRMWARE = {
    True: ("OVMF_CODE_4M.snakeoil.fd", "OVMF_VARS_4M.snakeoil.fd"),
    False: ("OVMF_CODE_4M.fd", "OVMF_VARS_4M.fd"),
}

# How a disk is attached, by bus: the controller the bus needs (once per
# machine), then the disk's own device; {id} is its drive, {n} its number.
# "sata" is q35's own AHCI controller, "usb" a USB stick on an xHCI port.
DISK_BUSES = {
    "virtio": (None, "virtio-blk-pci,drive={id}"),
    "scsi": ("virtio-scsi-pci,id=scsi", "scsi-hd,drive={id},bus=scsi.0"),
    "sata": (None, "ide-hd,drive={id},bus=ide.{n}"),
    "nvme": (None, "nvme,drive={id},serial=nmbl{n}"),
    "usb": ("qemu-xhci,id=xhci", "usb-storage,drive={id},bus=xhci.0"),
}

# Keys as a VT100/xterm serial terminal sends them.
KEY_UP, KEY_DOWN, KEY_RIGHT, KEY_LEFT = "\x1b[A", "\x1b[B", "\x1b[C", "\x1b[D"
KEY_HOME, KEY_END = "\x1b[H", "\x1b[F"
KEY_PGUP, KEY_PGDN, KEY_DELETE = "\x1b[5~", "\x1b[6~", "\x1b[3~"
KEY_ENTER, KEY_ESC, KEY_TAB, KEY_BACKSPACE = "\r", "\x1b", "\t", "\x7f"
KEY_F10 = "\x1b[21~"
KEY_CTRL_C, KEY_CTRL_X = "\x03", "\x18"

# Names usable as {name} in CLI --send strings (and parse_keys()).
KEYS = {
    "up": KEY_UP, "down": KEY_DOWN, "right": KEY_RIGHT, "left": KEY_LEFT,
    "home": KEY_HOME, "end": KEY_END, "pgup": KEY_PGUP, "pgdn": KEY_PGDN,
    "delete": KEY_DELETE, "enter": KEY_ENTER, "esc": KEY_ESC, "tab": KEY_TAB,
    "backspace": KEY_BACKSPACE,
    "f1": "\x1bOP", "f2": "\x1bOQ", "f3": "\x1bOR", "f4": "\x1bOS",
    "f5": "\x1b[15~", "f6": "\x1b[17~", "f7": "\x1b[18~", "f8": "\x1b[19~",
    "f9": "\x1b[20~", "f10": KEY_F10, "f11": "\x1b[23~", "f12": "\x1b[24~",
}
KEYS.update({f"ctrl-{c}": chr(ord(c) - ord("a") + 1) for c in "abcdefghijklmnopqrstuvwxyz"})

# One key on the wire: a CSI or SS3 sequence goes out in one write, because a
# receiver that sees ESC alone for a while takes it as the Esc key.
_KEY_UNIT = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1bO[@-~]|[\s\S]")

# CSI, OSC, DCS/PM/APC strings, then any other ESC sequence.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)"
                   r"|[PX^_][^\x1b]*\x1b\\|[ -/]*[0-~])")
_CURSOR_MOVE = re.compile(r"\x1b\[[0-9;]*[Hf]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def strip_ansi(text):
    """Console text without escape sequences and control characters.

    Cursor positioning becomes a newline: full-screen programs (OVMF dialogs,
    GRUB's menu) place each row with it instead of writing newlines."""
    text = _CURSOR_MOVE.sub("\n", text)
    return _CONTROL.sub("", _ANSI.sub("", text))


class AnsiStripper:
    """strip_ansi() of a console log that only grows, stripping only what is
    new at each call."""

    def __init__(self):
        self._cut, self._done = 0, ""

    def __call__(self, text):
        # Text before the last ESC is final; from that ESC on a sequence may
        # still be arriving, unless it is long past.
        last = text.rfind("\x1b", self._cut)
        end = len(text) if last < 0 or len(text) - last > 256 else last
        if end > self._cut:
            self._done += strip_ansi(text[self._cut:end])
            self._cut = end
        return self._done + strip_ansi(text[end:])


def parse_keys(spec):
    """Turn "{down}{down}{enter}" / "text{ctrl-x}" into bytes to send; "{{" is "{"."""
    out = []
    for m in re.finditer(r"\{\{|\{([a-z0-9-]+)\}|[^{]+|\{", spec):
        if m.group(1) is not None:
            if m.group(1) not in KEYS:
                raise ValueError(f"unknown key {{{m.group(1)}}}; known: {', '.join(KEYS)}")
            out.append(KEYS[m.group(1)])
        else:
            out.append("{" if m.group(0) == "{{" else m.group(0))
    return "".join(out)


class VMError(Exception):
    pass


class VMTimeout(VMError):
    pass


class VMExited(VMError):
    """QEMU ended while we were waiting for console output."""


# Each machine this process ran: (what it booted, seconds from start to
# end, whether it went on from a saved machine, its phases), for the test
# runner's --slowest and phase lines.
BOOTS = []

_running = weakref.WeakSet()
# A test that dies with an exception outside a with-block must not leave QEMU behind.
atexit.register(lambda: [vm.kill() for vm in list(_running)])


TPM_ID = "nmbl-tpm-id"


def make_tpm_state(path, banks=("sha256",)):
    """A new TPM 2.0 in directory PATH (emptied), its PCR banks BANKS
    allocated (sha1, sha256, sha384, sha512), as a machine's firmware TPM
    comes out of the factory: no certificates."""
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    subprocess.run(["swtpm_setup", "--tpm2", "--tpmstate", os.path.abspath(path),
                    "--config", "/dev/null", "--pcr-banks", ",".join(banks), "--overwrite"],
                   check=True, capture_output=True)
    # Which TPM this is, whatever its state becomes: a machine saved with
    # it (VM(saved=)) goes on only with the same one.
    with open(os.path.join(path, TPM_ID), "w") as f:
        f.write(os.urandom(16).hex() + "\n")
    return path


class VM:
    def __init__(self, disk, *, secure_boot=True, memory=1024, snapshot=False,
                 vars_file=None, log_file=None, echo=None, qemu_args=(),
                 qemu="qemu-system-x86_64", ovmf_code=None, ovmf_vars=None,
                 pace=0.02, esc_delay=1.2, tb_size=None, blkdebug=None, disk_format="raw",
                 tpm=None, cpu="max", bus="virtio", disks=(), serial=True, qmp=False,
                 saved=None, save_at=None):
        """disk: raw image (or DISK_FORMAT, e.g. a qcow2 overlay), attached as
            BUS says (virtio by default: /dev/vda in the guest).
        snapshot: writes go to a throw-away overlay, so many tests can share one image.
        vars_file: EFI variable store to use and keep; made from the template if
            missing. Default: a private copy, deleted by kill().
        log_file: path the raw console bytes are written to as they arrive.
        echo: a binary stream the console is mirrored to (e.g. sys.stdout.buffer).
        pace: seconds between keys in send(); esc_delay: gap after a lone Esc,
            longer than curses' ESCDELAY (1 s) so it is not merged with the next key.
        tb_size: MiB of TCG's translated-code cache (default: QEMU's own).
        blkdebug: a QEMU blkdebug configuration file: the disk is read through
            QEMU's blkdebug driver, which fails the reads that file names.
        tpm: a TPM 2.0 state directory (make_tpm_state()): the machine gets a
            CRB TPM, swtpm running on that state, which it keeps across boots.
        cpu: QEMU's CPU model (-cpu): "max", every feature TCG has; "qemu64",
            what libvirt gives a machine made without --cpu.
        bus: how DISK is attached (DISK_BUSES): virtio, scsi, sata, nvme, usb.
        disks: more disks, (image, bus) pairs, after DISK (which the
            firmware tries first), raw or, named *.qcow2, qcow2; SNAPSHOT
            covers them too.
        serial: False for a machine without a serial port: what is read and
            written here is then a virtio console (hvc0), which only a system
            that loads virtio_console and names console=hvc0 uses.
        qmp: a QEMU machine protocol socket, for self.qmp() (keys typed on
            the machine's own keyboard, screendump()).
        saved, save_at: start from a saved machine instead of from power-on.
            SAVED is a directory: when a machine that this same command line
            made, on the same firmware and disk files, was saved there, it
            goes on from where it was (its RAM and devices, its EFI
            variables, what its console showed); otherwise it starts from
            power-on and, once its console shows SAVE_AT (a regex), is saved
            there (in place of any other of its disk and command line) and
            goes on.  The disks must be as they were then, which SNAPSHOT
            ensures; the variables are the machine's own, so VARS_FILE does
            not go with it, and so is its TPM's state, but for which TPM
            (make_tpm_state()) it is.
        """
        code, template = FIRMWARE[bool(secure_boot)]
        self.disk = disk
        self.secure_boot = bool(secure_boot)
        self.memory = memory
        self.snapshot = snapshot
        self.ovmf_code = ovmf_code or os.path.join(OVMF_DIR, code)
        self.ovmf_vars = ovmf_vars or os.path.join(OVMF_DIR, template)
        self.vars_file = vars_file
        self.log_file = log_file
        self.echo = echo
        self.qemu = qemu
        self.qemu_args = list(qemu_args)
        self.tb_size = tb_size
        self.blkdebug = blkdebug
        self.disk_format = disk_format
        self.tpm = tpm
        self.cpu = cpu
        self.disks = [(disk, bus)] + list(disks)
        for _, b in self.disks:
            if b not in DISK_BUSES:
                raise ValueError(f"unknown disk bus {b!r}: not one of {', '.join(DISK_BUSES)}")
        self.serial = serial
        if saved and (not snapshot or vars_file or not save_at):
            raise ValueError("a saved machine needs snapshot=True and save_at, "
                             "and keeps its own variables")
        self.saved = saved
        self.save_at = save_at
        self.resumed = False
        self.want_qmp = qmp or bool(saved)
        self._qmp = None
        self._swtpm = None
        self.pace = pace
        self.esc_delay = esc_delay
        self.stderr = ""  # QEMU's own messages (bad arguments, missing files)
        self._proc = None
        self._tmpdir = None
        self._threads = []
        self._cond = threading.Condition()
        self._raw = bytearray()
        # When the console's bytes came: (seconds since start, length of
        # raw after the read), one pair per read (arrived_at()).
        self._arrivals = []
        self._chunks = []
        self._text = ""
        self._stripper = AnsiStripper()
        self._cursor = {False: 0, True: 0}  # where the next wait_for starts, per mode
        self._read_lock = threading.Lock()
        self._eof = False
        self._started = None
        self._ended = None
        self._log = None
        self._own_vars = False
        self._saved_lock = None
        # Seconds each phase took (PHASES), in the order they ended; the
        # console's last characters, where the next marker may begin.
        self.phases = {}
        self._phase_at = 0.0
        self._phase_next = 0
        self._phase_tail = ""

    # --- life cycle -----------------------------------------------------

    def command(self):
        """The QEMU command line (needs vars_file set; start() does that)."""
        accel = "tcg" if self.tb_size is None else f"tcg,tb-size={self.tb_size}"
        cmd = [self.qemu, "-accel", accel, "-cpu", self.cpu, "-m", str(self.memory),
               "-machine", "q35,smm=on"]
        if self.secure_boot:
            # SMM + secure flash: otherwise the OS could rewrite the variables
            # that hold the Secure Boot keys, and OVMF's secboot build refuses to run.
            cmd += ["-global", "driver=cfi.pflash01,property=secure,value=on"]
        cmd += ["-drive", f"if=pflash,format=raw,unit=0,readonly=on,file={self.ovmf_code}",
                "-drive", f"if=pflash,format=raw,unit=1,file={self.vars_file}",
                *self._disk_args(),
                # stdio on pipes: no connect race and no socket path to clean up;
                # -display/-monitor none keep anything else off stdio.
                "-display", "none", *self._console_args(), "-monitor", "none",
                "-no-reboot", "-nic", "none"]
        if self.want_qmp:
            cmd += ["-qmp", f"unix:{self._qmp_socket()},server=on,wait=off"]
        if self.tpm:
            cmd += ["-chardev", f"socket,id=chrtpm,path={self._tpm_socket()}",
                    "-tpmdev", "emulator,id=tpm0,chardev=chrtpm",
                    "-device", "tpm-crb,tpmdev=tpm0"]
        return cmd + self.qemu_args

    def _disk_args(self):
        disk, bus = self.disks[0]
        if bus == "virtio" and len(self.disks) == 1:
            source = f"blkdebug:{self.blkdebug}:{disk}" if self.blkdebug else disk
            drive = f"file={source},format={self.disk_format},if=virtio"
            return ["-drive", drive + (",snapshot=on" if self.snapshot else "")]
        if self.blkdebug:
            raise VMError("blkdebug is for a machine with one virtio disk")
        args, controllers = [], set()
        for n, (image, bus) in enumerate(self.disks):
            controller, device = DISK_BUSES[bus]
            if controller and controller not in controllers:
                controllers.add(controller)
                args += ["-device", controller]
            fmt = self.disk_format if n == 0 else (
                "qcow2" if image.endswith(".qcow2") else "raw")
            args += ["-drive", f"file={image},format={fmt},if=none,id=disk{n}"
                     + (",snapshot=on" if self.snapshot else ""),
                     "-device", device.format(id=f"disk{n}", n=n) + f",bootindex={n}"]
        return args

    def _console_args(self):
        if self.serial:
            return ["-serial", "stdio"]
        return ["-serial", "none", "-chardev", "stdio,id=hvc,signal=off",
                "-device", "virtio-serial-pci", "-device", "virtconsole,chardev=hvc"]

    def _qmp_socket(self):
        return os.path.join(self._tmpdir, "qmp.sock")

    def qmp(self):
        """The machine's QMP connection (qmp=True), opened on first use."""
        if not self.want_qmp:
            raise VMError("this VM has no QMP socket: VM(..., qmp=True)")
        if self._qmp is None:
            self._qmp = Qmp(self._qmp_socket())
        return self._qmp

    def screendump(self, path):
        """The screen as the machine shows it, a PPM image at PATH."""
        self.qmp().execute("screendump", filename=os.path.abspath(path))

    def _tpm_socket(self):
        return os.path.join(self._tmpdir, "swtpm.sock")

    def _start_swtpm(self):
        """swtpm on the state directory, until QEMU lets go of it
        (--terminate); QEMU connects only once its socket is there."""
        sock = self._tpm_socket()
        self._swtpm = subprocess.Popen(
            ["swtpm", "socket", "--tpm2", "--tpmstate", f"dir={os.path.abspath(self.tpm)}",
             "--ctrl", f"type=unixio,path={sock}", "--terminate",
             "--log", f"file={os.path.abspath(os.path.join(self.tpm, 'swtpm.log'))}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while not os.path.exists(sock):
            if self._swtpm.poll() is not None:
                raise VMError(f"swtpm ended: {self._swtpm.stderr.read().decode()}")
            if time.monotonic() > deadline:
                raise VMError("swtpm made no socket in 30 s")
            time.sleep(0.05)

    def stop_tpm(self):
        """The TPM goes away under the running machine (swtpm killed)."""
        if self._swtpm and self._swtpm.poll() is None:
            self._swtpm.kill()
            self._swtpm.wait()

    def start(self):
        if self._proc:
            raise VMError("VM already started")
        for image, _ in self.disks:
            if not os.path.exists(image):
                raise FileNotFoundError(f"disk image not found: {image}")
        self._tmpdir = tempfile.mkdtemp(prefix="nmbl-vm-")
        if self.vars_file is None:
            self._own_vars = True
            self.vars_file = os.path.join(self._tmpdir, "OVMF_VARS.fd")
        state = None
        if self.saved:
            # One process at a time starts this machine until it is saved or
            # loaded: the others wait, then go on from what it saved.
            os.makedirs(self.saved, exist_ok=True)
            self._saved_lock = open(self._state_key()[0] + ".lock", "w")
            fcntl.flock(self._saved_lock, fcntl.LOCK_EX)
            state = self._saved_state()
        if state:
            shutil.copyfile(state["vars"], self.vars_file)
        elif not os.path.exists(self.vars_file):
            shutil.copyfile(self.ovmf_vars, self.vars_file)
        if self.tpm:
            self._start_swtpm()
        self._log = open(self.log_file, "wb") if self.log_file else None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        command = self.command()
        if state:
            # What the console showed until the machine was saved, as if
            # this one had shown it.
            with open(state["console"], "rb") as f:
                console = f.read()
            self._raw += console
            self._arrivals.append((0.0, len(self._raw)))
            self._chunks.append(self._decoder.decode(console))
            if self._log:
                self._log.write(console)
            command += ["-incoming", "exec:cat " + shlex.quote(state["stream"])]
        self._proc = subprocess.Popen(command, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._started = time.monotonic()
        _running.add(self)
        # Drain both outputs all the time: a full pipe would stall QEMU's
        # serial emulation, and with it the guest.
        self._threads = [threading.Thread(target=self._read_console, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for t in self._threads:
            t.start()
        try:
            if state:
                self._resume()
            elif self.saved:
                self.wait_for(self.save_at, since=0)
                self._save()
                self._cursor = {False: 0, True: 0}
        except BaseException:
            # A with-block whose start failed does not end it.
            self.kill()
            raise
        self._release_saved()
        return self

    def _release_saved(self):
        if self._saved_lock:
            self._saved_lock.close()
            self._saved_lock = None

    # --- saved machines -------------------------------------------------

    def _state_key(self):
        """Where in self.saved this machine is saved, and what it must have
        been started with to be this one: the command line (but for this
        run's own files) and the files it reads (firmware, disks), by size
        and modification time."""
        command = [a.replace(self._tmpdir, "TMP").replace(self.vars_file, "VARS")
                   for a in self.command()]
        files = [self.ovmf_code, self.ovmf_vars] + [image for image, _ in self.disks]
        stats = [(os.path.abspath(f), os.stat(f).st_size, os.stat(f).st_mtime_ns) for f in files]
        tpm = ""
        if self.tpm:
            with open(os.path.join(self.tpm, TPM_ID)) as f:
                tpm = f.read().strip()
        name = hashlib.sha256(json.dumps(command).encode()).hexdigest()[:16]
        disk = os.path.abspath(self.disk)
        prefix = os.path.join(self.saved, "-".join((os.path.basename(os.path.dirname(disk)),
                                                    os.path.basename(disk), name)))
        return prefix, hashlib.sha256(json.dumps([command, stats, tpm]).encode()).hexdigest()

    def _state_files(self):
        prefix, _ = self._state_key()
        return {part: f"{prefix}.{part}" for part in ("stream", "vars", "console", "key")}

    def _saved_state(self):
        """The files of the machine saved in self.saved, if it is this one."""
        if not self.saved:
            return None
        files = self._state_files()
        try:
            with open(files["key"]) as f:
                if f.read().strip() != self._state_key()[1]:
                    return None
        except FileNotFoundError:
            return None
        return files if all(os.path.exists(files[p]) for p in ("stream", "vars", "console")) \
            else None

    def _migration_done(self, what):
        """Wait until this QEMU's migration has ended; raise unless it completed."""
        deadline = time.monotonic() + DEFAULT_TIMEOUT
        while True:
            status = self.qmp().execute("query-migrate").get("status")
            if status == "completed":
                return
            if status in ("failed", "cancelled") or time.monotonic() > deadline:
                raise VMError(f"{what}: migration {status}\n{self._tail()}")
            time.sleep(0.05)

    def _resume(self):
        """Once the saved machine is loaded, let it run."""
        self._migration_done("starting the saved machine")
        self.qmp().execute("cont")
        self.resumed = True
        # Its phases before were another machine's: from here, the target.
        with self._cond:
            self._phase_next = [n for n, _ in PHASES].index("menu") + 1
            self._phase_at = self.elapsed()
            self._phase_tail = ""

    def _save(self):
        """Save the machine, paused for it, in self.saved: QEMU's migration
        stream of its RAM and devices, its EFI variables, and what its
        console has shown; then it goes on."""
        files = self._state_files()
        tmp = {part: f"{path}.{os.getpid()}" for part, path in files.items()}
        os.makedirs(self.saved, exist_ok=True)
        qmp = self.qmp()
        qmp.execute("stop")
        # Paused, the machine writes nothing more: what QEMU wrote of its
        # console is in the pipe, and read once the pipe is empty.
        while True:
            with self._read_lock:
                pending = fcntl.ioctl(self._proc.stdout.fileno(), termios.FIONREAD, b"\0" * 4)
                if int.from_bytes(pending, sys.byteorder) == 0:
                    console = bytes(self._raw)
                    break
            time.sleep(0.01)
        qmp.execute("migrate", uri="exec:cat > " + shlex.quote(tmp["stream"]))
        self._migration_done("saving the machine")
        shutil.copyfile(self.vars_file, tmp["vars"])
        with open(tmp["console"], "wb") as f:
            f.write(console)
        with open(tmp["key"], "w") as f:
            f.write(self._state_key()[1] + "\n")
        for part in ("stream", "vars", "console", "key"):
            os.replace(tmp[part], files[part])
        qmp.execute("cont")

    def kill(self):
        """Stop QEMU (if still running) and release everything; safe to call twice."""
        if self._proc and self._proc.poll() is None:
            self._proc.terminate()  # lets QEMU finish writing the vars file
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._finish()

    def _finish(self):
        self._release_saved()
        if self._proc and self._ended is None:
            self._ended = self.elapsed()
            BOOTS.append((os.path.basename(self.log_file or self.disk), self._ended,
                          self.resumed, dict(self.phases)))
        if self._qmp:
            self._qmp.close()
            self._qmp = None
        for t in self._threads:
            t.join()
        self._threads = []
        if self._proc and self._proc.stdin:
            try:
                self._proc.stdin.close()
            except BrokenPipeError:
                pass
        if self._log:
            self._log.close()
            self._log = None
        if self._swtpm:
            if self._swtpm.poll() is None:
                self._swtpm.terminate()
            self._swtpm.wait()
            self._swtpm = None
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
            if self._own_vars:
                self.vars_file = None
        _running.discard(self)

    def __enter__(self):
        return self if self._proc else self.start()

    def __exit__(self, *exc):
        self.kill()

    def elapsed(self):
        """Seconds since start()."""
        return time.monotonic() - self._started if self._started else 0.0

    @property
    def returncode(self):
        return self._proc.poll() if self._proc else None

    def _need_proc(self):
        if not self._proc:
            raise VMError("VM not started: call start() or use it in a with-block")

    def wait_exit(self, timeout=DEFAULT_TIMEOUT):
        """Wait for QEMU to end (guest power-off, or reset: -no-reboot); return its status."""
        self._need_proc()
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise VMTimeout(f"QEMU still running after {timeout} s\n{self._tail()}") from None
        self._finish()
        return self._proc.returncode

    # --- console output -------------------------------------------------

    def _read_console(self):
        fd = self._proc.stdout.fileno()
        while True:
            select.select([fd], [], [])
            # Read and kept under one lock: save() tells by it that all
            # that was in the pipe is kept.
            with self._read_lock:
                data = os.read(fd, 65536)
                text = self._decoder.decode(data, final=not data)
                with self._cond:
                    self._raw += data
                    self._arrivals.append((self.elapsed(), len(self._raw)))
                    self._chunks.append(text)
                    self._eof = not data
                    self._note_phases(text)
                    self._cond.notify_all()
            if self._log and data:
                self._log.write(data)
                self._log.flush()  # so `tail -f` on the log follows the boot
            if self.echo and data:
                self.echo.write(data)
                self.echo.flush()
            if not data:
                return

    def _note_phases(self, text):
        """Record the phases that TEXT, the console's newest, ends (under
        _cond).  A phase whose marker never shows (GRUB's boot has no
        nmbl-init) is counted in the next."""
        if self._phase_next >= len(PHASES) or not text:
            return
        seen, pos = self._phase_tail + text, 0
        for i in range(self._phase_next, len(PHASES)):
            name, marker = PHASES[i]
            m = marker.search(seen, pos)
            if not m:
                continue
            now = self.elapsed()
            self.phases[name] = now - self._phase_at
            self._phase_at, pos = now, m.end()
            self._phase_next = i + 1
            if name in LAST_PHASES:
                self._phase_next = len(PHASES)
                break
        self._phase_tail = seen[max(pos, len(seen) - 64):]

    def _read_stderr(self):
        for line in self._proc.stderr:
            self.stderr += line.decode(errors="replace")

    @property
    def log(self):
        """Everything the guest wrote to the serial console, escapes kept."""
        with self._cond:
            if self._chunks:
                self._text += "".join(self._chunks)
                self._chunks = []
            return self._text

    def arrived_at(self, offset):
        """Seconds after start() when the console's byte OFFSET (in raw)
        came; None if it has not.  A read takes what the pipe holds: a
        time is that of the read that brought the byte, late by at most
        how long the reader slept."""
        with self._cond:
            ends = [end for _, end in self._arrivals]
            i = bisect.bisect_right(ends, offset)
            return self._arrivals[i][0] if i < len(self._arrivals) else None

    @property
    def raw(self):
        """The console as bytes (OVMF draws boxes in CP437, not UTF-8)."""
        with self._cond:
            return bytes(self._raw)

    def clean_log(self):
        """The log with escape sequences stripped, see strip_ansi()."""
        return self._stripper(self.log)

    def pos(self, clean=False):
        """Current end of the log (or of clean_log()), to pass as wait_for(since=)."""
        return len(self.clean_log() if clean else self.log)

    def _tail(self, n=2000):
        # Full-screen output leaves rows of blanks; drop them to show more text.
        text = re.sub(r"[ \t]+\n", "\n", self.clean_log().rstrip())
        tail = re.sub(r"\n{3,}", "\n\n", text)[-n:]
        msg = f"--- last {len(tail)} chars of the console (escapes stripped) ---\n{tail}"
        if self.stderr.strip():
            msg += f"\n--- QEMU stderr ---\n{self.stderr.strip()}"
        return msg

    def wait_for(self, pattern, timeout=DEFAULT_TIMEOUT, since=None, clean=False):
        """Wait until the regex `pattern` (str or compiled) matches the console.

        The search starts at `since` (a position in log, or in clean_log() if
        clean=True); by default where the previous wait_for of the same mode
        matched, so successive calls read the console in order. Returns the
        re.Match (positions in log / clean_log()). Raises VMTimeout, or VMExited
        as soon as QEMU ends without a match; both carry the console's tail.
        """
        self._need_proc()
        rx = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
        start = self._cursor[clean] if since is None else since
        deadline = time.monotonic() + timeout
        while True:
            with self._cond:
                eof = self._eof
            m = rx.search(self.clean_log() if clean else self.log, start)
            if m:
                self._cursor[clean] = m.end()
                return m
            if eof:
                status = self._proc.wait()
                self._threads[1].join(5)  # QEMU's stderr usually says why
                raise VMExited(f"QEMU exited (status {status}) before "
                               f"{rx.pattern!r} appeared\n{self._tail()}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise VMTimeout(f"{rx.pattern!r} did not appear within {timeout} s\n"
                                f"{self._tail()}")
            with self._cond:
                # Sleep until the reader brings more output (or time is up).
                if not self._chunks and not self._eof:
                    self._cond.wait(left)

    # --- console input --------------------------------------------------

    def send_raw(self, data):
        """Write bytes to the serial console at once, no pacing."""
        self._need_proc()
        if isinstance(data, str):
            data = data.encode()
        try:
            self._proc.stdin.write(data)
            self._proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise VMExited(f"QEMU has exited; cannot send {data!r}\n{self._tail()}") from None

    def send(self, keys, pace=None):
        """Type `keys` (text and KEY_* strings) one key at a time.

        The pause between keys is pacing, not synchronisation: it keeps the
        guest from getting a burst that its input handling may mangle. Wait for
        the screen you expect with wait_for() before sending the next keys."""
        pace = self.pace if pace is None else pace
        data = keys.encode() if isinstance(keys, str) else keys
        for unit in _KEY_UNIT.findall(data):
            self.send_raw(unit)
            time.sleep(self.esc_delay if unit == b"\x1b" else pace)

    # --- interactive ----------------------------------------------------

    def interact(self, escape=b"\x1d"):
        """Connect this terminal to the console until Ctrl-] or QEMU ends.

        The console must be mirrored to the terminal (echo=sys.stdout.buffer)."""
        fd = sys.stdin.fileno()
        saved = None
        if os.isatty(fd):
            import termios
            import tty
            saved = termios.tcgetattr(fd)
            tty.setraw(fd)  # keys (arrows, Esc, Ctrl-C) go to the guest as bytes
        try:
            while self.returncode is None:
                ready, _, _ = select.select([fd], [], [], 0.2)
                if not ready:
                    continue
                data = os.read(fd, 1024)
                if not data or escape in data:
                    data = data.split(escape)[0]
                    if data:
                        self.send_raw(data)
                    return
                self.send_raw(data)
        finally:
            if saved is not None:
                termios.tcsetattr(fd, termios.TCSADRAIN, saved)


# --- command line -----------------------------------------------------------

class Qmp:
    """QEMU's machine protocol on a Unix socket: keys typed on the VM's own
    keyboards, not on the serial line."""

    def __init__(self, path, timeout=DEFAULT_TIMEOUT):
        deadline = time.monotonic() + timeout
        self.sock = socket.socket(socket.AF_UNIX)
        while True:
            try:
                self.sock.connect(path)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)  # QEMU has not made the socket yet
        self.file = self.sock.makefile("rw")
        self._reply()
        self.execute("qmp_capabilities")

    def _reply(self):
        while True:
            msg = json.loads(self.file.readline())
            if "event" not in msg:
                return msg

    def execute(self, command, **arguments):
        self.file.write(json.dumps({"execute": command, "arguments": arguments}) + "\n")
        self.file.flush()
        reply = self._reply()
        if "error" in reply:
            raise AssertionError(f"QMP {command}: {reply['error']}")
        return reply["return"]

    def keys(self, *names):
        for name in names:
            self.execute("send-key", keys=[{"type": "qcode", "data": name}])

    def close(self):
        self.sock.close()


def _expect_arg(value):
    try:
        return ("expect", re.compile(value))
    except re.error as e:
        raise argparse.ArgumentTypeError(f"bad regex {value!r}: {e}")


def _send_arg(value):
    try:
        return ("send", parse_keys(value))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))


def _add_run_arguments(parser):
    parser.add_argument("--no-secure-boot", action="store_true",
                        help="plain OVMF without enrolled keys")
    parser.add_argument("--vars", metavar="FILE",
                        help="EFI variable store to use and keep (created if missing)")
    parser.add_argument("--memory", type=int, default=1024, metavar="MiB")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                        help="for each --expect, and for QEMU to end (default %(default)s)")
    parser.add_argument("--expect", dest="steps", action="append", metavar="REGEX",
                        type=_expect_arg,
                        help="wait for REGEX on the console; in order with --send")
    parser.add_argument("--send", dest="steps", action="append", metavar="KEYS",
                        type=_send_arg,
                        help="type KEYS, e.g. '{down}{enter}' or 'text{ctrl-x}'; "
                        "key names: " + " ".join(k for k in KEYS if not k.startswith("ctrl-"))
                        + " ctrl-a..ctrl-z; {{ is a literal {")
    parser.add_argument("--wait-exit", action="store_true",
                        help="after the steps, wait for QEMU to end (default if no --expect)")
    parser.add_argument("--interactive", "-i", action="store_true",
                        help="after the steps, attach this terminal (Ctrl-] quits)")
    parser.add_argument("--log", metavar="FILE", help="write the raw console to FILE")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="do not mirror the console to stdout")


def say(msg):
    print(f"vm: {msg}", file=sys.stderr, flush=True)


def _run(disk, args, snapshot):
    steps = args.steps or []
    vm = VM(disk, secure_boot=not args.no_secure_boot, memory=args.memory,
            snapshot=snapshot, vars_file=args.vars, log_file=args.log,
            echo=None if args.quiet and not args.interactive else sys.stdout.buffer,
            qemu_args=args.qemu_args)
    try:
        vm.start()
    except OSError as e:
        say(f"cannot start QEMU: {e}")
        return 1
    with vm:
        try:
            for kind, value in steps:
                if kind == "send":
                    vm.send(value)
                    continue
                vm.wait_for(value, args.timeout)
                say(f"matched {value.pattern!r} after {vm.elapsed():.1f} s")
            if args.interactive:
                say("console attached; Ctrl-] quits")
                vm.interact()
                return 0
            if args.wait_exit or not any(kind == "expect" for kind, _ in steps):
                status = vm.wait_exit(args.timeout)
                say(f"QEMU exited with status {status} after {vm.elapsed():.1f} s")
                return 0 if status == 0 else 1
            return 0
        except VMError as e:
            say(str(e))
            return 1


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    # Everything after "--" goes to QEMU verbatim (argparse would take "-smp" for an option).
    qemu_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv

    parser = argparse.ArgumentParser(
        prog="vm.py", description="Boot a disk image under QEMU + OVMF (Secure Boot).",
        epilog="Arguments after -- are passed to QEMU. Exit status: 0 ok, 1 failed.")
    sub = parser.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="boot an existing raw disk image")
    run.add_argument("--disk", required=True, metavar="IMG")
    run.add_argument("--snapshot", action="store_true",
                     help="do not write to the image (changes go to a temporary overlay)")
    _add_run_arguments(run)
    boot = sub.add_parser("boot", help="make a disk from trees (see mkdisk) and boot it")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import mkdisk
    mkdisk.add_arguments(boot)
    _add_run_arguments(boot)
    args = parser.parse_args(argv)
    args.qemu_args = qemu_args

    if args.cmd == "run":
        return _run(args.disk, args, args.snapshot)
    with tempfile.TemporaryDirectory(prefix="nmbl-vm-") as tmp:
        disk = os.path.join(tmp, "disk.img")
        try:
            layout = mkdisk.build_from_args(disk, args)
        except (OSError, ValueError, mkdisk.MkdiskError) as e:
            say(f"mkdisk: {e}")
            return 1
        for p in layout["partitions"]:
            say(f"/dev/vda{p['number']} {p['role']} {p['fstype']} "
                f"UUID={p['uuid']} PARTUUID={p['partuuid']}")
        return _run(disk, args, snapshot=False)


if __name__ == "__main__":
    sys.exit(main())
