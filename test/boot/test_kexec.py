# SPDX-License-Identifier: GPL-3.0-or-later
"""The first slice: a Secure Boot VM boots the nmbl UKI, whose menu reads a
plain grub.cfg and kexecs the chosen entry's kernel."""

import functools
import os
import re

from fixture import (AT_MENU, BOOT_TIMEOUT, BOOT_UUID, ESP_PARTUUID, MENU_READY, ROOT_UUID,
                     TARGET_UP, VM, build_path, entry, expected_cmdline, kver, make_disk,
                     words)
from vm import KEY_DOWN, KEY_ENTER, KEY_HOME

HERE = os.path.dirname(os.path.abspath(__file__))


def refused():
    """Menu entries 3 and on: a file in /boot, and what the console must say
    when it is chosen (GRUB's error line, then nmbl's explanation)."""
    k = kver()
    return [
        (f"vmlinuz-{k}.debian", [
            f"cannot load /vmlinuz-{k}.debian: the kernel is signed by a key this machine "
            "does not trust",
            "It is signed by 'Debian Secure Boot Signer 2022 - linux' "
            "(issued by 'Debian Secure Boot CA').",
            "The running kernel trusts for kexec:",
            "mokutil --import"]),
        ("vmlinuz-unsigned", [
            "cannot load /vmlinuz-unsigned: the kernel is not signed",
            "It carries no signature."]),
        ("vmlinuz-truncated", [
            "cannot load /vmlinuz-truncated: the kernel image is malformed or truncated",
            "The file is truncated"]),
        ("target-uki-unsigned.efi", [
            "cannot load /target-uki-unsigned.efi: the kernel is not signed",
            "The kernel inside this UKI carries no signature of its own"]),
        ("notes.txt", [
            "cannot load /notes.txt: the file is not a Linux kernel that can be booted",
            "not a PE image"]),
    ]


@functools.cache
def disk():
    return make_disk("kexec", grub_cfg(), boot_files())


def grub_cfg():
    k = kver()
    cfg = "set default=0\nset timeout=3\n\n"
    cfg += entry("Debian GNU/Linux", f"/vmlinuz-{k}", "nmbl.entry=first")
    # GRUB's other ways to name a file, and three initrds.
    cfg += entry("Debian GNU/Linux, second entry", f"($root)/vmlinuz-{k}",
                 "nmbl.entry=second quiet",
                 initrd=f"(hd0,gpt2)/initrd.img-{k} ($root)/marker.img /marker3.img")
    # A UKI: under Secure Boot its own signed .cmdline wins over these options.
    cfg += f"""menuentry 'Target UKI' {{
	search --no-floppy --fs-uuid --set=root {BOOT_UUID}
	linux /target-uki.efi nmbl.entry=ignored
}}
"""
    # Kernels nmbl must refuse, each for its own reason.
    for name, _ in refused():
        cfg += entry(f"Refused: {name}", f"/{name}", "nmbl.entry=refused")
    return cfg


def boot_files():
    k = kver()
    return {
        f"vmlinuz-{k}": build_path("test", "vmlinuz-test"),
        f"vmlinuz-{k}.debian": build_path("kernel", "tree", "boot", f"vmlinuz-{k}"),
        "vmlinuz-unsigned": build_path("test", "vmlinuz-unsigned"),
        "vmlinuz-truncated": build_path("test", "vmlinuz-truncated"),
        "notes.txt": os.path.join(HERE, "..", "..", "README.md"),
        f"initrd.img-{k}": build_path("test", "target-initrd.img"),
        "marker.img": build_path("test", "marker.img"),
        "marker3.img": build_path("test", "marker3.img"),
        "target-uki.efi": build_path("test", "target-uki.efi"),
        "target-uki-unsigned.efi": build_path("test", "target-uki-unsigned.efi"),
    }


def boot(name, keys=None):
    """Boot the disk, press KEYS once the menu counts down, and return the
    VM's console log once the target has reported."""
    with VM(disk(), snapshot=True, log_file=build_path("test", f"{name}.log"), **AT_MENU) as vm:
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        if keys:
            vm.send(keys)
        up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=60)
        return vm.clean_log(), up


@functools.cache
def default_boot():
    return boot("kexec-default")


