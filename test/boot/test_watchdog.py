# SPDX-License-Identifier: GPL-3.0-or-later
"""A new nmbl that fails before its menu must leave the machine to the
firmware, which then falls back to the nmbl before (nmbl-init(8)): a hang
is reset by the hardware watchdog, a panic reboots by panic=.  And a
healthy nmbl is never reset by its watchdog, whoever sits at the menu.

QEMU gets Intel's 6300ESB watchdog (-device i6300esb), whose action is to
reset the machine, and resets reboot it (the harness's -no-reboot would
end QEMU instead): the firmware starting again shows on the console as
OVMF's second "BdsDxe: starting".  The q35 machine has a watchdog of its
own, the ICH9's TCO, which QEMU straps not to reboot (ICH9-LPC's noreboot,
said here, not left to QEMU's default), as firmware may: iTCO_wdt drives
it all the same, and with no 6300ESB nmbl arms it, to no effect.  The UKIs are test variants of nmbl's
(see test/test.mk): the self-test image stalling before its menu for
longer than its nmbl.watchdog= allows, nmbl's own image with a watchdog
shorter than its menu's countdown, and nmbl's kernel with an initramfs
that has no init.  Each boot checks several things; no test sleeps."""

import functools
import math
import re

from fixture import (BOOT_TIMEOUT, MENU_READY, TARGET_UP, VM, build_path, entry,
                     expected_cmdline, kver, make_disk)
from vm import KEY_ENTER

# After -no-reboot (the harness's), which it overrides: a reset restarts.
REBOOTS = ["-action", "reboot=reset", "-global", "ICH9-LPC.noreboot=true"]
WATCHDOG = ["-device", "i6300esb", "-action", "watchdog=reset"] + REBOOTS

FIRMWARE_STARTS = r"BdsDxe: starting Boot[0-9A-F]{4}"
ARMED = (r"nmbl-init: watchdog armed \(([^)]*)\): the machine resets in (\d+) s "
         r"unless the menu comes up")
ESB = "i6300ESB timer"
STALL_BEGIN = r"NMBL-STALL begin (\d+)"
STALL_END = r"NMBL-STALL end (\d+)"
# What the kernel says when a watchdog's last descriptor closes and it
# keeps running, and what nmbl says when it cannot stop it.
NOT_STOPPED = r"watchdog did not stop|watchdog cannot be stopped|watchdog keeps running"

# test/test.mk's variants: nmbl.watchdog= and nmbl.selftest.stall=, and
# the panic= of NMBL_CMDLINE (dracut/uki.mk).
STALL_WATCHDOG, STALL_SECONDS = 10, 30
HEALTHY_WATCHDOG = 20
PANIC_SECONDS = 30
# The healthy menu's countdown: it must last longer than the watchdog.
HEALTHY_TIMEOUT = 40
# Beyond the watchdog's timeout, so that a reset would have come.
MARGIN = 5


def grub_cfg(timeout):
    return (f"set default=0\nset timeout={timeout}\n\n"
            + entry("Target", f"/vmlinuz-{kver()}", "nmbl.entry=watchdog"))


def boot_files():
    return {f"vmlinuz-{kver()}": build_path("test", "vmlinuz-test"),
            f"initrd.img-{kver()}": build_path("test", "target-initrd.img")}


@functools.cache
def disk(uki, timeout):
    name = "watchdog-" + re.sub(r"\W", "-", uki) + f"-{timeout}"
    return make_disk(name, grub_cfg(timeout), boot_files(), uki=uki)


def start(name, uki, timeout, qemu_args):
    return VM(disk(uki, timeout), snapshot=True, qemu_args=qemu_args,
              log_file=build_path("test", f"{name}.log"))


def firmware_starts(log):
    return len(re.findall(FIRMWARE_STARTS, log))


@functools.cache
def stalled_with_watchdog():
    """nmbl stalls before its menu; the watchdog resets the machine, and the
    firmware starts again.  The console, and the seconds from arming to
    the firmware's second start."""
    with start("watchdog-stall", "test/nmbl-stall.efi", 1, WATCHDOG) as vm:
        vm.wait_for(FIRMWARE_STARTS, timeout=BOOT_TIMEOUT)
        armed = vm.wait_for(ARMED, timeout=BOOT_TIMEOUT)
        armed_at = vm.elapsed()
        vm.wait_for(STALL_BEGIN, timeout=BOOT_TIMEOUT)
        vm.wait_for(FIRMWARE_STARTS, timeout=BOOT_TIMEOUT)
        return vm.clean_log(), armed, vm.elapsed() - armed_at


@functools.cache
def stalled_without_watchdog():
    """The same nmbl on a machine without a watchdog: it waits out its stall
    and boots the target.  The console and the target's report."""
    with start("watchdog-none", "test/nmbl-stall.efi", 1, REBOOTS) as vm:
        vm.wait_for(STALL_BEGIN, timeout=BOOT_TIMEOUT)
        vm.wait_for(STALL_END, timeout=BOOT_TIMEOUT)
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=60)
        return vm.clean_log(), up


