# SPDX-License-Identifier: GPL-3.0-or-later
"""RHEL 8.10, UEFI: like Fedora, but the kernel options live in grubenv
(kernelopts, which grubby edits) and the BLS entries say
"options $kernelopts $tuned_params" and "initrd ... $tuned_initrd"; a
GRUB password is set (user.cfg, GRUB2_PASSWORD), so entries without
--unrestricted are for the superuser only.  /boot is xfs on RHEL; ext4
here, which changes nothing GRUB's script sees."""

import functools
import os

import menu

MID = "c0ffee00d15ea5e0badc0de0cafe0001"
BOOT_UUID = "9a7c5e3d-1f2b-4c6d-8e0f-a1b2c3d4e5f6"
NEW, OLD = "4.18.0-553.el8_10.x86_64", "4.18.0-513.24.1.el8_9.x86_64"
KERNELOPTS = ("root=/dev/mapper/rhel-root ro crashkernel=auto resume=/dev/mapper/rhel-swap "
              "rd.lvm.lv=rhel/root rd.lvm.lv=rhel/swap rhgb quiet")


def image(name):
    return menu.disk("rhel8", name, esp_volid="4E2F-1A3B", boot_uuid=BOOT_UUID)


@functools.cache
def default_run():
    path, layout = image("rhel8-default")
    return menu.run(path), path, layout


def test_rhel_menu_and_who_may_boot_what():
    result, _, _ = default_run()
    assert result.errors == [], result.output
    assert [e[1:] for e in result.menus[0]["entries"]] == [
        [f"{MID}-{NEW}", f"Red Hat Enterprise Linux ({NEW}) 8.10 (Ootpa)", "kernel",
         "--unrestricted"],
        [f"{MID}-{OLD}", f"Red Hat Enterprise Linux ({OLD}) 8.10 (Ootpa)", "kernel",
         "--unrestricted"],
        # grub.cfg's own entry, no --unrestricted: superusers only.
        ["maintenance", "Maintenance shell", "", ""],
    ], result.menus
    assert result.default_id() == f"{MID}-{NEW}"


def test_rhel_kernelopts_from_grubenv_reach_the_command_line():
    result, _, _ = default_run()
    assert result.kernel == f"(hd0,gpt2)/vmlinuz-{NEW}", result.output
    # The empty $tuned_initrd adds no initrd.
    assert result.initrds == [f"(hd0,gpt2)/initramfs-{NEW}.img"], result.output
    assert result.cmdline == f"BOOT_IMAGE=(hd0,gpt2)/vmlinuz-{NEW} {KERNELOPTS}", result.output


def test_rhel_grubby_changes_kernelopts_in_grubenv():
    """What "grubby --update-kernel=ALL --args=..." does on RHEL 8: a new
    kernelopts in grubenv, and every entry boots with it."""
    path, layout = image("rhel8-grubby")
    menu.set_grubenv(path, layout, "boot", "/grub2/grubenv",
                     kernelopts=KERNELOPTS + " console=ttyS0,115200")
    result = menu.run(path, request=f"{MID}-{OLD}")
    assert result.cmdline == (f"BOOT_IMAGE=(hd0,gpt2)/vmlinuz-{OLD} {KERNELOPTS} "
                              "console=ttyS0,115200"), result.output


def test_rhel_boot_indeterminate_counts_up_after_an_unconfirmed_boot():
    """boot_success=0 (the last boot never said it went well): GRUB's
    increment counts the attempt in grubenv."""
    _, path, layout = default_run()
    env = menu.grubenv(path, layout, "boot", "/grub2/grubenv")
    assert env.get("boot_success") == "0", env
    assert env.get("boot_indeterminate") == "1", env


def test_rhel_tuned_initrd_is_a_second_initrd():
    """tuned's bootloader plugin, through grub2-mkconfig's 00_tuned: the
    entry's initrd line then names two files, both read from $root, and
    the options gain tuned's."""
    case = menu.variant("rhel8", "rhel8-tuned")
    cfg = os.path.join(case, "boot", "grub2", "grub.cfg")
    menu.edit(cfg, 'set tuned_params=""', 'set tuned_params="skew_tick=1"')
    menu.edit(cfg, 'set tuned_initrd=""', 'set tuned_initrd="/tuned-initrd.img"')
    path, _ = menu.disk(case, "rhel8-tuned", esp_volid="4E2F-1A3B", boot_uuid=BOOT_UUID)
    result = menu.run(path)
    assert result.initrds == [f"(hd0,gpt2)/initramfs-{NEW}.img",
                              "(hd0,gpt2)/tuned-initrd.img"], result.output
    assert result.cmdline == f"BOOT_IMAGE=(hd0,gpt2)/vmlinuz-{NEW} {KERNELOPTS} skew_tick=1", \
        result.output
