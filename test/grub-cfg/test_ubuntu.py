# SPDX-License-Identifier: GPL-3.0-or-later
"""Ubuntu 24.04 on btrfs, UEFI: root is the subvolume @ of a btrfs file
system (partition 2) and /boot a directory in it, so GRUB's paths are
/@/boot/vmlinuz-...; grub.cfg has Ubuntu's header (recordfail without
save_env on btrfs, initrdfail, hidden timeout 0), $vt_handoff from
gfxmode $linux_gfx_mode, recovery entries, insmod bli, UEFI Firmware
Settings, and a custom BIOS memtest entry (linux16)."""

import functools

import menu

RU = "0e1d2c3b-4a59-4687-9a8b-7c6d5e4f3a21"
NEW, OLD = "6.8.0-31-generic", "6.8.0-11-generic"
ADVANCED = f"gnulinux-advanced-{RU}"
# The font a real install has and the test tree lacks; gfxterm, which
# cannot start on nmbl, says nothing and the text console stays.
GRAPHICS_ERRORS = {"file `/@/boot/grub/fonts/unicode.pf2' not found."}


def image(name):
    return menu.disk("ubuntu2404-btrfs", name, esp_volid="4E2F-1A3B", root_uuid=RU,
                     root_fstype="btrfs")


@functools.cache
def default_run():
    path, _ = image("ubuntu-default")
    return menu.run(path)


def test_ubuntu_menu_hidden_with_no_timeout():
    result = default_run()
    assert set(result.errors) == GRAPHICS_ERRORS, result.output
    assert result.ids() == [f"gnulinux-simple-{RU}", ADVANCED, "uefi-firmware", "memtest86+-bin"]
    assert result.menus[0]["timeout"] == [0, "hidden"], result.menus


def test_ubuntu_default_boots_from_the_subvolume_with_vt_handoff():
    result = default_run()
    assert result.kernel == f"(hd0,gpt2)/@/boot/vmlinuz-{NEW}", result.output
    assert result.initrds == [f"(hd0,gpt2)/@/boot/initrd.img-{NEW}"], result.output
    assert result.cmdline == (f"BOOT_IMAGE=/@/boot/vmlinuz-{NEW} root=UUID={RU} ro "
                              "rootflags=subvol=@ quiet splash vt.handoff=7"), result.output


def test_ubuntu_recovery_mode_of_the_older_kernel():
    path, _ = image("ubuntu-recovery")
    result = menu.run(path, request=f"{ADVANCED}>gnulinux-{OLD}-recovery-{RU}")
    assert result.cmdline == (f"BOOT_IMAGE=/@/boot/vmlinuz-{OLD} root=UUID={RU} ro "
                              "recovery nomodeset dis_ucode_ldr rootflags=subvol=@"), result.output


def test_ubuntu_bios_entry_says_nmbl_cannot_use_it():
    path, _ = image("ubuntu-linux16")
    result = menu.run(path, request="memtest86+-bin")
    assert result.kernel is None, result.output
    assert ("`linux16' is for another kind of machine or system: nmbl boots Linux kernels "
            "with kexec and EFI programs through the firmware.") in result.errors, result.output
