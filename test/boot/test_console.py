# SPDX-License-Identifier: GPL-3.0-or-later
"""Under Secure Boot nothing a console user types, and nothing that happens
to the menu, gives more than GRUB would: no shell, the menu comes back.

The console attacks run on the default UKI (no shell in it at all) with
GRUB's superusers set, as a user at the machine would try them: the
terminal's signal and flow-control keys, escape sequences, the SysRq keys
that would signal or kill processes (serial BREAK and the PS/2 keyboard),
and a flood of keys.  The faults run on the self-test UKI, which has a
shell (but not nmbl.shell on its command line): grub-emu killed by
signals, by the OOM killer, its parent killed; each time the menu must
come back, never the shell.  Both end by booting the target, with the
entry's command line: the menu still works."""

import functools
import os
import random
import re
import socket
import tempfile

from fixture import (BOOT_TIMEOUT, MENU_READY, TARGET_UP, VM, build_path, entry,
                     expected_cmdline, kver, make_disk, words)
from vm import KEY_ESC, KEY_ENTER, Qmp

# Signals, flow control, end of file, and what terminals send for keys.
SIGNAL_KEYS = b"\x1c\x03\x1a\x04\x13\x11\x19\x0f\x16"
ESCAPES = b"\x1b[A\x1b[B\x1b[24~\x1bOP\x1b[200~\x1b]0;x\x07\x1bc"
# SysRq commands that would signal (e, i), kill what holds the console (k),
# run the OOM killer (f), or crash the kernel (c): all disabled.
SYSRQ_REFUSED = "eikfc"
SYSRQ_DISABLED = r"This sysrq operation is disabled"


def grub_cfg():
    return ("set superusers=root\npassword root nmbl-secret\nset timeout=600\n\n"
            + entry("Target", f"/vmlinuz-{kver()}", "nmbl.entry=console").replace(
                "--class debian", "--unrestricted --class debian", 1))


@functools.cache
def disk():
    return make_disk("console", grub_cfg(), {
        f"vmlinuz-{kver()}": build_path("test", "vmlinuz-test"),
        f"initrd.img-{kver()}": build_path("test", "target-initrd.img")})


def flood(n=3000, seed=14):
    """Control bytes, DEL and bytes >= 0x80, in a fixed random order: all but
    the keys that end GRUB's menu by design (Enter, Ctrl-J and Ctrl-F boot
    the highlighted entry) and Esc, which would start escape sequences."""
    rng = random.Random(seed)
    keys = [b for b in range(0x100)
            if (b < 0x20 or b >= 0x7f) and b not in (0x06, 0x0a, 0x0d, 0x1b)]
    return bytes(rng.choice(keys) for _ in range(n))


PRESS_ANY_KEY = r"Press any key to continue"
MENU_SHOWN = r"Use the .* keys to select which entry is highlighted"


def menu_answers(vm, token, typed=None):
    """The menu is alive and reads keys: 'c' asks who the superuser is.

    Keys sent before may still be on their way, or may have left GRUB's
    username prompt open ("\\ec" is Esc then 'c'): the probe types a name
    no other key can echo, TOKEN, so what it waits for is its own prompt,
    and ends that prompt itself (Enter, then Esc at the password, and Esc
    at GRUB's "Press any key" if it asks), leaving the menu with no key
    pending.
    TYPED types text on a keyboard; the serial line by default."""
    typed = typed or vm.send
    typed("c" + token + KEY_ENTER)
    vm.wait_for(re.escape(token), timeout=60, clean=True)
    vm.wait_for(r"Enter password:", timeout=60, clean=True)
    typed(KEY_ESC)
    vm.wait_for(r"access denied", timeout=60, clean=True)
    # GRUB 2.14 waits for a key after a refused command line (10 s at
    # most), not after a refused editor: a pending Esc-e may have opened
    # the prompt.  Esc ends the wait; if the wait is over already, Esc does
    # nothing in the menu, where Enter would boot.
    back = vm.wait_for(f"{PRESS_ANY_KEY}|{MENU_SHOWN}", timeout=60, clean=True)
    if re.match(PRESS_ANY_KEY, back.group(0)):
        typed(KEY_ESC)
        vm.wait_for(MENU_SHOWN, timeout=60, clean=True)


def keyboard(qmp):
    """Type text on the PS/2 keyboard."""
    names = {KEY_ENTER: "ret", KEY_ESC: "esc"}
    return lambda text: qmp.keys(*(names.get(ch, ch) for ch in text))


def boot_the_target(vm):
    vm.send(KEY_ENTER)
    up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
    want = expected_cmdline(f"/vmlinuz-{kver()}", "nmbl.entry=console")
    assert up.group(2) == want, f"target's /proc/cmdline\n  {up.group(2)!r}\nexpected\n  {want!r}"
    vm.wait_exit(timeout=60)


def assert_no_shell(log):
    for sign in ("nmbl.shell", "sh: ", "# ", "can't access tty", "job control"):
        assert sign not in log, f"the console shows {sign!r}: a shell ran"


