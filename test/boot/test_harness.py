# SPDX-License-Identifier: GPL-3.0-or-later
"""The VM harness itself: disks as laid out, and Secure Boot really enforced
(an unsigned EFI program is refused), or no VM test proves anything; the
phases it measures and the timeouts it derives from them; disks made once."""

import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def test_vm_harness_enforces_secure_boot():
    p = subprocess.run([sys.executable, os.path.join(HERE, "..", "vm", "selftest.py")],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0 and "vm-selftest: ok" in p.stdout, p.stdout + p.stderr


def test_phases_end_where_the_console_says_and_timeouts_follow_them():
    """A boot's phases end at their markers, even split across reads, a
    phase never seen counted in the next; the budget of a phase follows
    what the build recorded of it, and never falls below its floor."""
    from fixture import vm
    machine = vm.VM("unused.img")
    machine._started = time.monotonic()
    chunks = ["BdsDxe: loading Boot0002\r\nBdsDxe: star", "ting Boot0002 \"UEFI Misc\"\r\n",
              "EFI stub: UEFI Secure Boot is enabled.\r\nnmbl-init: watchdog armed (iTCO_wdt)\r\n"
              "nmbl: secure-boot: enabled\r\n",
              "The highlighted entry will be executed automatically in 3s.",
              "NMBL-TARGET-UP release=6.1 cmdline=x\r\nNMBL-SYSTEM-UP release=6.1"]
    for text in chunks:
        machine._note_phases(text)
    assert list(machine.phases) == ["firmware", "kernel", "menu", "target"], machine.phases
    # GRUB's own boot: no nmbl-init, its time is the menu's.
    grub = vm.VM("unused.img")
    grub._started = time.monotonic()
    grub._note_phases("BdsDxe: starting Boot0001\r\nWelcome to GRUB!\r\nexecuted automatically in")
    assert list(grub.phases) == ["firmware", "menu"], grub.phases

    old = os.environ.get("NMBL_BUILD")
    with tempfile.TemporaryDirectory() as build:
        os.environ["NMBL_BUILD"] = build
        try:
            floor = vm.PHASE_ROOM * vm.PHASE_SECONDS["target"]
            assert vm.phase_budget("target") == floor
            vm.record_phases([{"target": 4.0}] * 3)
            assert vm.phase_budget("target") == floor, "a fast machine lowered the floor"
            vm.record_phases([{"target": 100.0}] * 4)
            assert vm.phase_budget("target") == vm.PHASE_ROOM * 100.0
            assert vm.phase_budget("firmware", "target") == \
                vm.PHASE_ROOM * (vm.PHASE_SECONDS["firmware"] + 100.0)
        finally:
            if old is None:
                del os.environ["NMBL_BUILD"]
            else:
                os.environ["NMBL_BUILD"] = old


def test_a_disk_is_made_once_for_what_it_is_made_of():
    """The same recipe keeps the image; a machine's write to it, or a
    changed grub.cfg, makes it anew."""
    from fixture import make_disk
    cfg = "set timeout=1\n"
    image = make_disk("harness-made-once", cfg, {})
    first = os.stat(image).st_mtime_ns
    assert make_disk("harness-made-once", cfg, {}) == image
    assert os.stat(image).st_mtime_ns == first, "the same disk was made again"
    with open(image, "r+b") as f:
        f.seek(4096)
        f.write(b"written by a machine")
    make_disk("harness-made-once", cfg, {})
    with open(image, "rb") as f:
        f.seek(4096)
        assert f.read(20) != b"written by a machine", "a written disk was kept"
    second = os.stat(image).st_mtime_ns
    make_disk("harness-made-once", cfg + "set default=1\n", {})
    assert os.stat(image).st_mtime_ns != second, "a changed grub.cfg kept the old disk"
