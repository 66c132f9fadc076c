# SPDX-License-Identifier: GPL-3.0-or-later
"""Fedora 39 Workstation, UEFI, as the installer and grub2-mkconfig leave
it: the ESP holds only the stub that finds /boot by UUID on the same disk;
/boot (ext4, partition 2) holds grub2/grub.cfg with blscfg, grubenv and
the BLS entries kernel-install wrote; root is btrfs with subvol=root.
The machine id starts with digits, as many do."""

import functools

import menu

MID = "3f2a7c0e9b1d4e5f8a6b0c1d2e3f4a5b"
BOOT_UUID = "2c9d4b1e-6f0a-4a8e-9d3c-1b7e5f2a8c40"
ROOT_UUID = "8b5e0f3c-2d41-4c6a-b9e7-0a1f2c3d4e5f"
OPTIONS = f"root=UUID={ROOT_UUID} ro rootflags=subvol=root rhgb quiet"
NEW, OLD = "6.5.12-300.fc39.x86_64", "6.5.6-300.fc39.x86_64"


def image(name):
    return menu.disk("fedora39", name, esp_volid="4E2F-1A3B", boot_uuid=BOOT_UUID)


@functools.cache
def default_run():
    path, layout = image("fedora39-default")
    return menu.run(path), menu.grubenv(path, layout, "boot", "/grub2/grubenv")


def test_fedora_menu_is_the_bls_entries_newest_first():
    result, _ = default_run()
    assert result.errors == [], result.output
    assert result.ids() == [f"{MID}-{NEW}", f"{MID}-{OLD}", f"{MID}-0-rescue", "uefi-firmware"], \
        result.menus
    assert result.titles() == [
        f"Fedora Linux ({NEW}) 39 (Workstation Edition)",
        f"Fedora Linux ({OLD}) 39 (Workstation Edition)",
        f"Fedora Linux (0-rescue-{MID}) 39 (Workstation Edition)",
        "UEFI Firmware Settings"]
    # grub_class and the unset $grub_users: open to everyone.
    assert result.menus[0]["entries"][0][3:5] == ["fedora", "--unrestricted"], result.menus


def test_fedora_saved_entry_is_the_default_though_the_id_starts_with_digits():
    result, _ = default_run()
    assert result.default_id() == f"{MID}-{OLD}", result.menus


def test_fedora_menu_auto_hide_after_a_good_boot():
    """boot_success=1 and menu_auto_hide=1 in grubenv: hidden, 1 second."""
    result, _ = default_run()
    assert result.menus[0]["timeout"] == [1, "hidden"], result.menus


def test_fedora_default_boots_as_grub_would_boot_it():
    result, _ = default_run()
    assert result.kernel == f"(hd0,gpt2)/vmlinuz-{OLD}", result.output
    assert result.initrds == [f"(hd0,gpt2)/initramfs-{OLD}.img"], result.output
    assert result.cmdline == f"BOOT_IMAGE=(hd0,gpt2)/vmlinuz-{OLD} {OPTIONS}", result.output


def test_fedora_grubenv_is_saved_as_grub_saves_it():
    """10_reset_boot_success resets boot_success for this boot; grub-editenv
    reads the file nmbl's GRUB wrote in place."""
    _, env = default_run()
    assert env.get("boot_success") == "0", env
    assert env.get("boot_indeterminate") == "0", env
    assert env.get("saved_entry") == f"{MID}-{OLD}", env
    assert env.get("menu_auto_hide") == "1", env


def test_fedora_rescue_entry_by_request():
    path, _ = image("fedora39-rescue")
    result = menu.run(path, request="*-0-rescue.conf")
    assert result.kernel == f"(hd0,gpt2)/vmlinuz-0-rescue-{MID}", result.output
    assert result.cmdline == f"BOOT_IMAGE=(hd0,gpt2)/vmlinuz-0-rescue-{MID} {OPTIONS}", \
        result.output