def test_console_keys_and_sysrq_never_end_the_menu():
    with tempfile.TemporaryDirectory(prefix="nmbl-qmp-") as tmp:
        sock = os.path.join(tmp, "qmp")
        with VM(disk(), snapshot=True, qemu_args=["-qmp", f"unix:{sock},server=on,wait=off"],
                log_file=build_path("test", "console-keys.log")) as vm:
            qmp = Qmp(sock, timeout=BOOT_TIMEOUT)
            try:
                vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
                vm.send_raw(SIGNAL_KEYS)
                vm.send_raw(ESCAPES)
                menu_answers(vm, "qzserial")
                # The same keys on the PS/2 keyboard: the screen's console.
                for key in ("backslash", "c", "z", "s"):
                    qmp.execute("send-key", keys=[{"type": "qcode", "data": "ctrl"},
                                                  {"type": "qcode", "data": key}])
                menu_answers(vm, "qzkeyboard", keyboard(qmp))
                # SysRq: a BREAK on the serial line, then the command key.
                # First the one a console may use, the log level: with
                # "quiet", the kernel shows its refusals only when no one
                # holds the console at that instant (the menu drawing on
                # the screen does); at level 9 it shows each one.
                qmp.execute("chardev-send-break", id="serial0")
                vm.send_raw(b"9")
                vm.wait_for(r"Loglevel set to 9", timeout=60, clean=True)
                for key in SYSRQ_REFUSED:
                    qmp.execute("chardev-send-break", id="serial0")
                    vm.send_raw(key.encode())
                    vm.wait_for(SYSRQ_DISABLED, timeout=60, clean=True)
                qmp.execute("send-key", keys=[{"type": "qcode", "data": "alt"},
                                              {"type": "qcode", "data": "sysrq"},
                                              {"type": "qcode", "data": "i"}])
                vm.wait_for(SYSRQ_DISABLED, timeout=60, clean=True)
                vm.send_raw(flood())
                menu_answers(vm, "qzflood")
                boot_the_target(vm)
            finally:
                qmp.close()
            log = vm.clean_log()
    assert len(re.findall(SYSRQ_DISABLED, log)) == len(SYSRQ_REFUSED) + 1, \
        "a SysRq command the console must not have ran"
    assert "the boot menu" not in log, "the menu ended: nmbl-init had to bring it back"
    assert_no_shell(log)


class Faults:
    """The self-test image's fault listener, on the VM's second serial port."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(BOOT_TIMEOUT)
        self.sock.connect(path)
        self.buf = b""

    def ask(self, command, answer):
        """Send COMMAND until the listener answers (it starts with the menu),
        and return its answer line."""
        self.sock.sendall(command.encode() + b"\n")
        while True:
            m = re.search(rb"(NMBL-FAULT [^\r\n]*)\r?\n", self.buf)
            if m:
                self.buf = self.buf[m.end():]
                line = m.group(1).decode()
                assert re.fullmatch(answer, line), f"fault listener: {line!r}, wanted {answer!r}"
                return line
            self.buf += self.sock.recv(4096)

    def close(self):
        self.sock.close()


def test_menu_killed_or_crashed_comes_back_without_a_shell():
    image = make_disk("console-faults", grub_cfg(), {
        f"vmlinuz-{kver()}": build_path("test", "vmlinuz-test"),
        f"initrd.img-{kver()}": build_path("test", "target-initrd.img")},
        uki="test/nmbl-selftest.efi")
    with tempfile.TemporaryDirectory(prefix="nmbl-fault-") as tmp:
        sock = os.path.join(tmp, "fault")
        args = ["-chardev", f"socket,id=fault,path={sock},server=on,wait=off",
                "-serial", "chardev:fault"]
        with VM(image, snapshot=True, qemu_args=args,
                log_file=build_path("test", "console-faults.log")) as vm:
            vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
            faults = Faults(sock)
            try:
                faults.ask("ping", "NMBL-FAULT ready")
                for signal, number in (("SEGV", 11), ("TERM", 15), ("KILL", 9),
                                       ("ABRT", 6), ("BUS", 7)):
                    faults.ask(f"kill {signal}", rf"NMBL-FAULT killed \d+ {signal}")
                    vm.wait_for(words(f"the boot menu was ended by signal {number}"),
                                timeout=60, clean=True)
                    vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
                faults.ask("oom", r"NMBL-FAULT oom \d+")
                vm.wait_for(r"Killed process \d+ \(grub-emu\)", timeout=60, clean=True)
                vm.wait_for(words("the boot menu was ended by signal 9"), timeout=60, clean=True)
                vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
                # Its parent gone, the menu goes with it, and comes back.
                faults.ask("kill-console", r"NMBL-FAULT killed \d+ console")
                vm.wait_for(words("the boot menu was ended by signal 9"), timeout=60, clean=True)
                vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
                faults.ask("ping", "NMBL-FAULT ready")
            finally:
                faults.close()
            boot_the_target(vm)
            log = vm.clean_log()
    assert_no_shell(log)
