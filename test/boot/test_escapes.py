# SPDX-License-Identifier: GPL-3.0-or-later
"""GRUB's file names stay inside the partition that GRUB names: '..' and
symbolic links on the user's /boot (absolute, relative, through /proc's
magic links) never lead nmbl into its own initramfs, where GRUB would find
nothing either.  Each such entry says the file is not there and the menu
comes back; the good entry still boots."""

from fixture import (BOOT_TIMEOUT, MENU_READY, TARGET_UP, VM, build_path, entry,
                     expected_cmdline, kver, make_disk)
from vm import KEY_DOWN, KEY_ENTER, KEY_HOME

# Where each entry's kernel leads; /init is nmbl's own process 1, there
# in the initramfs and nowhere on /boot.
ESCAPES = [("/escape-absolute", "/init"), ("/escape-relative", "../../../../../init"),
           ("/escape-magic", "/proc/self/root/init"), ("/../../../../../init", None)]
NOT_THERE = r"(the file does not exist|file `[^']*' not found)"


def grub_cfg():
    cfg = "set timeout=600\n\n"
    for i, (name, _) in enumerate(ESCAPES):
        cfg += entry(f"Escape {i}", name, f"nmbl.entry=escape-{i}")
    return cfg + entry("Good", f"/vmlinuz-{kver()}", "nmbl.entry=good")


def test_dot_dot_and_links_stay_inside_the_partition():
    image = make_disk("escapes", grub_cfg(), {
        f"vmlinuz-{kver()}": build_path("test", "vmlinuz-test"),
        f"initrd.img-{kver()}": build_path("test", "target-initrd.img")},
        boot_links={name[1:]: target for name, target in ESCAPES if target})
    with VM(image, snapshot=True, log_file=build_path("test", "escapes.log")) as vm:
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        for i, (name, _) in enumerate(ESCAPES):
            vm.send(KEY_HOME + KEY_DOWN * i + KEY_ENTER)
            vm.wait_for(NOT_THERE, timeout=BOOT_TIMEOUT, clean=True)
            vm.wait_for("Press any key to continue", timeout=60, clean=True)
            vm.send(KEY_ENTER)
            vm.wait_for("Use the .* keys to select which entry is highlighted", timeout=60,
                        clean=True)
        vm.send(KEY_HOME + KEY_DOWN * len(ESCAPES) + KEY_ENTER)
        up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=60)
    assert up.group(2) == expected_cmdline(f"/vmlinuz-{kver()}", "nmbl.entry=good")
