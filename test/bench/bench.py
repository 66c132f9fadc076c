#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""nmbl's boot times, measured in VMs (QEMU under TCG with OVMF).

    test/bench/bench.py [--build DIR] [--runs N] [--variant NAME]...

Each variant boots the same disk layout (the same grub.cfg, timeout 0, the
same /boot and root) from power-on to the target's marker line, N times,
the variants taking turns run by run so that a slow spell of the machine
falls on all of them.  Every run is checked: a direct boot must keep nmbl's
kernel (the same boot id), a kexec must not.  Prints a table of medians
(min-max) and writes BUILD/bench/results.json.

Variants:
  nmbl-direct  firmware -> nmbl UKI -> menu -> switch root
  nmbl-kexec   firmware -> nmbl UKI (nmbl.boot=kexec) -> menu -> kexec -> target
"""

import argparse
import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "boot"))

import fixture  # noqa: E402
from fixture import BOOT_TIMEOUT, BOOT_UUID, ROOT_UUID, TARGET_UP, VM, build_path  # noqa: E402

# Up to the end of the line: the console may have delivered half of it yet.
NMBL_BOOT_ID = r"nmbl: boot-id: (\S+)\r?\n"
TARGET_KERNEL = r"NMBL-TARGET-KERNEL boot-id=(\S+) "
# The same kernel parameters as nmbl's own (Makefile NMBL_CMDLINE).
OPTIONS = f"root=UUID={ROOT_UUID} ro console=tty0 console=ttyS0,115200 quiet"

VARIANTS = {
    "nmbl-direct": dict(uki="nmbl.efi", secure_boot=True, direct=True),
    "nmbl-kexec": dict(uki="test/nmbl-kexec.efi", secure_boot=True, direct=False),
}


def grub_cfg():
    return f"""set default=0
set timeout=0
menuentry 'Debian GNU/Linux' {{
	search --no-floppy --fs-uuid --set=root {BOOT_UUID}
	linux /vmlinuz {OPTIONS}
	initrd /initrd.img
}}
"""


def disk(name, uki):
    files = {"vmlinuz": build_path("test", "vmlinuz-test"),
             "initrd.img": build_path("test", "target-initrd.img")}
    return fixture.make_disk(f"bench-{name}", grub_cfg(), files, uki=uki)


def run_once(name, variant, image, index):
    """Seconds from power-on to nmbl's status (the menu is next) and to the
    target's marker."""
    log = build_path("bench", f"{name}-{index}.log")
    with VM(image, snapshot=True, secure_boot=variant["secure_boot"], log_file=log) as vm:
        nmbl_id = vm.wait_for(NMBL_BOOT_ID, timeout=BOOT_TIMEOUT).group(1)
        menu = vm.elapsed()
        vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        target = vm.elapsed()
        kernel = vm.wait_for(TARGET_KERNEL, timeout=60)
        vm.wait_exit(timeout=60)
    same = kernel.group(1) == nmbl_id
    if same != variant["direct"]:
        raise SystemExit(f"bench: {name} run {index} booted {'directly' if same else 'by kexec'}"
                         f" (see {log})")
    return {"menu": menu, "target": target}


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": values}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("NMBL_BUILD", "build"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--variant", action="append", choices=sorted(VARIANTS))
    args = ap.parse_args()
    fixture.BUILD = args.build
    names = args.variant or list(VARIANTS)
    os.makedirs(build_path("bench"), exist_ok=True)
    images = {n: disk(n, VARIANTS[n]["uki"]) for n in names}
    times = {n: {"menu": [], "target": []} for n in names}
    for index in range(args.runs):
        for n in names:
            t = run_once(n, VARIANTS[n], images[n], index)
            for k, v in t.items():
                times[n][k].append(round(v, 2))
            print(f"bench: run {index + 1}/{args.runs} {n}: menu {t['menu']:.1f} s, "
                  f"target {t['target']:.1f} s", flush=True)
    results = {n: {k: summary(v) for k, v in times[n].items()} for n in names}
    base = results.get("nmbl-kexec", {}).get("target", {}).get("median")
    print(f"\n{'variant':<14} {'to target, s (min-max)':>26} {'to menu, s':>12} {'vs kexec':>9}")
    for n in names:
        r = results[n]
        ratio = f"{r['target']['median'] / base:.2f}" if base else "-"
        print(f"{n:<14} {r['target']['median']:>10.1f} ({r['target']['min']:.1f}-"
              f"{r['target']['max']:.1f}) {r['menu']['median']:>12.1f} {ratio:>9}")
    out = build_path("bench", "results.json")
    with open(out, "w") as f:
        json.dump({"runs": args.runs, "variants": results}, f, indent=1)
    print(f"\n{out}")


if __name__ == "__main__":
    main()
