# SPDX-License-Identifier: GPL-3.0-or-later
"""A machine whose kernels are UKIs only, as systemd's kernel-install with
layout=uki leaves them in /EFI/Linux on the ESP, listed by GRUB 2.14's uki
command: nmbl boots the newest by default, and an older one picked from
the menu.  Both are the target's signed kernel and initrd with their own
.osrel and .cmdline; under Secure Boot each boots with its own signed
.cmdline, which the target prints."""

import functools
import re

from fixture import (AT_MENU, BOOT_TIMEOUT, MENU_READY, ROOT_UUID, TARGET_UP, VM,
                     build_path, debian_stub, kver, make_disk, words)
from vm import KEY_DOWN, KEY_ENTER

MACHINE_ID = "d41e7c0a9b6f4e2d8c3a5b1f0e9d7c6b"
# kernel-install names a UKI by the entry token and the version: 2.10 is
# newer than 2.9, though it sorts before it as text.
VERSIONS = ("2.10", "2.9")


def uki_name(version):
    return f"{MACHINE_ID}-{version}.efi"


def uki_cmdline(version):
    return f"root=UUID={ROOT_UUID} ro console=ttyS0,115200 nmbl.entry=uki-{version}"


@functools.cache
def disk():
    """Debian's ESP stub, reading grub.cfg from /boot, whose grub.cfg has
    no kernels of its own: the two lines a user adds to list the UKIs."""
    stub = debian_stub("uki-entries")
    grub_cfg = "set default=0\nset timeout=3\n\ninsmod blsuki\nuki\n"
    esp = {"EFI/debian/grub.cfg": stub}
    for version in VERSIONS:
        esp[f"EFI/Linux/{uki_name(version)}"] = build_path("test", f"uki-entry-{version}.efi")
    return make_disk("uki-entries", grub_cfg, {}, esp_files=esp)


def selected(log):
    """The entry the booted system's LoaderEntrySelected names."""
    found = re.search(r"NMBL-TARGET-EFIVAR LoaderEntrySelected=([^\r\n]*)", log)
    return found and found.group(1)


def boot(name, keys=None):
    """Boot the disk, press KEYS once the menu counts down, and return the
    VM's console log and the target's marker line."""
    with VM(disk(), snapshot=True, log_file=build_path("test", f"{name}.log"), **AT_MENU) as vm:
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        if keys:
            vm.send(keys)
        up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=60)
        return vm.clean_log(), up


def test_uki_entries_newest_boots_by_default():
    log, up = boot("uki-entries-default")
    # The menu lists both, the newest first, titled by their .osrel.
    shown = [re.search(words(f"nmbl test target {version}"), log) for version in VERSIONS]
    assert all(shown), f"the menu shows the UKIs {VERSIONS} as {shown}"
    assert shown[0].start() < shown[1].start(), "the older UKI is listed first"
    assert up.group(1) == kver(), f"target runs {up.group(1)}, expected {kver()}"
    want = uki_cmdline("2.10")
    assert up.group(2) == want, f"target's cmdline\n  {up.group(2)!r}\nexpected\n  {want!r}"
    # bootctl sees the entry as systemd-boot names a type #2 entry.
    assert selected(log) == uki_name("2.10"), selected(log)


def test_uki_entries_older_one_picked_from_the_menu():
    log, up = boot("uki-entries-older", KEY_DOWN + KEY_ENTER)
    want = uki_cmdline("2.9")
    assert up.group(2) == want, f"target's cmdline\n  {up.group(2)!r}\nexpected\n  {want!r}"
    assert selected(log) == uki_name("2.9"), selected(log)
