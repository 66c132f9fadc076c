# SPDX-License-Identifier: GPL-3.0-or-later
"""The menu is drawn right on every console at once: the serial line at its
own size, the screen at its own.

nmbl's consoles are the screen (console=tty0) and the serial line
(console=ttyS0); grub-emu draws on each as a terminal of its own, as
GRUB's EFI image draws on the firmware's console and on its serial
terminal: the serial line 80x24 unless grub.cfg's terminfo -g says
otherwise.  What the VM's serial line received is rendered by a terminal
emulator (pyte) at the size the line is said to have, and the assertions
are on that rendered screen: the title, the box, every entry, the
highlighted one, the countdown and the help lines, after the menu is
drawn and after Down and Up (typed on either console); the editor and
the command line at 80x24; the menu again at 132x43 after terminfo -g;
a menu of its own at 100x30 from a grub.cfg that says so, with a refused
kernel's sentence and "Press any key to continue".  The grub.cfg is
Debian's with
GRUB_TERMINAL="serial console" (grub-mkconfig's serial, terminal_input
and terminal_output lines).  The screen is read back by OCR: the same
menu, laid out for the screen."""

import functools
import os
import re
import time

import pyte

from fixture import (BOOT_TIMEOUT, TARGET_UP, VM, build_path, entry, expected_cmdline, kver,
                     make_disk)
from test_machines import wait_for_screen
from vm import KEY_DOWN, KEY_ENTER, KEY_ESC, KEY_HOME, KEY_UP

# What grub-mkconfig writes for GRUB_TERMINAL="serial console" with
# GRUB_SERIAL_COMMAND="serial --unit=0 --speed=115200 ..." (Debian's
# 00_header).
DEBIAN_SERIAL = """serial --unit=0 --speed=115200 --word=8 --parity=no --stop=1
terminal_input serial console
terminal_output serial console
"""
TITLES = ("Debian GNU/Linux",
          f"Debian GNU/Linux, with Linux {{kver}} (recovery mode)",
          "Unsigned kernel",
          "Wider serial menu")
WIDE_TITLES = ("Target at 100x30", "Unsigned kernel at 100x30")


def titles():
    return [t.format(kver=kver()) for t in TITLES]


def grub_cfg():
    k = kver()
    t = titles()
    cfg = DEBIAN_SERIAL + "set default=0\nset timeout=600\n\n"
    cfg += entry(t[0], f"/vmlinuz-{k}", "nmbl.entry=serial")
    cfg += entry(t[1], f"/vmlinuz-{k}", "single nmbl.entry=recovery")
    cfg += entry(t[2], "/vmlinuz-unsigned", "nmbl.entry=refused")
    cfg += f"menuentry '{t[3]}' {{\n\tconfigfile $prefix/wide.cfg\n}}\n"
    return cfg


def wide_cfg():
    """A grub.cfg of its own geometry for the serial line."""
    k = kver()
    return ("terminfo -g 100x30 serial\nset timeout=600\n\n"
            + entry(WIDE_TITLES[0], f"/vmlinuz-{k}", "nmbl.entry=wide")
            + entry(WIDE_TITLES[1], "/vmlinuz-unsigned", "nmbl.entry=refused"))


@functools.cache
def disk():
    wide = build_path("test", "serial-menu-wide.cfg")
    with open(wide, "w") as f:
        f.write(wide_cfg())
    return make_disk("serial-menu", grub_cfg(), {
        f"vmlinuz-{kver()}": build_path("test", "vmlinuz-test"),
        f"initrd.img-{kver()}": build_path("test", "target-initrd.img"),
        "vmlinuz-unsigned": build_path("test", "vmlinuz-unsigned"),
        "grub/wide.cfg": wide})