@functools.cache
def healthy():
    """nmbl with a watchdog shorter than its menu's countdown: the menu is
    left to count down past the watchdog's timeout, then Enter boots the
    target.  The console, the target's report, and the seconds from
    arming to the key."""
    with start("watchdog-healthy", "test/nmbl-watchdog.efi", HEALTHY_TIMEOUT,
               WATCHDOG) as vm:
        armed = vm.wait_for(ARMED, timeout=BOOT_TIMEOUT)
        armed_at = vm.elapsed()
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        # The countdown at the second it shows when the watchdog, had the
        # menu not stopped it, would have reset the machine MARGIN seconds
        # before.
        due = int(armed.group(2)) + MARGIN - (vm.elapsed() - armed_at)
        left = max(1, min(HEALTHY_TIMEOUT - 1, HEALTHY_TIMEOUT - math.ceil(due)))
        vm.wait_for(rf"executed automatically in {left}s", timeout=BOOT_TIMEOUT, clean=True)
        waited = vm.elapsed() - armed_at
        vm.send(KEY_ENTER)
        up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=60)
        return vm.clean_log(), up, armed, waited


@functools.cache
def panicked():
    """nmbl's kernel with an initramfs that has no init panics: panic= on
    nmbl's command line reboots it, and the firmware starts again.  The
    console and the seconds from the kernel's word to that start."""
    with start("watchdog-panic", "test/nmbl-noinit.efi", 1, REBOOTS) as vm:
        vm.wait_for(FIRMWARE_STARTS, timeout=BOOT_TIMEOUT)
        vm.wait_for(r"Kernel panic - not syncing", timeout=BOOT_TIMEOUT)
        rebooting = vm.wait_for(r"Rebooting in (\d+) seconds", timeout=60)
        said_at = vm.elapsed()
        vm.wait_for(FIRMWARE_STARTS, timeout=PANIC_SECONDS + BOOT_TIMEOUT)
        return vm.clean_log(), int(rebooting.group(1)), vm.elapsed() - said_at


def test_hang_before_the_menu_is_reset_by_the_watchdog():
    log, armed, _ = stalled_with_watchdog()
    assert armed.group(1) == ESB, f"nmbl armed '{armed.group(1)}', not QEMU's '{ESB}'"
    assert armed.group(2) == str(STALL_WATCHDOG), \
        f"armed for {armed.group(2)} s, nmbl.watchdog={STALL_WATCHDOG}"
    assert firmware_starts(log) == 2, "the firmware did not start again"
    # The stall ended by the reset, before the menu and before its end.
    first_boot = log[:[m.start() for m in re.finditer(FIRMWARE_STARTS, log)][1]]
    assert not re.search(STALL_END, first_boot), "the stall ran out: no reset"
    assert "executed automatically" not in first_boot, "the menu came before the reset"
    assert "Kernel panic" not in first_boot, "a panic, not the watchdog, reset the machine"


def test_watchdog_resets_when_its_time_is_up_not_before():
    _, armed, reset_after = stalled_with_watchdog()
    seconds = int(armed.group(2))
    # From nmbl-init's word to the firmware's: the timeout, then the
    # firmware's own start (a few seconds under TCG).
    assert seconds <= reset_after < STALL_SECONDS, \
        f"reset {reset_after:.1f} s after arming for {seconds} s"


def test_without_a_watchdog_that_resets_nothing_resets():
    log, up = stalled_without_watchdog()
    # The TCO, or no watchdog at all on a machine model without it.
    armed = re.search(ARMED, log)
    if armed:
        assert armed.group(1) == "iTCO_wdt", f"nmbl armed '{armed.group(1)}'"
    else:
        assert "nmbl.watchdog=10, but this machine has no watchdog" in log, \
            "nmbl-init did not say that the watchdog asked for is missing"
    assert firmware_starts(log) == 1, "the machine was reset"
    assert not re.search(NOT_STOPPED, log), "a watchdog could not be stopped"
    assert re.search(STALL_END, log), "the stall did not run out"
    assert up.group(1) == kver(), f"target runs {up.group(1)}, expected {kver()}"
    want = expected_cmdline(f"/vmlinuz-{kver()}", "nmbl.entry=watchdog")
    assert up.group(2) == want, f"target's cmdline\n  {up.group(2)!r}\nexpected\n  {want!r}"


def test_menu_up_longer_than_the_watchdog_is_not_reset():
    log, up, armed, waited = healthy()
    seconds = int(armed.group(2))
    assert armed.group(1) == ESB, f"nmbl armed '{armed.group(1)}', not QEMU's '{ESB}'"
    assert seconds == HEALTHY_WATCHDOG, f"armed for {seconds} s, nmbl.watchdog={HEALTHY_WATCHDOG}"
    assert waited >= seconds + MARGIN, \
        f"the menu was left for {waited:.1f} s after arming, not past {seconds} s"
    assert firmware_starts(log) == 1, "the watchdog reset the machine under the menu"
    assert not re.search(NOT_STOPPED, log), "the watchdog was not stopped"


def test_healthy_nmbl_boots_the_target_after_its_watchdog_time():
    log, up, _, _ = healthy()
    assert up.group(1) == kver(), f"target runs {up.group(1)}, expected {kver()}"
    want = expected_cmdline(f"/vmlinuz-{kver()}", "nmbl.entry=watchdog")
    assert up.group(2) == want, f"target's cmdline\n  {up.group(2)!r}\nexpected\n  {want!r}"


def test_panic_in_nmbl_reboots():
    log, seconds, rebooted_after = panicked()
    assert seconds == PANIC_SECONDS, f"'Rebooting in {seconds} seconds', panic={PANIC_SECONDS}"
    assert firmware_starts(log) == 2, "the firmware did not start again"
    # The kernel waits that long, then the firmware starts.
    assert rebooted_after >= seconds - 2, \
        f"rebooted {rebooted_after:.1f} s after saying it would in {seconds}"
