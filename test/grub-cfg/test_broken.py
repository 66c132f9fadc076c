# SPDX-License-Identifier: GPL-3.0-or-later
"""Broken input on a Fedora layout: each shows GRUB's error (or a clear
one) and leaves a working menu; nothing loops or hangs (menu.run gives
up after a minute)."""

import os

import menu
import test_fedora

MID, NEW, OLD = test_fedora.MID, test_fedora.NEW, test_fedora.OLD
ENTRIES = os.path.join("boot", "loader", "entries")


def fedora_variant(name, change):
    """Fedora's case with CHANGE(case directory) applied, then listed."""
    case = menu.variant("fedora39", name)
    change(case)
    path, layout = menu.disk(case, name, esp_volid="4E2F-1A3B", boot_uuid=test_fedora.BOOT_UUID)
    return path, layout


def write(case, name, data, mode="w"):
    with open(os.path.join(case, name), mode) as f:
        f.write(data)


def test_bls_entry_without_linux_is_left_out_with_a_message():
    path, _ = fedora_variant("broken-bls-no-linux", lambda case: write(
        case, os.path.join(ENTRIES, f"{MID}-6.6.1-200.fc39.x86_64.conf"),
        "title Fedora Linux (6.6.1-200.fc39.x86_64) 39\nversion 6.6.1-200.fc39.x86_64\n"
        "options root=UUID=x ro\n"))
    result = menu.run(path)
    assert any("no `linux' line, entry left out" in line for line in result.output.splitlines())
    assert result.ids()[:3] == [f"{MID}-{NEW}", f"{MID}-{OLD}", f"{MID}-0-rescue"], result.menus
    assert result.kernel == f"(hd0,gpt2)/vmlinuz-{OLD}", result.output


def test_bls_entry_of_binary_garbage_is_ignored():
    garbage = bytes(range(256)) * 8 + b"\nlinux\n\n\tinitrd\x00\n" + b"\xff" * 300
    path, _ = fedora_variant("broken-bls-garbage", lambda case: write(
        case, os.path.join(ENTRIES, f"{MID}-9.9.9-1.fc39.x86_64.conf"), garbage, "wb"))
    result = menu.run(path)
    assert f"{MID}-9.9.9-1.fc39.x86_64" not in result.ids(), result.menus
    assert result.kernel == f"(hd0,gpt2)/vmlinuz-{OLD}", result.output


def test_entry_whose_kernel_is_missing_says_so_and_boots_nothing():
    path, _ = fedora_variant("broken-missing-kernel", lambda case: os.unlink(
        os.path.join(case, "boot", f"vmlinuz-{NEW}")))
    result = menu.run(path, request=f"{MID}-{NEW}")
    assert f"file `/vmlinuz-{NEW}' not found." in result.errors, result.output
    assert result.kernel is None, result.output


def test_truncated_grubenv_leaves_a_menu():
    def truncate(case):
        env = os.path.join(case, "boot", "grub2", "grubenv")
        with open(env, "rb") as f:
            head = f.read(40)  # the header and half of saved_entry's line
        write(case, os.path.join("boot", "grub2", "grubenv"), head, "wb")
    path, _ = fedora_variant("broken-grubenv", truncate)
    result = menu.run(path)
    # What GRUB makes of the half line is no entry: the first one is default.
    assert result.default_id() == f"{MID}-{NEW}", result.output
    assert result.kernel == f"(hd0,gpt2)/vmlinuz-{NEW}", result.output


def test_grub_cfg_syntax_error_keeps_what_came_before():
    path, _ = fedora_variant("broken-syntax", lambda case: write(
        case, os.path.join("boot", "grub2", "grub.cfg"),
        "\nif [ \"${timeout}\" = 0 ]; then\n  set timeout=10\n", "a"))
    result = menu.run(path)
    assert result.ids()[:2] == [f"{MID}-{NEW}", f"{MID}-{OLD}"], result.output
    assert result.kernel == f"(hd0,gpt2)/vmlinuz-{OLD}", result.output


def test_entry_whose_kernel_is_missing_falls_back():
    """GRUB's fallback (here from grubenv, which load_env reads whole; an
    index, as GRUB reads it): the entry that cannot boot gives way to the
    fallback entry, which boots."""
    path, layout = fedora_variant("broken-fallback", lambda case: os.unlink(
        os.path.join(case, "boot", f"vmlinuz-{NEW}")))
    menu.set_grubenv(path, layout, "boot", "/grub2/grubenv", fallback="2")
    result = menu.run(path, request=f"{MID}-{NEW}")
    assert f"file `/vmlinuz-{NEW}' not found." in result.errors, result.output
    assert result.kernel == f"(hd0,gpt2)/vmlinuz-0-rescue-{MID}", result.output