class Serial:
    """The VM's serial line as a terminal of a given size shows it, from a
    point in its output on."""

    def __init__(self, vm, since, size):
        self.vm, self.since, self.size = vm, since, size

    def screen(self):
        screen = pyte.Screen(*self.size)
        pyte.ByteStream(screen).feed(self.vm.raw[self.since:])
        return screen

    def wait(self, check, what, timeout=60):
        """Until CHECK(lines, screen) holds of the rendered screen; the
        lines.  The screen is rendered again as output comes."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            lines = screen.display
            if check(lines, screen):
                return lines
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not on the serial line at "
                                     f"{self.size[0]}x{self.size[1]}:\n" + "\n".join(lines))
            # The next look, once the machine has had time to write more.
            time.sleep(0.2)

    def restart(self):
        """What comes from now on."""
        self.since = len(self.vm.raw)


def menu_rows(lines, width):
    """The rows inside the menu's box that hold an entry: (row, highlighted,
    title) of each."""
    rows = []
    for y, line in enumerate(lines):
        m = re.fullmatch(r" \|([ *])(.*?)\s*\| ", line)
        if m and m.group(2) and len(line) == width:
            rows.append((y, m.group(1) == "*", m.group(2)))
    return rows


def menu_shown(want, highlighted, width):
    """A check that the whole menu is on the screen: GRUB's title, the
    box's two borders at the terminal's width, every entry of WANT with
    entry HIGHLIGHTED marked (and drawn in other colours), the help."""
    border = " +" + "-" * (width - 4) + "+ "

    def check(lines, screen):
        rows = menu_rows(lines, width)
        if [t for _, _, t in rows] != list(want):
            return False
        if [h for _, h, _ in rows] != [i == highlighted for i in range(len(want))]:
            return False
        # The highlighted entry in colours of its own.
        colours = {h: screen.buffer[y][3].bg for y, h, _ in rows}
        if colours[True] == colours[False]:
            return False
        text = "\n".join(lines)
        return (sum(line == border for line in lines) == 2 and "GNU GRUB  version" in text
                and "Use the ^ and v keys to select which entry is highlighted." in text
                and "Press enter to boot the selected OS" in text)
    return check


def counting_down(lines, _):
    return any("The highlighted entry will be executed automatically in" in line
               for line in lines)


@functools.cache
def boot():
    """The session, once: what it saw, or how it failed (for each test to
    report, without booting again)."""
    seen = {}
    try:
        session(seen)
    except Exception as e:  # noqa: BLE001 -- each test raises it again
        seen["failed"] = e
    return seen


def seen_steps():
    seen = boot()
    if "failed" in seen:
        raise seen["failed"]
    return seen


def session(seen):
    """One boot: the menu at 80x24 on the serial line and on the screen, the
    editor, the command line, a refused kernel, the menu at 132x43, the
    100x30 grub.cfg, and its target booted; what each step saw, in SEEN."""
    with VM(disk(), snapshot=True, qmp=True,
            log_file=build_path("test", "serial-menu.log")) as vm:
        vm.wait_for(r"nmbl-init: startup:", timeout=BOOT_TIMEOUT)
        serial = Serial(vm, vm.raw.rfind(b"nmbl-init: startup:"), (80, 24))
        want = titles()
        seen["menu"] = serial.wait(
            lambda lines, s: menu_shown(want, 0, 80)(lines, s) and counting_down(lines, s),
            "the menu, counting down")
        # The screen, its own size: the title and an entry that is not
        # highlighted (OCR loses the highlighted one's colours).
        seen["screen"] = wait_for_screen(vm, ("GNU GRUB", "recovery mode"), timeout=60)

        vm.send(KEY_DOWN)
        seen["down"] = serial.wait(menu_shown(want, 1, 80), "the menu after Down")
        vm.send(KEY_UP)
        seen["up"] = serial.wait(menu_shown(want, 0, 80), "the menu after Up")
        # A key typed at the screen's keyboard drives the same menu, and
        # the serial line shows it.
        vm.qmp().keys("down")
        seen["keyboard"] = serial.wait(menu_shown(want, 1, 80), "the menu after the keyboard's Down")
        vm.send(KEY_UP)
        serial.wait(menu_shown(want, 0, 80), "the menu after Up again")

        serial.restart()
        vm.send("e")
        seen["editor"] = serial.wait(
            lambda lines, _: any(re.fullmatch(r" \|\s*linux\s+/vmlinuz-\S+ root=.*\| ", line)
                                 for line in lines)
            and "Minimum Emacs-like screen editing is supported." in "\n".join(lines),
            "the entry's editor")
        serial.restart()
        vm.send(KEY_ESC)
        serial.wait(menu_shown(want, 0, 80), "the menu after the editor")

        serial.restart()
        vm.send("c")
        seen["cmdline"] = serial.wait(
            lambda lines, _: any(line.startswith("grub> ") for line in lines)
            and "Minimal BASH-like line editing is supported." in "\n".join(lines),
            "GRUB's command line")
        vm.send("terminfo -g 132x43 serial" + KEY_ENTER)
        serial.restart()
        vm.send(KEY_ESC)
        serial.size = (132, 43)
        seen["132x43"] = serial.wait(menu_shown(want, 0, 132), "the menu at 132x43")

        serial.restart()
        vm.send(KEY_HOME + KEY_DOWN * 3 + KEY_ENTER)
        serial.size = (100, 30)
        seen["100x30"] = serial.wait(menu_shown(WIDE_TITLES, 0, 100), "the 100x30 menu")

        serial.restart()
        vm.send(KEY_DOWN + KEY_ENTER)
        seen["refused"] = serial.wait(
            lambda lines, _: "Press any key to continue" in "\n".join(lines)
            and re.search(r"cannot load /vmlinuz-unsigned: the kernel is not\s+signed",
                          "\n".join(lines)) is not None,
            "the refused kernel's sentence")
        serial.restart()
        vm.send(KEY_ENTER)
        serial.wait(menu_shown(WIDE_TITLES, 0, 100), "the 100x30 menu again")
        vm.send(KEY_HOME + KEY_ENTER)
        seen["target"] = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=60)


def test_serial_line_menu_at_80x24_before_and_after_moving():
    seen = seen_steps()
    # Nothing of the menu outside the terminal's 80 columns: no line
    # wrapped into the next, no row of the box left half drawn.
    for step in ("menu", "down", "up"):
        assert all(len(line) == 80 for line in seen[step]), step


def test_keys_from_either_console_drive_the_same_menu():
    seen = seen_steps()
    assert [h for _, h, _ in menu_rows(seen["keyboard"], 80)] == [False, True, False, False]


def test_editor_command_line_and_refusal_fit_the_serial_line():
    seen = seen_steps()
    assert any("Press Ctrl-x or F10 to boot" in line for line in seen["editor"]), \
        "\n".join(seen["editor"])
    refused = "\n".join(seen["refused"])
    assert "the kernel is not" in refused, refused


def test_terminfo_geometry_and_a_grub_cfg_of_its_own_size():
    seen = seen_steps()
    assert sum(line.startswith(" +" + "-" * 128) for line in seen["132x43"]) == 2
    assert sum(line.startswith(" +" + "-" * 96) for line in seen["100x30"]) == 2
    want = expected_cmdline(f"/vmlinuz-{kver()}", "nmbl.entry=wide")
    assert seen["target"].group(2) == want, seen["target"].group(2)


def test_screen_shows_the_menu_at_its_own_size():
    shown = seen_steps()["screen"]
    assert "GNU GRUB" in shown and "recovery mode" in shown, shown
