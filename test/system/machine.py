# SPDX-License-Identifier: GPL-3.0-or-later
"""The real-system test machines (made by test/system/mkimage: "system";
"stacked", its encrypted-LVM layout; "raid", its RAID 1 LVM server): a copy
of one to boot, and its serial console as a user at a root shell sees it."""

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "boot"))

import fixture  # noqa: E402
from fixture import VM, build_path  # noqa: E402

# For the tests, which take the menu's marker from here.
MENU_READY = fixture.MENU_READY

# The line nmbl-test-report.service prints once multi-user.target is reached.
SYSTEM_UP = r"NMBL-SYSTEM-UP release=(\S+) multi-user=(\S+) cmdline=([^\r\n]*)\r?\n"
PROMPT = "root@nmbl-debian:~# "
# A command in the machine that takes this long (seconds) is named in the
# test's output, with its time: where a start's minutes go.
SLOW_COMMAND = 10
# Firmware to multi-user.target: what these phases take on this machine,
# with room for a busy one (test/vm/vm.py, phase_budget()).
BOOT_TIMEOUT = fixture.vm.SYSTEM_TIMEOUT
# The Boot Loader Interface's vendor GUID.
LOADER_GUID = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"


@functools.cache
def info(machine="system"):
    """What mkimage recorded of MACHINE: layout, kernels, packages."""
    with open(build_path(machine, "machine.json")) as f:
        return json.load(f)


def tpm_state(machine="system"):
    """The TPM state directory of MACHINE, when it has a TPM."""
    tpm = info(machine).get("tpm")
    return build_path(machine, tpm) if tpm else None


def disk_images(machine="system"):
    """The images of MACHINE's disks, the one the firmware starts from
    first."""
    images = info(machine)["layout"].get("disks") or ["disk.img"]
    return [build_path(machine, os.path.basename(image)) for image in images]


def root_uuid():
    return next(p["uuid"] for p in info()["layout"]["partitions"] if p["role"] == "root")


def expected_cmdline(kver):
    """What Debian's grub.cfg gives an entry of kernel KVER (GRUB's EFI
    BOOT_IMAGE first), with the machine's GRUB_CMDLINE_LINUX."""
    return (f"BOOT_IMAGE=/boot/vmlinuz-{kver} root=UUID={root_uuid()} ro "
            "console=tty0 console=ttyS0,115200 quiet")


def take_default(vm):
    """Once the menu is up, its default entry taken at once with Enter, as
    its user takes it, rather than after Debian's 5-second countdown (an
    entry in a submenu is not taken so: Enter opens the submenu)."""
    vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
    vm.send_raw(fixture.vm.KEY_ENTER)


class Machine:
    """One machine made from the image of MACHINE: a qcow2 overlay over each
    of its disks (the images stay as mkimage left them) and a copy of its
    EFI variable store and of its TPM's state, all kept from one boot to
    the next."""

    def __init__(self, name, machine="system"):
        self.dir = build_path("test", name)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.disks = []
        for n, image in enumerate(disk_images(machine)):
            disk = os.path.join(self.dir, "disk.qcow2" if n == 0 else f"disk{n + 1}.qcow2")
            subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b",
                            os.path.abspath(image), "-F", "raw", disk], check=True)
            self.disks.append(disk)
        self.disk = self.disks[0]
        self.vars_file = os.path.join(self.dir, "vars.fd")
        shutil.copyfile(build_path(machine, "vars.fd"), self.vars_file)
        self.tpm = None
        if tpm_state(machine):
            self.tpm = os.path.join(self.dir, "tpm")
            shutil.copytree(tpm_state(machine), self.tpm)

    def vm(self, name, without=(), **kw):
        """A start of the machine with its disks, less those numbered in
        WITHOUT (1 is the second disk), as if pulled out."""
        more = [(disk, "virtio") for n, disk in enumerate(self.disks[1:], 1) if n not in without]
        return VM(self.disk, disk_format="qcow2", vars_file=self.vars_file, disks=more,
                  tpm=self.tpm, log_file=os.path.join(self.dir, f"{name}.log"), **kw)


