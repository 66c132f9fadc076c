# SPDX-License-Identifier: GPL-3.0-or-later
"""The ways a default entry is named, as GRUB takes them: by index, by
title, by id, and by a path into a submenu ("1>3", "title>title"), from
saved_entry (Debian with GRUB_DEFAULT=saved, which grub-set-default and
grub-reboot edit) and savedefault (Fedora with save_default=true)."""

import os

import menu
import test_debian
import test_fedora

RU = test_debian.RU


def debian_saved(name, saved_entry):
    """Debian's grub.cfg as grub-mkconfig writes it with GRUB_DEFAULT=saved,
    and grubenv's saved_entry as grub-set-default leaves it."""
    case = menu.variant("debian12", name)
    menu.edit(os.path.join(case, "root", "boot", "grub", "grub.cfg"),
              '   set default="0"', '   set default="${saved_entry}"')
    path, layout = menu.disk(case, name, esp_volid="4E2F-1A3B", root_uuid=RU)
    menu.set_grubenv(path, layout, "root", "/boot/grub/grubenv", saved_entry=saved_entry)
    return menu.run(path)


def test_default_by_index_path_into_the_submenu():
    result = debian_saved("default-index-path", "1>3")
    assert result.default_id() == test_debian.ADVANCED, result.menus
    assert result.kernel == f"(hd0,gpt2)/boot/vmlinuz-{test_debian.OLD}", result.output
    assert result.cmdline.endswith(" ro single"), result.output


def test_default_by_title_path_into_the_submenu():
    result = debian_saved("default-title-path", "Advanced options for Debian GNU/Linux>"
                          f"Debian GNU/Linux, with Linux {test_debian.OLD}")
    assert result.kernel == f"(hd0,gpt2)/boot/vmlinuz-{test_debian.OLD}", result.output
    assert result.cmdline.endswith(" ro quiet"), result.output


def test_default_by_id():
    result = debian_saved("default-id", "memtest86+-efi-serial")
    assert result.default_id() == "memtest86+-efi-serial", result.menus
    assert result.cmdline == "BOOT_IMAGE=/boot/memtest86+x64.efi console=ttyS0,115200"


def test_default_that_names_nothing_is_the_first_entry():
    result = debian_saved("default-unknown", "no-such-entry")
    assert result.default_id() == f"gnulinux-simple-{RU}", result.menus


def test_savedefault_remembers_the_entry_booted():
    """Fedora with save_default=true: each BLS entry starts with
    savedefault, which saves the chosen entry as saved_entry."""
    path, layout = test_fedora.image("fedora39-savedefault")
    menu.set_grubenv(path, layout, "boot", "/grub2/grubenv", save_default="true")
    chosen = f"{test_fedora.MID}-{test_fedora.NEW}"
    result = menu.run(path, request=chosen)
    assert result.kernel == f"(hd0,gpt2)/vmlinuz-{test_fedora.NEW}", result.output
    env = menu.grubenv(path, layout, "boot", "/grub2/grubenv")
    assert env.get("saved_entry") == chosen, env
