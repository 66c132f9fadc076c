# SPDX-License-Identifier: GPL-3.0-or-later
"""A real Debian 12, installed from Debian's packages, boots and updates
through nmbl, started as a PC starts it: the firmware starts shim, shim
starts nmbl (the machine is made by test/system/mkimage).

Eight starts of one machine (disk and EFI variables kept from one to the
next; each start is one QEMU run, a reboot ends it):

1. nmbl's first start, offered by its package (BootNext), through shim:
   Debian's own grub.cfg, its default entry booted without a second
   kernel; the kernel trusts Debian's CA as shim handed it over; systemd
   reaches multi-user.target; bootctl and systemd-analyze name nmbl;
   nmbl-bless.service made nmbl's slot the default.  The owner makes the
   machine's key and asks shim to enrol it as a MOK (nmbl-key, mokutil's
   password typed); a UKI signed with it is not offered while MokManager
   has not enrolled the key.
2. shim starts MokManager, which enrols the key: the test types its
   prompts as the owner would, and it restarts the machine.
3. The key is a MOK, in the kernel's keyrings.  A kernel update from a
   package: Debian's hooks write the initramfs and grub.cfg, and nmbl's
   (zz-nmbl) a UKI around the new kernel, signed with the machine's key
   and offered once in the other slot.
4. shim starts that slot; the new kernel is the default, as it would be
   with GRUB, and boots without a second kernel; the new slot is blessed.
   grub-set-default picks the entry of the starts to come, grub-reboot
   the next start's.
5. grub-reboot's entry boots, and next_entry is spent.
6. grub-set-default's entry boots.  Then a broken kernel update: the new
   kernel replaced by one signed with a key no keyring trusts, made the
   default.
7. nmbl refuses it and says why, the menu comes back, and the previous
   kernel, picked from Debian's "Advanced options" submenu, boots.  The
   broken kernel's package is removed: nmbl's hook offers the UKI of the
   kernel left.
8. That UKI boots the kernel left without a second kernel.

(systemd's one-shot request, bootctl set-oneshot, is asked of a real
system in test_raid, and of every kind of entry in test_entry_request.)
"""

import re

from machine import (BOOT_TIMEOUT, MENU_READY, SYSTEM_UP, Machine, Shell, expected_cmdline,
                     info, loader_variable, root_uuid, selected, take_default)
from fixture import words  # noqa: E402  (machine puts test/boot on the path)
from vm import KEY_DOWN, KEY_ENTER

DIRECT = "without a second kernel"
# Where shim and nmbl's slots are: beside Debian's shim, in its directory.
SHIM_DIR = "\\EFI\\debian"
# The password mokutil asks for, which MokManager asks again (test only).
MOK_PASSWORD = "nmbl-mok-1"
KEY_SUBJECT = "nmbl-debian machine key"


def up(vm, kver, enter=True):
    """Wait for the system's line: kernel KVER with Debian's command line,
    multi-user.target reached.  ENTER: the default entry taken at once
    (take_default()); the first start waits for the countdown, as a machine
    left alone, and so do starts whose default is in a submenu."""
    if enter:
        take_default(vm)
    m = vm.wait_for(SYSTEM_UP, timeout=BOOT_TIMEOUT)
    release, state, cmdline = m.groups()
    assert release == kver, f"booted {release}, not {kver}"
    assert state == "active", f"multi-user.target is {state}"
    assert cmdline.strip() == expected_cmdline(kver), cmdline


def entry_ids():
    uuid = root_uuid()
    m = info()
    return {
        "simple": f"gnulinux-simple-{uuid}",
        # An entry of a submenu is named by the path GRUB's grub-reboot
        # takes: the submenu's id, ">", the entry's id.
        "nmbl-kernel": f"gnulinux-advanced-{uuid}>gnulinux-{m['kernel']}-advanced-{uuid}",
        "other-kernel": f"gnulinux-advanced-{uuid}>gnulinux-{m['other_kernel']}-advanced-{uuid}",
    }


def first_linux_line(grub_cfg):
    """The kernel of the first menu entry: what GRUB boots by default."""
    m = re.search(r"^\s*linux\s+(\S+)", grub_cfg, re.M)
    return m and m.group(1)


