#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""nmbl against GRUB, measured in VMs (QEMU under TCG with OVMF).

    test/bench/bench.py [--build DIR] [--runs N] [--variant NAME]... [--tb-size MIB]
                        [--seed N] [--out FILE] [--uki FILE]

Every variant boots the same disk layout: the same grub.cfg (timeout 0, one
entry), the same /boot and root; only the program on the ESP differs.  Each
boots N times from power-on to the target's marker line, the variants
taking turns run by run so that a slow spell of the machine falls on all of
them, in an order shuffled for each round (--seed), so that no variant
always follows the same one.  Every run is checked: the target kernel
really ran with the entry's command line, a direct boot kept nmbl's kernel
(the same boot id), a kexec did not.  Secure Boot is off for every variant, so that the comparison is
fair, except in nmbl-direct-sb.

  floor           firmware -> the target's own UKI, no menu (the limit)
  kexec-floor     firmware -> the target's kernel, whose initramfs is one
                  program that kexecs the entry at once (the limit of any
                  loader that hands over by kexec, here)
  grub            firmware -> GRUB from Debian's grub-efi-amd64-bin
                  (grub-mkstandalone, Debian's module list) -> kernel + initrd
  nmbl-kexec      firmware -> nmbl UKI (nmbl.boot=kexec) -> menu -> kexec
  nmbl-direct     firmware -> nmbl UKI -> menu -> switch root
  nmbl-direct-sb  the same under Secure Boot

And from the network (QEMU's user network, restrict=on; the same grub.cfg
for this machine's MAC beside each loader, the same kernel and dracut
initrd named relative to $root, on the same server; a disk that holds
only the target's root):

  grub-net        firmware PXE -> Debian's grubnetx64.efi over TFTP ->
                  kernel + initrd over TFTP
  nmbl-net-tftp   firmware PXE -> nmbl's network UKI over TFTP -> DHCP ->
                  menu -> kernel + initrd over TFTP -> kexec
  nmbl-net-http   firmware HTTP Boot -> nmbl's network UKI over HTTP ->
                  DHCP -> menu -> kernel + initrd over HTTP -> kexec

Their ratios are to grub-net.  The firmware's step holds its DHCP and the
loader's download.

And on the real Debian machines of test/system, each started from the
removable path (\EFI\BOOT\BOOTX64.EFI) with Secure Boot off, Debian's own
grub.cfg and its 5-second countdown alike for all, from power-on to the
machine's line at multi-user.target (the LUKS passphrase typed as soon as
it is asked):

  debian-grub         Debian's signed GRUB (grub-install's grubx64.efi)
                      -> kernel + Debian's initrd, plain ext4 root
  debian-nmbl-direct  nmbl's UKI -> menu -> switch root, the same machine
  debian-nmbl-kexec   nmbl's UKI (nmbl.boot=kexec) -> menu -> kexec
  lvm-grub            Debian's GRUB, "guided, encrypted LVM": LUKS2 holding
                      LVM, root and swap in it (mkimage --layout encrypted-lvm)
  lvm-nmbl-direct     nmbl's UKI -> menu -> the entry's own initrd on nmbl's
                      kernel (one kernel start), the same machine
  lvm-nmbl-kexec      nmbl's UKI (nmbl.boot=kexec) -> menu -> kexec
  raid-grub           Debian's GRUB, a server laid out as RHEL's installer
                      lays one out on two disks: XFS /boot on md RAID 1,
                      root (XFS in LUKS2 unlocked by the TPM) and swap on
                      LVM on another, dracut's initrd (mkimage --layout
                      raid-lvm)
  raid-nmbl-direct    nmbl's UKI -> menu -> dracut's initrd on nmbl's kernel
  raid-nmbl-kexec     nmbl's UKI (nmbl.boot=kexec) -> menu -> kexec

And the first machine after a kernel update from a Debian package, made
once per machine image (updated_disk(): nmbl started as the others here,
the machine's key made, the package of the test's second kernel installed,
Debian's hooks and nmbl's run as on a user's machine, nothing else
changed; the new kernel is the default):

  debian-updated-grub         Debian's GRUB -> the new kernel + its initrd
  debian-updated-nmbl-direct  the UKI nmbl's hook built around the new
                              kernel -> menu -> switch root

Their ratios are to GRUB on the same machine (debian-grub, lvm-grub,
raid-grub).