class Shell:
    """A root login on the serial console of VM."""

    def __init__(self, vm, password):
        self.vm = vm
        self.n = 0
        vm.wait_for(r"nmbl-debian login: ", timeout=BOOT_TIMEOUT, clean=True)
        vm.send_raw("root\r")
        vm.wait_for(r"Password: ", timeout=60, clean=True)
        vm.send_raw(password + "\r")
        vm.wait_for(re.escape(PROMPT), timeout=120, clean=True)
        # Wide lines, no colours, no pager: what the tests read is plain text.
        self.run("stty cols 250; export SYSTEMD_COLORS=0 SYSTEMD_PAGER=cat SYSTEMD_LESS= PAGER=cat")

    def run(self, command, timeout=120, answers=()):
        """Run COMMAND; return (exit status, output).  The output sits
        between two marker lines whose text the echoed command line does
        not contain (printf assembles them).  ANSWERS: (prompt, text) pairs,
        each TEXT typed as a line once COMMAND shows PROMPT."""
        self.n += 1
        n = self.n
        start = time.monotonic()
        since = self.vm.pos(clean=True)
        self.vm.send_raw(f"printf 'NMBL-OUT%s\\n' -{n}; {command}; "
                         f"printf 'NMBL-RC%s-%s\\n' -{n} $?\r")
        at = since
        for prompt, text in answers:
            at = self.vm.wait_for(re.escape(prompt), timeout=timeout, since=at, clean=True).end()
            self.vm.send_raw(text + "\r")
        m = self.vm.wait_for(re.compile(rf"NMBL-OUT-{n}\r?\n(.*?)NMBL-RC-{n}-(\d+)\r?\n", re.S),
                             timeout=timeout, since=since, clean=True)
        took = time.monotonic() - start
        if took >= SLOW_COMMAND:
            print(f"    {took:.0f} s in the machine: {command[:100]}", flush=True)
        return int(m.group(2)), m.group(1).replace("\r\n", "\n")

    def check(self, command, timeout=120, answers=()):
        """Run COMMAND, which must succeed; return its output."""
        status, out = self.run(command, timeout, answers)
        if status != 0:
            raise AssertionError(f"{command!r} exited {status}:\n{out}")
        return out

    def reboot(self):
        """systemctl reboot: the VM runs with -no-reboot, so QEMU ends."""
        self.vm.send_raw("systemctl reboot\r")
        self.vm.wait_exit(timeout=BOOT_TIMEOUT)

# What nmbl's journal says of an entry booted through its own initrd.
HANDOVER = "without a second kernel: its own initrd sets up its root"


def loader_variable(sh, name):
    """The Boot Loader Interface's variable NAME, as text."""
    return sh.check(f"cat /sys/firmware/efi/efivars/{name}-{LOADER_GUID} "
                    "| tail -c +5 | iconv -f UTF-16LE -t UTF-8 | tr -d '\\0'").strip()


def selected(sh):
    """The entry the loader says it booted (LoaderEntrySelected, which
    bootctl lists among BLS entries only; Debian's grub.cfg has none)."""
    return loader_variable(sh, "LoaderEntrySelected")


def check_handed_over(sh, nmbl_id, kver, reason):
    """One kernel start: the booted system's boot id is nmbl's (NMBL_ID),
    and nmbl's journal line says it booted KVER's entry through its own
    initrd, as REASON."""
    assert sh.check("cat /proc/sys/kernel/random/boot_id").strip() == nmbl_id, \
        "a second kernel started"
    said = sh.check(f"journalctl -b -o cat -t nmbl --grep '{HANDOVER}'")
    assert f"booting /vmlinuz-{kver} {HANDOVER}, as {reason}" in said, said


def check_nothing_left(sh):
    """What a boot through the entry's own initrd leaves of nmbl in the booted
    system: the entry's line over /proc/cmdline, read-only, the one mount
    nmbl made (mountinfo: its root, mount point, options); no process of
    nmbl's, nothing of its environment in process 1's, no /run/nmbl."""
    ours = [line.split() for line in sh.check("cat /proc/self/mountinfo").splitlines()
            if "nmbl" in line.split()[3] or "sysroot" in " ".join(line.split()[3:5])]
    assert [(f[4], f[5].split(",")[0]) for f in ours] == [("/proc/cmdline", "ro")], ours
    left = sh.check("for p in /proc/[0-9]*; do read -r c <$p/comm 2>/dev/null && "
                    "case $c in grub-emu|nmbl-init|nmbl-console) "
                    "echo \"${p#/proc/} $c $(cut -d' ' -f3,4 $p/stat)\";; esac; done; true")
    assert left.strip() == "", f"nmbl's processes are left (pid, name, state, parent): {left}"
    assert sh.check("tr '\\0' '\\n' </proc/1/environ | grep -c NMBL || true").strip() == "0"
    assert sh.run("test -e /run/nmbl")[0] != 0, "nmbl's /run is still there"
