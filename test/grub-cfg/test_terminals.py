# SPDX-License-Identifier: GPL-3.0-or-later
"""grub.cfg's serial, terminal_input, terminal_output and terminfo lines on
nmbl's grub-emu, run on this machine with two pseudo-terminals as
nmbl-console gives them: the screen's on its standard input and output,
the serial line's on the descriptor GRUB_EMU_SERIAL_FD names
(grub-emu-patches/0030).  What each terminal received is read apart:
"console" stands for both (Linux's consoles, as the firmware's console
takes in the serial line), "serial" for the serial line alone; what
nmbl cannot honour (another speed) is said once, not failed; a serial
port that is not there is GRUB's error."""

import os
import pty
import select
import subprocess
import tempfile
import time

import menu

SPEED = "115200"


def run(cfg, serial=True, timeout=30):
    """grub-emu on CFG (which ends it with `reboot`): what the screen's
    terminal and the serial line's received, as text."""
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "grub.cfg"), "w") as f:
            f.write(cfg + "reboot\n")
        screen, screen_side = pty.openpty()
        line, line_side = pty.openpty()
        env = {"TERM": "dumb"}
        if serial:
            env.update(GRUB_EMU_SERIAL_FD=str(line_side), GRUB_EMU_SERIAL_SPEED=SPEED)
        proc = subprocess.Popen([menu.grub_emu(), "--root=host", f"--directory={tmp}"],
                                stdin=screen_side, stdout=screen_side, stderr=screen_side,
                                pass_fds=(line_side,), env=env)
        os.close(screen_side)
        os.close(line_side)
        got = {screen: bytearray(), line: bytearray()}
        reading = set(got)
        deadline = time.monotonic() + timeout
        try:
            while reading:
                assert time.monotonic() < deadline, f"grub-emu still running after {timeout} s"
                for fd in select.select(list(reading), [], [], 0.2)[0]:
                    try:
                        chunk = os.read(fd, 65536)
                    except OSError:  # EIO: grub-emu has closed its side
                        chunk = b""
                    got[fd] += chunk
                    if not chunk:
                        reading.discard(fd)
        finally:
            proc.kill()
            proc.wait()
            os.close(screen)
            os.close(line)
        return [menu.ANSI.sub("", bytes(got[fd]).decode(errors="replace")).replace("\r", "")
                for fd in (screen, line)]


def test_console_names_both_serial_the_line_alone():
    screen, line = run("echo BOTH-AT-FIRST\n"
                       "terminal_output serial\necho SERIAL-ALONE\n"
                       "terminal_output console\necho CONSOLE-IS-BOTH\n"
                       "terminal_output serial console\necho BOTH-AGAIN\n")
    for word in ("BOTH-AT-FIRST", "CONSOLE-IS-BOTH", "BOTH-AGAIN"):
        assert word in screen and word in line, (word, screen, line)
    assert "SERIAL-ALONE" in line and "SERIAL-ALONE" not in screen, (screen, line)
    assert "error" not in screen + line, (screen, line)


def test_debian_serial_lines_and_another_speed_said_once():
    _, line = run("serial --unit=0 --speed=115200 --word=8 --parity=no --stop=1\n"
                  "terminal_input serial console\nterminal_output serial console\n"
                  "serial --speed=9600\nserial --unit 0 --speed 9600\necho DONE\n")
    said = f"serial: the line stays at {SPEED} bit/s, the speed Linux's console= gave it"
    assert line.count(said) == 1, line
    assert "error" not in line and "DONE" in line, line


def test_a_port_that_is_not_there_is_grubs_error():
    _, line = run("serial --unit=1\necho DONE\n")
    assert "error: serial port `com1' isn't found." in line, line
    screen, _ = run("serial --unit=0\nterminal_output serial console\necho DONE\n",
                    serial=False)
    assert "error: serial port `com0' isn't found." in screen, screen
    assert "error: terminal `serial' isn't found." in screen and "DONE" in screen, screen


def test_terminfo_geometry_is_the_serial_lines_own():
    """A word of 95 characters: broken on the screen's terminal (80 columns
    here: the pseudo-terminal says no size), whole on the serial line once
    terminfo -g made it 100 columns, broken there before."""
    word = "W" * 95
    screen, line = run(f"echo {word}\nterminfo -g 100x30 serial\necho {word}\n")
    assert "error" not in screen + line, (screen, line)
    assert word not in screen, screen
    assert line.count(word) == 1, line