QEMU's translated-code cache is kept small (--tb-size, 32 MiB), so that
QEMU drops its translations now and then.  With its default (1 GiB), the
code a first system ran stays translated across a kexec, and every store
the second kernel makes to one of those pages takes QEMU's
self-modifying-code path until that page's translations are gone.  In
turns, 3 runs each, medians: nmbl's kexec'd kernel reached the target's
marker 36.4 s after its start with QEMU's default cache, 18.6 s with
32 MiB, like the same kernel started by the firmware (floor: 18.1 s);
floor and GRUB reached their markers 0.8 s and 0.9 s sooner with the small
cache, nothing lost.  Real machines and KVM have no such cost.
--tb-size 0 keeps QEMU's default.

Prints a table of medians (min-max), ratios to GRUB, when the menu was
reached (its entry taken: GRUB's and grub-emu's "Booting `...'"), sizes,
nmbl's memory in use at its menu (and, in one more boot, in a 256 MiB VM),
and where each variant's seconds went, step by step from power-on: the
firmware until it loads the program ("BdsDxe: loading"), the image's load
(and, under Secure Boot, check) until "BdsDxe: starting"; then for GRUB its
start, its menu, its hand-over (loading the kernel and initrd, the
kernel's decompression) until the target's kernel starts; for nmbl the
stub and the kernel's decompression until nmbl's kernel starts, its
kernel until init (the initramfs's unpacking within it, by the kernel's
log), nmbl-init's module loading and its wait for the ESP's disk, the
status and grub-emu's start, grub.cfg read to the menu, the hand-over.
Times of console lines are when they came (VM.arrived_at); inside nmbl's
kernel, its own clock, placed by its status line.  Writes it all as JSON
(default BUILD/bench/results.json) and the steps as a picture beside it
(results.svg: one bar per variant, a colour per step; hover a step for
its seconds).
"vs grub" is the ratio of the medians; "paired" the median of each round's
own ratio (a variant's time over GRUB's in the same round), which a slow
spell of the machine moves less.  Times depend on the machine: compare
ratios from one run of this program.
"""

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "boot"))
sys.path.insert(0, os.path.join(HERE, "..", "system"))

import fixture  # noqa: E402
import machine  # noqa: E402
import netserve  # noqa: E402
from fixture import (BOOT_TIMEOUT, BOOT_UUID, NMBL_BOOT_ID, ROOT_UUID, TARGET_KERNEL,  # noqa: E402
                     TARGET_UP, VM, build_path)

# Up to the end of each line: the console may have delivered half of it yet.
NMBL_STARTUP = r"nmbl: startup: kernel ([\d.]+) s, userspace ([\d.]+) s so far\r?\n"
NMBL_MEMORY = r"nmbl: memory-used: (\d+) KiB\r?\n"
TARGET_UPTIME = r"NMBL-TARGET-UPTIME ([\d.]+)\r?\n"
# What the console says at each step, in the order of a boot; the
# benchmark takes the time each line came (VM.arrived_at), and nmbl's own
# clock for what happens inside its kernel.
FIRMWARE_LOADING = rb"BdsDxe: loading Boot[^\r\n]*\r?\n"
FIRMWARE_STARTING = rb"BdsDxe: starting Boot[^\r\n]*\r?\n"
LOADER_UP = rb"Welcome to GRUB!"            # GRUB's, and grub-emu's: the menu program runs
LOADER_MENU = rb"Booting `[^\r\n]*'"       # the menu reached, its entry taken
NMBL_UNPACKED = rb"nmbl: initramfs-unpacked: ([\d.]+)-([\d.]+) s\r?\n"
NMBL_INIT_STEPS = (rb"nmbl-init: startup: modules loaded at ([\d.]+) s, "
                   rb"(the ESP's disk|the network) at ([\d.]+) s")
# nmbl's memory in use at its menu is also taken in a VM as small as a
# small machine (one boot: it changes little from boot to boot).  The
# timed boots have QEMU's 1 GiB: GRUB from Debian's package runs out of
# memory loading the target's kernel and initrd in 256 MiB.
SMALL_MEMORY_MIB = 256
# nmbl's own kernel parameters (NMBL_CMDLINE, dracut/uki.mk): the entry may
# switch root; the floor UKI has the same line (BENCH_CMDLINE,
# test/bench/bench.mk).
OPTIONS = f"root=UUID={ROOT_UUID} ro console=tty0 console=ttyS0,115200 quiet"

# efi: the program on the ESP; initrd: the initramfs it starts first.
TARGET_INITRD = "test/target-initrd-dracut.img"
# Debian's GRUB for network boots (grub-efi-amd64-bin), whose built-in
# $prefix is /grub on the server it was loaded from.
GRUB_NET = "/usr/lib/grub/x86_64-efi/monolithic/grubnetx64.efi"
NMBL_INITRD = "nmbl-initrd.img"
VARIANTS = {
    "floor": dict(efi="test/floor.efi", initrd=TARGET_INITRD, secure_boot=False, nmbl=None),
    "kexec-floor": dict(efi="test/kexec-floor.efi", initrd="test/kexec-floor.img",
                        secure_boot=False, nmbl=None),
    "grub": dict(efi="test/grubx64.efi", initrd=TARGET_INITRD, secure_boot=False, nmbl=None),
    "nmbl-kexec": dict(efi="test/nmbl-kexec.efi", initrd=NMBL_INITRD, secure_boot=False,
                       nmbl="kexec"),
    "nmbl-direct": dict(efi="nmbl.efi", initrd=NMBL_INITRD, secure_boot=False, nmbl="direct"),
    "nmbl-direct-sb": dict(efi="nmbl.efi", initrd=NMBL_INITRD, secure_boot=True, nmbl="direct"),
    "grub-net": dict(efi=GRUB_NET, initrd=TARGET_INITRD, secure_boot=False, nmbl=None,
                     net="tftp", base="grub-net"),
    "nmbl-net-tftp": dict(efi="nmbl-net.efi", initrd="nmbl-net-initrd.img", secure_boot=False,
                          nmbl="kexec", net="tftp", base="grub-net"),
    "nmbl-net-http": dict(efi="nmbl-net.efi", initrd="nmbl-net-initrd.img", secure_boot=False,
                          nmbl="kexec", net="http", base="grub-net"),
}
# On a machine of test/system: MACHINE's disk, EFI the program started
# (DEBIAN_GRUB: the one grub-install put on the machine's ESP), BASE the
# variant the ratios are to.
DEBIAN_GRUB = "::/EFI/debian/grubx64.efi"
# Where updated_disk() leaves the UKI nmbl's hook built around the new kernel.
UPDATED_UKI = "::/EFI/debian/nmbl-updated.efi"
MACHINE_VARIANTS = {
    "debian-grub": dict(machine="system", efi=DEBIAN_GRUB, nmbl=None, base="debian-grub"),
    "debian-nmbl-direct": dict(machine="system", efi="nmbl.efi", nmbl="direct",
                               base="debian-grub"),
    "debian-nmbl-kexec": dict(machine="system", efi="test/nmbl-kexec.efi", nmbl="kexec",
                              base="debian-grub"),
    "lvm-grub": dict(machine="stacked", efi=DEBIAN_GRUB, nmbl=None, base="lvm-grub"),
    "lvm-nmbl-direct": dict(machine="stacked", efi="nmbl.efi", nmbl="direct", base="lvm-grub"),
    "lvm-nmbl-kexec": dict(machine="stacked", efi="test/nmbl-kexec.efi", nmbl="kexec",
                           base="lvm-grub"),
    "raid-grub": dict(machine="raid", efi=DEBIAN_GRUB, nmbl=None, base="raid-grub"),
    "raid-nmbl-direct": dict(machine="raid", efi="nmbl.efi", nmbl="direct", base="raid-grub"),
    "raid-nmbl-kexec": dict(machine="raid", efi="test/nmbl-kexec.efi", nmbl="kexec",
                            base="raid-grub"),
    "debian-updated-grub": dict(machine="system", updated=True, efi=DEBIAN_GRUB, nmbl=None,
                                base="debian-updated-grub"),
    "debian-updated-nmbl-direct": dict(machine="system", updated=True, efi=UPDATED_UKI,
                                       nmbl="direct", base="debian-updated-grub"),
}
ALL_VARIANTS = {**VARIANTS, **MACHINE_VARIANTS}
PASSPHRASE_PROMPT = r"Please unlock disk \S+: "


def grub_cfg():
    return f"""set default=0
set timeout=0
menuentry 'Debian GNU/Linux' {{
	search --no-floppy --fs-uuid --set=root {BOOT_UUID}
	linux /vmlinuz {OPTIONS}
	initrd /initrd.img
}}
"""


def net_tree():
    """The network variants' server: each loader, with the same grub.cfg
    for this machine's MAC where it reads it; the kernel and initrd at the
    root; and a disk with the target's root only."""
    top = build_path("bench", "net")
    shutil.rmtree(top, ignore_errors=True)
    per_mac = "grub.cfg-01-" + netserve.MAC.replace(":", "-")
    for loader, d in (("nmbl-net.efi", "nmbl"), (GRUB_NET, "grub")):
        os.makedirs(os.path.join(top, d))
        shutil.copy(build_path(loader), os.path.join(top, d, os.path.basename(loader)))
        with open(os.path.join(top, d, per_mac), "w") as f:
            f.write(grub_cfg().replace(
                f"\tsearch --no-floppy --fs-uuid --set=root {BOOT_UUID}\n", ""))
        # HTTP Boot reads no per-MAC file: GRUB searches only on TFTP.
        shutil.copy(os.path.join(top, d, per_mac), os.path.join(top, d, "grub.cfg"))
    shutil.copy(build_path("test", "vmlinuz-test"), os.path.join(top, "vmlinuz"))
    shutil.copy(build_path(TARGET_INITRD), os.path.join(top, "initrd.img"))
    image = os.path.join(top, "root.img")
    fixture.mkdisk.build(image, None, root=build_path("test", "target-root"),
                         root_uuid=ROOT_UUID)
    return top, image


def net_args(variant, top, port):
    """QEMU's arguments for a network variant: the firmware PXE-boots the
    loader from TFTP, or HTTP-boots it from the test's server."""
    loader = "nmbl/nmbl-net.efi" if variant["nmbl"] else "grub/grubnetx64.efi"
    if variant["net"] == "tftp":
        return netserve.net_args({}, tftp=top, bootfile=loader)
    return netserve.net_args({80: port}, bootfile=f"http://{netserve.HTTP}/{loader}")


def disk(name, efi):
    files = {"vmlinuz": build_path("test", "vmlinuz-test"),
             "initrd.img": build_path("test", "target-initrd-dracut.img")}
    return fixture.make_disk(f"bench-{name}", grub_cfg(), files, uki=efi)


def updated_disk():
    """The first machine's disk after a kernel update from a package, made
    once per image of the machine: one start (nmbl from the removable path,
    Secure Boot off as for every run here), the machine's key made
    (nmbl-key create), the second kernel's package installed (Debian's
    hooks, then nmbl's, which builds its UKI around the new kernel), that
    UKI put where UPDATED_UKI names it, and the machine shut down."""
    m = machine.info("system")
    image = build_path("bench", "debian-updated.img")
    source = build_path("system", "disk.img")
    if os.path.exists(image) and os.path.getmtime(image) > os.path.getmtime(source):
        return image
    other = m["other_kernel"]
    work = machine_disk("debian-updated-work", dict(machine="system", efi="nmbl.efi"))
    print("bench: updating the first machine's kernel (one start, a few minutes)", flush=True)
    with VM(work, secure_boot=False, log_file=build_path("bench", "debian-updated.log")) as vm:
        vm.wait_for(machine.SYSTEM_UP, timeout=machine.BOOT_TIMEOUT)
        sh = machine.Shell(vm, m["root_password"])
        sh.check("nmbl-key create 2>&1")
        sh.check(f"DEBIAN_FRONTEND=noninteractive apt-get install -y "
                 f"{m['payload']}/linux-image-{other}_*.deb 2>&1", timeout=900)
        uki = f"/var/lib/nmbl/{other}/nmbl.efi"
        esp_path = UPDATED_UKI[2:]
        sh.check(f"nmbl inspect {uki} | grep -F '{other}' && cp {uki} /boot/efi{esp_path}")
        sh.reboot()
    os.replace(work, image)
    return image


def machine_disk(name, variant):
    """A copy of the machine's disk (after the update: updated_disk()) whose
    ESP starts VARIANT's program from the removable path, as firmware with
    no boot entries does (mtools: no mount)."""
    m = machine.info(variant["machine"])
    esp = next(p for p in m["layout"]["partitions"] if p["role"] == "esp")
    image = build_path("bench", f"{name}.img")
    source = (updated_disk() if variant.get("updated") else
              build_path(variant["machine"], "disk.img"))
    subprocess.run(["cp", "--sparse=always", source, image], check=True)
    fat = f"{image}@@{esp['start']}"
    env = dict(os.environ, MTOOLS_SKIP_CHECK="1")
    with tempfile.TemporaryDirectory() as tmp:
        program = variant["efi"]
        if program.startswith("::"):
            subprocess.run(["mcopy", "-n", "-i", fat, program, f"{tmp}/program.efi"], check=True,
                           env=env, stdin=subprocess.DEVNULL)
            program = f"{tmp}/program.efi"
        else:
            program = build_path(program)
        subprocess.run(["mmd", "-D", "s", "-i", fat, "::/EFI/BOOT"], env=env,
                       stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(["mcopy", "-o", "-i", fat, program, "::/EFI/BOOT/BOOTX64.EFI"],
                       check=True, env=env, stdin=subprocess.DEVNULL)
    return image


def arrival(vm, pattern, after=0):
    """(seconds from power-on when the console's first line matching
    PATTERN from byte AFTER on had come, the match); (None, None) if none."""
    m = re.compile(pattern).search(vm.raw, after)
    return (vm.arrived_at(m.end() - 1), m) if m else (None, None)


def timeline(vm, nmbl, r, target_start=None):
    """Where a boot's seconds went, from power-on, in order: [(step, s)],
    and when its steps had ended.  The firmware's steps and the loader's
    by when their lines came; inside nmbl's kernel by its own clock,
    placed by when its status line came (its kernel's start: that line's
    time less the uptime it printed).  TARGET_START, when known, is when
    the target's kernel started (a kexec's or GRUB's hand-over; None for a
    switch of root, or a machine whose start does not say).  Into R: when
    the menu was reached (its entry taken), from power-on ("menu_wall")
    and for nmbl from its kernel's start ("menu")."""
    marks = []
    loading, _ = arrival(vm, FIRMWARE_LOADING)
    starting, started = arrival(vm, FIRMWARE_STARTING)
    marks += [("firmware", loading), ("image load", starting)]
    after = started.end() if started else 0
    up, _ = arrival(vm, LOADER_UP, after)
    menu, _ = arrival(vm, LOADER_MENU, after)
    if menu is not None:
        r["menu_wall"] = menu
    if nmbl:
        status, m = arrival(vm, NMBL_STARTUP.encode(), after)
        kernel_start = status - float(m.group(1)) - float(m.group(2))
        on_kernel = lambda t: kernel_start + float(t)  # noqa: E731
        _, unpacked = arrival(vm, NMBL_UNPACKED, after)
        _, steps = arrival(vm, NMBL_INIT_STEPS, after)
        marks.append(("stub, kernel decompression", kernel_start))
        if unpacked:
            marks += [("kernel", on_kernel(unpacked.group(1))),
                      ("initramfs unpacking", on_kernel(unpacked.group(2)))]
        marks.append(("kernel" if not unpacked else "kernel, after unpacking",
                      on_kernel(m.group(1))))
        if steps:
            marks += [("modules", on_kernel(steps.group(1))),
                      (steps.group(2).decode(), on_kernel(steps.group(3)))]
        marks += [("status, grub-emu start", up), ("grub.cfg read, menu", menu)]
        if menu is not None:
            r["menu"] = menu - kernel_start
    elif up is not None:
        marks += [("GRUB start", up), ("grub.cfg read, menu", menu)]
    if target_start is not None:
        marks.append(("hand-over", target_start))
    # Drop what this boot did not show, and name each step by its end.
    steps, at = [], 0.0
    for name, t in marks:
        if t is None:
            continue
        steps.append((name, t - at))
        at = t
    return steps, at


def nmbl_memory(vm, r):
    """Into R: nmbl's memory in use at its menu, from its status."""
    vm.wait_for(NMBL_STARTUP, timeout=BOOT_TIMEOUT)
    r["memory_kib"] = int(vm.wait_for(NMBL_MEMORY, timeout=60).group(1))


def run_machine_once(name, variant, image, index, tb_size=None):
    """One start of a real machine, power-on to multi-user.target."""
    log = build_path("bench", f"{name}-{index}.log")
    m = machine.info(variant["machine"])
    r = {}
    # The machine's other disks as mkimage left them: the boot writes to
    # none of them (snapshot).
    more = [(disk, "virtio") for disk in machine.disk_images(variant["machine"])[1:]]
    # And its TPM as it left it, a copy for each start.
    tpm = None
    if machine.tpm_state(variant["machine"]):
        tpm = build_path("bench", f"{name}-{index}-tpm")
        shutil.rmtree(tpm, ignore_errors=True)
        shutil.copytree(machine.tpm_state(variant["machine"]), tpm)
    with VM(image, snapshot=True, secure_boot=False, log_file=log, tb_size=tb_size,
            disks=more, tpm=tpm) as vm:
        if variant["nmbl"]:
            nmbl_memory(vm, r)
        if "passphrase" in m:
            vm.wait_for(PASSPHRASE_PROMPT, timeout=machine.BOOT_TIMEOUT, clean=True)
            vm.send_raw(m["passphrase"] + "\r")
        up = vm.wait_for(machine.SYSTEM_UP, timeout=machine.BOOT_TIMEOUT)
        r["target"] = vm.elapsed()
        log_text = vm.clean_log()
        steps, at = timeline(vm, variant["nmbl"], r)
    root = m["layout"].get("root_device") or f"UUID={machine.root_uuid()}"
    kver = m["other_kernel"] if variant.get("updated") else m["kernel"]
    want = (f"BOOT_IMAGE=/boot/vmlinuz-{kver} " if variant["machine"] == "system" else
            f"BOOT_IMAGE=/vmlinuz-{kver} ") + \
        f"root={root} ro " + (m["cmdline"] + " " if "cmdline" in m else "") + \
        "console=tty0 console=ttyS0,115200 quiet"
    if up.group(1) != kver or up.group(3).strip() != want:
        raise SystemExit(f"bench: {name} run {index}: booted {up.group(1)} with "
                         f"{up.group(3)!r} (see {log})")
    if variant["nmbl"]:
        kexec = "Booting by kexec" in log_text
        if kexec != (variant["nmbl"] == "kexec"):
            raise SystemExit(f"bench: {name} run {index} booted "
                             f"{'by kexec' if kexec else 'directly'} (see {log})")
    r["steps"] = dict(steps + [("to multi-user", r["target"] - at)])
    return r


def run_once(name, variant, image, index, tb_size=None, qemu_args=()):
    """One boot's times (seconds) and what nmbl reported of itself."""
    log = build_path("bench", f"{name}-{index}.log")
    r = {}
    with VM(image, snapshot=True, secure_boot=variant["secure_boot"], log_file=log,
            tb_size=tb_size, qemu_args=qemu_args) as vm:
        if variant["nmbl"]:
            nmbl_id = vm.wait_for(NMBL_BOOT_ID, timeout=BOOT_TIMEOUT).group(1)
            nmbl_memory(vm, r)
        up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        r["target"] = vm.elapsed()
        r["target_uptime"] = float(vm.wait_for(TARGET_UPTIME, timeout=60).group(1))
        kernel = vm.wait_for(TARGET_KERNEL, timeout=60)
        vm.wait_exit(timeout=60)
        direct = variant["nmbl"] == "direct" and kernel.group(1) == nmbl_id
        # The target's kernel started its uptime before its line; after a
        # switch of root it is nmbl's own kernel.
        target_start = None if direct else r["target"] - r["target_uptime"]
        steps, at = timeline(vm, variant["nmbl"], r, target_start)
    if not up.group(2).endswith(OPTIONS):
        raise SystemExit(f"bench: {name} run {index}: the target's command line is "
                         f"{up.group(2)!r} (see {log})")
    if variant["nmbl"]:
        if direct != (variant["nmbl"] == "direct"):
            raise SystemExit(f"bench: {name} run {index} booted "
                             f"{'directly' if direct else 'by kexec'} (see {log})")
    r["steps"] = dict(steps + [("switch root, target up" if direct else "target up",
                                r["target"] - at)])
    return r


def small_memory(image, tb_size=None):
    """nmbl's memory in use at its menu (KiB) in a VM of SMALL_MEMORY_MIB,
    booting the entry to the end."""
    log = build_path("bench", "small-memory.log")
    with VM(image, snapshot=True, secure_boot=False, log_file=log, tb_size=tb_size,
            memory=SMALL_MEMORY_MIB) as vm:
        used = int(vm.wait_for(NMBL_MEMORY, timeout=BOOT_TIMEOUT).group(1))
        vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=60)
    return used


def summary(values):
    return {"median": round(statistics.median(values), 2), "min": round(min(values), 2),
            "max": round(max(values), 2), "runs": [round(v, 2) for v in values]}


def unpacked_size(data):
    """Bytes of an initramfs (DATA) once decompressed."""
    return len(fixture.initramfs_cpio(data))


def uki_initrd(efi):
    """The initramfs a UKI holds (its .initrd section); None for a program
    that holds none."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "initrd")
        p = subprocess.run(["objcopy", "-O", "binary", "--only-section=.initrd", efi, out],
                           capture_output=True)
        if p.returncode != 0 or not os.path.exists(out) or not os.path.getsize(out):
            return None
        with open(out, "rb") as f:
            return f.read()


def sizes(names):
    out = {}
    for n in names:
        if n in MACHINE_VARIANTS:
            continue
        v = VARIANTS[n]
        efi = build_path(v["efi"])
        initrd = uki_initrd(efi)
        if initrd is None:
            with open(build_path(v["initrd"]), "rb") as f:
                initrd = f.read()
        out[n] = {"efi_bytes": os.path.getsize(efi),
                  "initramfs_bytes": len(initrd),
                  "initramfs_unpacked_bytes": unpacked_size(initrd)}
    return out


def mib(n):
    return f"{n / 2**20:.1f}"


def report(names, results, size):
    print(f"\n{'variant':<26} {'to target, s':>22} {'vs grub':>8} {'paired':>7} "
          f"{'menu, s':>8} {'nmbl menu':>10} {'EFI MiB':>8} {'initramfs MiB':>14} "
          f"{'used MiB':>9}")
    for n in names:
        r, s = results[n], size.get(n)
        t = r["target"]
        base = ALL_VARIANTS[n].get("base", "grub")
        ratio = f"{t['median'] / results[base]['target']['median']:.2f}" \
            if base in results else "-"
        paired = f"{r['vs_grub_paired']['median']:.2f}" if "vs_grub_paired" in r else "-"
        menu_wall = f"{r['menu_wall']['median']:.1f}" if "menu_wall" in r else "-"
        menu = f"{r['menu']['median']:.2f}" if "menu" in r else "-"
        mem = f"{r['memory_kib']['median'] / 1024:.1f}" if "memory_kib" in r else "-"
        efi = f"{s['efi_bytes'] / 2**20:.2f}" if s else "-"
        initramfs = (mib(s['initramfs_bytes']) + '/' + mib(s['initramfs_unpacked_bytes'])
                     if s else "-")
        print(f"{n:<26} {t['median']:>7.1f} ({t['min']:.1f}-{t['max']:.1f}) {ratio:>8} "
              f"{paired:>7} {menu_wall:>8} {menu:>10} {efi:>8} {initramfs:>14} {mem:>9}")
    print("\nmenu: when the menu was reached (its entry taken), from power-on; nmbl menu: "
          "the same from nmbl's kernel's start.\nWhere the seconds went (medians of each "
          "step, from power-on):")
    for n in names:
        parts = ", ".join(f"{k} {v['median']:.2f}" for k, v in results[n]["steps"].items())
        print(f"  {n}: {parts}")


# The timeline's colours: what runs in each step.
STEP_COLOURS = (("firmware", "#9e9e9e"), ("image load", "#bdbdbd"),
                ("stub", "#ffb74d"), ("GRUB", "#e57373"), ("grub.cfg", "#ef9a9a"),
                ("kernel", "#64b5f6"), ("initramfs", "#1976d2"), ("modules", "#81c784"),
                ("ESP", "#a5d6a7"), ("network", "#a5d6a7"), ("status", "#4db6ac"), ("hand-over", "#ba68c8"),
                ("switch root", "#ce93d8"), ("target", "#ce93d8"), ("multi-user", "#ce93d8"))


def step_colour(step):
    return next((c for key, c in STEP_COLOURS if key in step), "#e0e0e0")


def timeline_svg(names, results, path):
    """An SVG picture of where each variant's seconds went: one bar per
    variant, its steps (medians) side by side from power-on."""
    def esc(text):
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    longest = max(sum(v["median"] for v in results[n]["steps"].values()) for n in names)
    scale = 900 / max(longest, 1)
    row, left, top = 34, 230, 30
    height = top + row * len(names) + 60
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + 960}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="16" font-size="13">Seconds from power-on (medians of each '
           f'step), QEMU under TCG</text>']
    for i, n in enumerate(names):
        y = top + i * row
        out.append(f'<text x="{left - 8}" y="{y + 17}" text-anchor="end">{esc(n)}</text>')
        x = left
        for step, v in results[n]["steps"].items():
            w = v["median"] * scale
            out.append(f'<rect x="{x:.1f}" y="{y + 4}" width="{max(w, 0.5):.1f}" height="20" '
                       f'fill="{step_colour(step)}" stroke="white" stroke-width="0.5">'
                       f'<title>{esc(step)}: {v["median"]:.2f} s</title></rect>')
            if w > 34:
                out.append(f'<text x="{x + 3:.1f}" y="{y + 18}" font-size="9">'
                           f'{v["median"]:.1f}</text>')
            x += w
        out.append(f'<text x="{x + 4:.1f}" y="{y + 18}">'
                   f'{results[n]["target"]["median"]:.1f} s</text>')
    axis = top + row * len(names) + 8
    for s in range(0, int(longest) + 2, 2):
        x = left + s * scale
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{axis}" stroke="#eee"/>')
        out.append(f'<text x="{x:.1f}" y="{axis + 12}" text-anchor="middle">{s}</text>')
    legend_x = left
    seen = []
    for n in names:
        for step in results[n]["steps"]:
            if step not in seen:
                seen.append(step)
    for j, step in enumerate(seen):
        x, y = legend_x + (j % 5) * 190, axis + 24 + (j // 5) * 14
        out.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" '
                   f'fill="{step_colour(step)}"/><text x="{x + 14}" y="{y}">{esc(step)}</text>')
    out.append("</svg>")
    height_needed = axis + 24 + (len(seen) // 5 + 1) * 14
    out[0] = out[0].replace(f'height="{height}"', f'height="{height_needed}"')
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("NMBL_BUILD", "build"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--variant", action="append", choices=list(ALL_VARIANTS))
    ap.add_argument("--tb-size", type=int, default=32, metavar="MIB",
                    help="QEMU's translated-code cache (default %(default)s; 0: QEMU's own)")
    ap.add_argument("--seed", type=int, default=1,
                    help="the shuffle of each round's order (default %(default)s)")
    ap.add_argument("--out", help="JSON results (default BUILD/bench/results.json)")
    ap.add_argument("--uki", metavar="FILE",
                    help="nmbl's UKI for the variants that start the build's (nmbl-direct, "
                    "nmbl-direct-sb, debian-nmbl-direct, ...), to compare another build's")
    args = ap.parse_args()
    if args.uki:
        for v in ALL_VARIANTS.values():
            if v["efi"] == "nmbl.efi":
                v["efi"] = os.path.abspath(args.uki)
    fixture.BUILD = args.build
    tb_size = args.tb_size or None
    names = args.variant or list(ALL_VARIANTS)
    os.makedirs(build_path("bench"), exist_ok=True)
    # Variants with the same program on the ESP share one image; those
    # from the network, one server and disk.
    by_efi = {}
    images = {}
    net, server, args_of = None, None, {}
    for n in names:
        if n in MACHINE_VARIANTS:
            images[n] = machine_disk(n, MACHINE_VARIANTS[n])
            continue
        if "net" in VARIANTS[n]:
            if net is None:
                net = net_tree()
                server = netserve.http_server(net[0])
            images[n] = net[1]
            args_of[n] = net_args(VARIANTS[n], net[0], server.server_address[1])
            continue
        efi = VARIANTS[n]["efi"]
        if efi not in by_efi:
            by_efi[efi] = disk(n, efi)
        images[n] = by_efi[efi]
    runs = {n: [] for n in names}
    for index in range(args.runs):
        for n in random.Random(args.seed * 1000 + index).sample(names, len(names)):
            if n in MACHINE_VARIANTS:
                r = run_machine_once(n, MACHINE_VARIANTS[n], images[n], index, tb_size)
            else:
                r = run_once(n, VARIANTS[n], images[n], index, tb_size, args_of.get(n, ()))
            runs[n].append(r)
            print(f"bench: run {index + 1}/{args.runs} {n}: target {r['target']:.1f} s",
                  flush=True)
    results = {}
    for n in names:
        rs = runs[n]
        results[n] = {k: summary([r[k] for r in rs if k in r])
                      for k in ("target", "menu", "menu_wall", "memory_kib", "target_uptime")
                      if any(k in r for r in rs)}
        base = ALL_VARIANTS[n].get("base", "grub")
        if base in runs:
            results[n]["vs_grub_paired"] = summary(
                [r["target"] / g["target"] for r, g in zip(rs, runs[base])])
        order = []
        for r in rs:
            order += [k for k in r["steps"] if k not in order]
        results[n]["steps"] = {k: summary([r["steps"][k] for r in rs if k in r["steps"]])
                               for k in order}
    size = sizes(names)
    small = None
    if "nmbl-direct" in names:
        small = small_memory(images["nmbl-direct"], tb_size)
    print(f"\nQEMU under TCG, translated-code cache: "
          f"{f'{tb_size} MiB' if tb_size else 'QEMU default'}")
    report(names, results, size)
    if small is not None:
        print(f"\nnmbl's memory in use at its menu in a {SMALL_MEMORY_MIB} MiB VM: "
              f"{small / 1024:.1f} MiB")
    out = args.out or build_path("bench", "results.json")
    picture = os.path.splitext(out)[0] + ".svg"
    timeline_svg(names, results, picture)
    with open(out, "w") as f:
        json.dump({"runs": args.runs, "seed": args.seed, "tb_size_mib": tb_size,
                   "variants": results, "sizes": size,
                   "small_vm_memory_used_kib": small}, f, indent=1)
    for n in names:
        if n in MACHINE_VARIANTS:
            os.unlink(images[n])
    if server:
        server.shutdown()
    print(f"\n{out}\n{picture}")


if __name__ == "__main__":
    main()
