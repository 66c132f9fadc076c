# SPDX-License-Identifier: GPL-3.0-or-later
"""Debian 12, UEFI, as the installer and grub-mkconfig leave it: the ESP
holds the stub that finds the root file system by UUID; /boot is a
directory of root (ext4, partition 2), so the kernels are
/boot/vmlinuz-...; grub.cfg has the header with load_env, fonts and
gfxterm, the Debian theme, the simple entry, "Advanced options" with a
recovery entry per kernel, memtest86+ (EFI and, on BIOS only, linux16), an
os-prober Windows entry and UEFI Firmware Settings."""

import functools

import menu

RU = "6d5f3a1b-8c2e-4f70-9a1d-2b3c4d5e6f70"
NEW, OLD = "6.1.0-13-amd64", "6.1.0-12-amd64"
ADVANCED = f"gnulinux-advanced-{RU}"
# The font a real install has and the test tree lacks, and the theme's
# background_image, which needs a video mode (its failure picks the theme's
# text colours); gfxterm, which cannot start on nmbl, says nothing and the
# text console stays.
GRAPHICS_ERRORS = {"file `/boot/grub/fonts/unicode.pf2' not found.", "no video mode activated."}


def image(name):
    return menu.disk("debian12", name, esp_volid="4E2F-1A3B", root_uuid=RU)


@functools.cache
def default_run():
    path, layout = image("debian12-default")
    return menu.run(path)


def test_debian_menu_as_grub_mkconfig_wrote_it():
    result = default_run()
    assert set(result.errors) == GRAPHICS_ERRORS, result.output
    assert [e[:3] for e in result.menus[0]["entries"]] == [
        ["menuentry", f"gnulinux-simple-{RU}", "Debian GNU/Linux"],
        ["submenu", ADVANCED, "Advanced options for Debian GNU/Linux"],
        # $grub_platform is efi: the EFI memtest entries, not the linux16 one.
        ["menuentry", "memtest86+-efi", "Memory test (memtest86+x64.efi)"],
        ["menuentry", "memtest86+-efi-serial", "Memory test (memtest86+x64.efi, serial console)"],
        ["menuentry", "osprober-efi-4E2F-1A3B", "Windows Boot Manager (on /dev/nvme0n1p1)"],
        ["menuentry", "uefi-firmware", "UEFI Firmware Settings"],
    ], result.menus
    assert result.menus[0]["entries"][0][3] == "debian,gnu-linux,gnu,os"
    assert result.default_id() == f"gnulinux-simple-{RU}"
    assert result.menus[0]["timeout"] == [5, "menu"]


def test_debian_default_boots_the_newest_kernel_from_root():
    result = default_run()
    assert result.kernel == f"(hd0,gpt2)/boot/vmlinuz-{NEW}", result.output
    assert result.initrds == [f"(hd0,gpt2)/boot/initrd.img-{NEW}"], result.output
    assert result.cmdline == f"BOOT_IMAGE=/boot/vmlinuz-{NEW} root=UUID={RU} ro quiet", \
        result.output


def test_debian_recovery_entry_of_the_older_kernel_in_the_submenu():
    path, _ = image("debian12-recovery")
    result = menu.run(path, request=f"{ADVANCED}>gnulinux-{OLD}-recovery-{RU}")
    assert result.default_id() == ADVANCED, result.menus
    assert result.ids(1) == [f"gnulinux-{NEW}-advanced-{RU}", f"gnulinux-{NEW}-recovery-{RU}",
                             f"gnulinux-{OLD}-advanced-{RU}", f"gnulinux-{OLD}-recovery-{RU}"]
    assert result.kernel == f"(hd0,gpt2)/boot/vmlinuz-{OLD}", result.output
    assert result.cmdline == f"BOOT_IMAGE=/boot/vmlinuz-{OLD} root=UUID={RU} ro single", \
        result.output


def test_debian_next_entry_boots_once():
    """grub-editenv grubenv set next_entry=...: that entry boots, and the
    next boot is the default again (next_entry emptied by save_env)."""
    path, layout = image("debian12-next-entry")
    menu.set_grubenv(path, layout, "root", "/boot/grub/grubenv", next_entry="memtest86+-efi")
    first = menu.run(path)
    assert first.default_id() == "memtest86+-efi", first.menus
    assert first.kernel == "(hd0,gpt2)/boot/memtest86+x64.efi", first.output
    assert menu.grubenv(path, layout, "root", "/boot/grub/grubenv").get("next_entry") == ""
    second = menu.run(path)
    assert second.default_id() == f"gnulinux-simple-{RU}", second.menus


def test_debian_windows_entry_chainloads_from_the_esp():
    path, _ = image("debian12-windows")
    result = menu.run(path, request="osprober-efi-*")
    assert result.kernel is None, result.output
    assert result.chainloader == "(hd0,gpt1)/EFI/Microsoft/Boot/bootmgfw.efi", result.output