def check_direct(sh, kver):
    assert f"booting /boot/vmlinuz-{kver} {DIRECT}" in sh.check(
        f"journalctl -b -o cat -t nmbl --grep '{DIRECT}'"), "no direct boot in the journal"


def check_through_shim(sh, slot):
    """shim started SLOT's file, and handed the kernel what it trusts."""
    image = loader_variable(sh, "LoaderImageIdentifier")
    assert image == f"{SHIM_DIR}\\nmbl-{slot}.efi", image
    keys = sh.check("journalctl -b -k -o cat --grep 'X.509'")
    assert "Loading X.509 certificate: UEFI:MokListRT" in keys, keys
    assert "Loaded X.509 cert 'Debian Secure Boot CA" in keys, keys
    return keys


def offered(sh, good, trial):
    """Slot GOOD is good, slot TRIAL on trial and the firmware's BootNext;
    what "nmbl bootcfg status" says."""
    slots = sh.check("nmbl bootcfg status")
    assert re.search(rf"slot {good}: good", slots), slots
    number = re.search(rf"slot {trial}: trial .*\(Boot([0-9A-F]{{4}})\)", slots)
    assert number, slots
    assert f"BootNext: {number.group(1)}" in sh.check("efibootmgr")
    return slots


def tried(vm, slot, kver, password):
    """A start of SLOT on trial, through shim: kernel KVER booted without a
    second kernel, and the slot blessed.  The root shell."""
    vm.wait_for(rf'nmbl: boot-current: Boot[0-9A-F]{{4}} "nmbl \(slot {slot}\)"',
                timeout=BOOT_TIMEOUT, clean=True)
    up(vm, kver)
    sh = Shell(vm, password)
    check_direct(sh, kver)
    check_through_shim(sh, slot)
    sh.check("systemctl is-active nmbl-bless.service")
    slots = sh.check("nmbl bootcfg status")
    assert re.search(rf"slot {slot}: good", slots) and f"current: slot {slot}" in slots, slots
    return sh


def analyze(sh):
    """systemd-analyze's line: the loader's part and the whole boot."""
    out = sh.check("systemd-analyze").strip().splitlines()[0]
    assert re.search(r"\(firmware\) \+ [\d.]+m?s \(loader\) \+", out), out
    print(f"    systemd-analyze: {out}", flush=True)
    return out


def mok_manager(vm):
    """MokManager's prompts for a key that waits to be enrolled, answered
    as its owner answers them; it restarts the machine."""
    vm.wait_for(r"Press any key to perform MOK management", timeout=BOOT_TIMEOUT, clean=True)
    vm.send_raw(KEY_ENTER)
    # The menu: "Continue boot", then "Enroll MOK".
    vm.wait_for(r"Enroll MOK", timeout=60, clean=True)
    vm.send(KEY_DOWN + KEY_ENTER)
    # The keys waiting ("View key 0"), then "Continue".
    vm.wait_for(r"View key 0", timeout=60, clean=True)
    vm.send(KEY_DOWN + KEY_ENTER)
    # "Enroll the key(s)?": "No", then "Yes".
    vm.wait_for(r"Enroll the key\(s\)\?", timeout=60, clean=True)
    vm.send(KEY_DOWN + KEY_ENTER)
    vm.wait_for(r"Password:", timeout=60, clean=True)
    vm.send(MOK_PASSWORD + KEY_ENTER)
    # The menu again, its first item "Reboot" now.
    vm.wait_for(r"Reboot", timeout=60, clean=True)
    vm.send_raw(KEY_ENTER)
    vm.wait_exit(timeout=60)