def test_default_entry_boots_after_timeout():
    log, up = default_boot()
    assert up.group(1) == kver(), f"target runs {up.group(1)}, expected {kver()}"
    want = expected_cmdline(f"/vmlinuz-{kver()}", "nmbl.entry=first")
    assert up.group(2) == want, f"target's cmdline\n  {up.group(2)!r}\nexpected\n  {want!r}"


def test_lockdown_is_integrity_in_nmbl():
    log, _ = default_boot()
    assert "nmbl: secure-boot: enabled" in log, "nmbl did not see Secure Boot enabled"
    assert "nmbl: lockdown: integrity" in log, "nmbl's kernel is not locked down to integrity"


def test_nmbl_names_the_boot_option_as_the_firmware_does():
    """nmbl's load-option decoder on the real Boot#### variable: the same
    number, description and device path text as OVMF printed starting it."""
    log, _ = default_boot()
    firmware = re.search(r'BdsDxe: starting (Boot[0-9A-F]{4}) "([^"]*)" from (\S+)', log)
    assert firmware, "OVMF did not say which boot option it started"
    want = f'nmbl: boot-current: {firmware.group(1)} "{firmware.group(2)}" {firmware.group(3)}'
    assert want in log, f"expected {want!r} from nmbl status"


def test_boot_loader_interface_reaches_the_target():
    """What bootctl status reads in the booted system: nmbl as the loader,
    the entry chosen, and the ESP and image the firmware started."""
    log, _ = default_boot()
    found = dict(re.findall(r"NMBL-TARGET-EFIVAR (\w+)=([^\r\n]*)", log))
    assert found.get("LoaderInfo", "").startswith("nmbl "), found
    assert found.get("LoaderEntrySelected") == "Debian GNU/Linux", found
    assert found.get("LoaderDevicePartUUID", "").lower() == ESP_PARTUUID, found
    assert found.get("LoaderImageIdentifier", "").upper() == "\\EFI\\BOOT\\BOOTX64.EFI", found
    # Entry default and one-shot: what systemctl checks before it asks.
    assert found.get("LoaderFeatures") == "0xc", found
    # systemd-analyze's firmware and loader times, microseconds since reset,
    # pass systemd's own checks (both set, in order, less than an hour apart),
    # and nmbl's part under TCG takes seconds.
    init, handover = int(found["LoaderTimeInitUSec"]), int(found["LoaderTimeExecUSec"])
    assert 0 < init < handover, found
    assert 1_000_000 < handover - init < 3_600_000_000, found


def test_second_entry_chosen_with_arrow_keys():
    log, up = boot("kexec-second", KEY_DOWN + KEY_ENTER)
    want = expected_cmdline(f"(hd0,gpt2)/vmlinuz-{kver()}", "nmbl.entry=second quiet")
    assert up.group(2) == want, f"target's cmdline\n  {up.group(2)!r}\nexpected\n  {want!r}"
    assert "NMBL-TARGET-INITRD second-initrd third-initrd" in log, \
        "the entry's second and third initrds did not both reach the target"


def test_refused_kernels_each_say_why_then_the_menu_returns():
    """Each refused entry shows its own reason; the menu comes back after
    each; then an entry that is fine boots."""
    with VM(disk(), snapshot=True, log_file=build_path("test", "kexec-refused.log"),
            **AT_MENU) as vm:
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        for index, (name, reasons) in enumerate(refused(), start=3):
            vm.send(KEY_HOME + KEY_DOWN * index + KEY_ENTER)
            for reason in reasons:
                vm.wait_for(words(reason), timeout=BOOT_TIMEOUT, clean=True)
            vm.wait_for("Press any key to continue", timeout=60, clean=True)
            vm.send(KEY_ENTER)
            vm.wait_for("Use the .* keys to select which entry is highlighted", timeout=60,
                        clean=True)
        vm.send(KEY_HOME + KEY_ENTER)
        up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=60)
    want = expected_cmdline(f"/vmlinuz-{kver()}", "nmbl.entry=first")
    assert up.group(2) == want, f"target's cmdline\n  {up.group(2)!r}\nexpected\n  {want!r}"


def test_uki_target_boots_with_its_own_cmdline():
    _, up = boot("kexec-uki", KEY_DOWN * 2 + KEY_ENTER)
    assert up.group(1) == kver(), f"target runs {up.group(1)}, expected {kver()}"
    want = f"root=UUID={ROOT_UUID} ro console=ttyS0,115200 nmbl.entry=uki"
    assert up.group(2) == want, f"target's cmdline\n  {up.group(2)!r}\nexpected\n  {want!r}"
