# SPDX-License-Identifier: GPL-3.0-or-later
"""No more than GRUB would give under Secure Boot: nmbl's GRUB locks down
as GRUB's EFI image does (grub-emu's --lockdown, which nmbl-init gives), and
linux, initrd and chainloader refuse files on (host), nmbl's own file system
(grub-emu-patches: "emu/nmbl: Refuse to boot a file on (host)").  Typed
at GRUB's command line, as a user at the machine would; the entry boots
all the same."""

import functools
import re

from fixture import (BOOT_TIMEOUT, BOOT_UUID, MENU_READY, ROOT_UUID, TARGET_UP, VM, build_path,
                     entry, expected_cmdline, kver, make_disk, words)
from vm import KEY_ENTER

PROMPT = r"grub>"
EXTRA = "nmbl.entry=lockdown"


def locked(command):
    """GRUB's own refusal of a command lockdown disables (kern/command.c)."""
    return words(f"{command}: the command is not allowed when lockdown is enforced")


def on_host(name):
    return words(f"`{name}' is on (host), nmbl's own file system: "
                 "nmbl boots only files on the machine's disks")


@functools.cache
def disk():
    cfg = "set default=0\nset timeout=600\n\n"
    cfg += entry("Debian GNU/Linux", f"/vmlinuz-{kver()}", EXTRA)
    return make_disk("lockdown", cfg, {
        f"vmlinuz-{kver()}": build_path("test", "vmlinuz-test"),
        f"initrd.img-{kver()}": build_path("test", "target-initrd.img")})


def type_command(vm, command, *expected):
    """Type COMMAND at GRUB's prompt; EXPECTED appear, then the prompt again."""
    vm.send(command + KEY_ENTER)
    for pattern in expected:
        vm.wait_for(pattern, timeout=60, clean=True)
    vm.wait_for(PROMPT, timeout=60, clean=True)


@functools.cache
def session():
    """Boot with Secure Boot, go to GRUB's command line, type what lockdown
    and (host) must refuse, then boot the entry by hand; the console log and
    the target's report."""
    with VM(disk(), snapshot=True, log_file=build_path("test", "lockdown.log")) as vm:
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        vm.send("c")
        vm.wait_for(PROMPT, timeout=60, clean=True)
        type_command(vm, "echo lockdown=[$lockdown]", r"lockdown=\[y\]")
        type_command(vm, "write_byte 0x1000 0", locked("write_byte"))
        type_command(vm, "write_dword 0x1000 0", locked("write_dword"))
        type_command(vm, "linux (host)/usr/bin/nmbl", on_host("(host)/usr/bin/nmbl"))
        type_command(vm, "chainloader (host)/usr/bin/nmbl", on_host("(host)/usr/bin/nmbl"))
        type_command(vm, "set root=host")
        type_command(vm, "linux /usr/bin/nmbl", on_host("/usr/bin/nmbl"))
        type_command(vm, f"search --no-floppy --fs-uuid --set=root {BOOT_UUID}")
        type_command(vm, f"linux /vmlinuz-{kver()} root=UUID={ROOT_UUID} ro "
                         f"console=ttyS0,115200 {EXTRA}")
        type_command(vm, "initrd (host)/usr/bin/nmbl", on_host("(host)/usr/bin/nmbl"))
        type_command(vm, f"initrd /initrd.img-{kver()}")
        vm.send("boot" + KEY_ENTER)
        up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=60)
        return vm.clean_log(), up


def test_lockdown_refuses_what_grub_refuses_under_secure_boot():
    log, _ = session()
    assert "nmbl: secure-boot: enabled" in log, "nmbl did not see Secure Boot enabled"
    assert "lockdown=[y]" in log, "grub.cfg does not see lockdown=y"
    for command in ("write_byte", "write_dword"):
        assert re.search(locked(command), log), f"{command} was not refused"


def test_host_files_are_refused_and_the_entry_boots():
    log, up = session()
    for name in ("(host)/usr/bin/nmbl", "/usr/bin/nmbl"):
        assert re.search(on_host(name), log), f"{name} was not refused"
    # linux, chainloader and initrd on (host)/...; linux with $root=host.
    assert len(re.findall(on_host("(host)/usr/bin/nmbl"), log)) == 3, log
    want = expected_cmdline(f"/vmlinuz-{kver()}", EXTRA)
    assert up.group(2) == want, f"target's cmdline\n  {up.group(2)!r}\nexpected\n  {want!r}"


def test_no_lockdown_without_secure_boot():
    with VM(disk(), snapshot=True, secure_boot=False,
            log_file=build_path("test", "lockdown-off.log")) as vm:
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        vm.send("c")
        vm.wait_for(PROMPT, timeout=60, clean=True)
        type_command(vm, "echo lockdown=[$lockdown]", r"lockdown=\[\]")
        # Refused whatever the firmware: nothing on (host) is for booting.
        type_command(vm, "linux (host)/usr/bin/nmbl", on_host("(host)/usr/bin/nmbl"))