def test_debian_boots_and_updates_through_nmbl():
    m = info()
    kver, other = m["kernel"], m["other_kernel"]
    ids = entry_ids()
    machine = Machine("system")

    # 1. First start, through shim: nmbl's slot on trial, Debian's default
    # entry, direct boot.  The machine's key, asked to be a MOK.
    with machine.vm("1-first") as vm:
        vm.wait_for(r'nmbl: boot-current: Boot[0-9A-F]{4} "nmbl \(slot a\)"', timeout=BOOT_TIMEOUT,
                    clean=True)
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        up(vm, kver, enter=False)
        sh = Shell(vm, m["root_password"])
        check_direct(sh, kver)
        check_through_shim(sh, "a")
        status = sh.check("bootctl status")
        assert re.search(r"Product: nmbl \d", status), status
        assert selected(sh) == ids["simple"]
        before = analyze(sh)
        sh.check("systemctl is-active nmbl-bless.service")
        slots = sh.check("nmbl bootcfg status")
        assert re.search(r"slot a: good", slots) and "current: slot a" in slots, slots
        order = sh.check("efibootmgr -v")
        slot_a = re.search(r"Boot([0-9A-F]{4})\* nmbl \(slot a\)", order).group(1)
        assert re.search(rf"BootOrder: {slot_a},", order), order
        assert "BootNext" not in order, order
        assert re.search(rf"Boot{slot_a}\* nmbl \(slot a\).*shimx64\.efi", order), order

        out = sh.check(f"nmbl-key create --subject '{KEY_SUBJECT}' 2>&1")
        assert "made /etc/nmbl/keys/nmbl.key" in out, out
        # mokutil asks for a password, which MokManager asks for again.
        out = sh.check("nmbl-key enroll --mok 2>&1", answers=[
            ("input password: ", MOK_PASSWORD), ("input password again: ", MOK_PASSWORD)])
        assert "MokManager asks to confirm" in out, out
        out = sh.check("nmbl-key status 2>&1")
        assert f"CN = {KEY_SUBJECT}" in out, out
        assert "to be enrolled as a MOK at the next start" in out, out
        # A UKI signed with that key now: shim would refuse it until
        # MokManager enrolled the key.  Not offered; the slots as they were.
        sh.check("cp /usr/lib/nmbl/*/nmbl.efi /root/unsigned.efi && "
                 "sbattach --remove /root/unsigned.efi && "
                 "sbsign --key /etc/nmbl/keys/nmbl.key --cert /etc/nmbl/keys/nmbl.crt "
                 "--output /root/resigned.efi /root/unsigned.efi 2>&1")
        code, out = sh.run("nmbl bootcfg install /root/resigned.efi 2>&1")
        assert code != 0 and "waits to be enrolled as a Machine Owner Key" in out, out
        assert sh.check("nmbl bootcfg status") == slots
        assert "BootNext" not in sh.check("efibootmgr")
        sh.reboot()

    # 2. shim starts MokManager, which asks its owner to confirm the key.
    with machine.vm("2-mok") as vm:
        mok_manager(vm)

    # 3. The key is a MOK.  A kernel update from a package: Debian's hooks
    # run, nmbl's last.
    with machine.vm("3-enrolled") as vm:
        up(vm, kver)
        sh = Shell(vm, m["root_password"])
        check_direct(sh, kver)
        keys = check_through_shim(sh, "a")
        assert f"Loaded X.509 cert '{KEY_SUBJECT}" in keys, keys
        assert "enrolled as a MOK." in sh.check("nmbl-key status 2>&1")
        deb = sh.check(f"ls {m['payload']}/linux-image-{other}_*.deb").strip()
        out = sh.check(f"DEBIAN_FRONTEND=noninteractive apt-get install -y {deb} 2>&1",
                       timeout=900)
        assert f"update-initramfs: Generating /boot/initrd.img-{other}" in out, out
        assert f"Found linux image: /boot/vmlinuz-{other}" in out, out
        assert not re.search(r"^nmbl: ", out, re.M), out
        grub_cfg = sh.check("cat /boot/grub/grub.cfg")
        assert first_linux_line(grub_cfg) == f"/boot/vmlinuz-{other}", \
            f"update-grub did not put {other} first"
        uki = f"/var/lib/nmbl/{other}/nmbl.efi"
        sh.check(f"sbverify --cert /etc/nmbl/keys/nmbl.crt {uki}")
        inside = sh.check(f"nmbl inspect {uki}")
        assert other in inside, inside
        offered(sh, "a", "b")
        sh.reboot()

    # 4. The new nmbl, tried once through shim, which trusts it by the MOK:
    # the new kernel is the default, and boots without a second kernel.
    # grub-set-default for the starts to come, grub-reboot for the next.
    with machine.vm("4-update") as vm:
        sh = tried(vm, "b", other, m["root_password"])
        assert selected(sh) == ids["simple"]
        after = analyze(sh)
        # grub-set-default unsets next_entry: it comes first.
        sh.check(f"grub-set-default '{ids['other-kernel']}'")
        sh.check(f"grub-reboot '{ids['nmbl-kernel']}'")
        env = sh.check("grub-editenv list")
        assert f"next_entry={ids['nmbl-kernel']}" in env, env
        assert f"saved_entry={ids['other-kernel']}" in env, env
        sh.reboot()
    print(f"    before the update: {before}\n    after: {after}", flush=True)

    # 5. grub-reboot's entry (by kexec now), once.
    with machine.vm("5-grub-reboot") as vm:
        up(vm, kver, enter=False)
        sh = Shell(vm, m["root_password"])
        assert selected(sh) == ids["nmbl-kernel"]
        env = sh.check("grub-editenv list")
        assert not re.search(r"^next_entry=.", env, re.M), f"next_entry not spent:\n{env}"
        assert f"saved_entry={ids['other-kernel']}" in env, env
        sh.reboot()

    # 6. grub-set-default's entry.  Then a broken update, made the default.
    with machine.vm("6-saved") as vm:
        up(vm, other, enter=False)
        sh = Shell(vm, m["root_password"])
        assert selected(sh) == ids["other-kernel"]
        check_direct(sh, other)
        sh.check(f"cp {m['payload']}/vmlinuz-{other}.untrusted /boot/vmlinuz-{other}")
        sh.check("grub-set-default 0")
        sh.reboot()

    # 7. Refused, menu back, the previous kernel from the submenu.  The
    # broken kernel's package removed: nmbl's UKI follows the kernel left.
    with machine.vm("7-broken") as vm:
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        vm.wait_for(words(f"cannot load /boot/vmlinuz-{other}: the kernel is signed by a key "
                          "this machine does not trust"), timeout=BOOT_TIMEOUT, clean=True)
        vm.wait_for(r"nmbl test: a key no keyring trusts", timeout=60, clean=True)
        # As GRUB: the error's own prompt, then the default entry's failure.
        vm.wait_for(r"Press any key to continue", timeout=60, clean=True)
        vm.send_raw(KEY_ENTER)
        vm.wait_for(r"Failed to boot both default and fallback entries", timeout=60, clean=True)
        vm.wait_for(r"Press any key to continue", timeout=60, clean=True)
        vm.send_raw(KEY_ENTER)
        vm.wait_for(r"Advanced options for Debian GNU/Linux", timeout=60, clean=True)
        # Debian's menu: the newest kernel, then "Advanced options", whose
        # entries are each kernel and its recovery mode, newest first.
        since = vm.pos(clean=True)
        vm.send(KEY_DOWN + KEY_ENTER)
        vm.wait_for(re.escape(f"Debian GNU/Linux, with Linux {kver}"), timeout=60, clean=True)
        assert "Loading Linux" not in vm.clean_log()[since:], \
            "the submenu booted an entry by itself instead of showing its entries"
        vm.send(KEY_DOWN + KEY_DOWN + KEY_ENTER)
        up(vm, kver, enter=False)
        sh = Shell(vm, m["root_password"])
        assert selected(sh) == ids["nmbl-kernel"]
        out = sh.check(f"DEBIAN_FRONTEND=noninteractive apt-get purge -y linux-image-{other} 2>&1",
                       timeout=600)
        assert not re.search(r"^nmbl: ", out, re.M), out
        assert first_linux_line(sh.check("cat /boot/grub/grub.cfg")) == f"/boot/vmlinuz-{kver}"
        offered(sh, "b", "a")
        sh.reboot()

    # 8. The kernel left, booted without a second kernel by nmbl's UKI
    # around it; that slot blessed.
    with machine.vm("8-removed") as vm:
        tried(vm, "a", kver, m["root_password"])
