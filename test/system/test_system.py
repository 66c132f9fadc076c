# SPDX-License-Identifier: GPL-3.0-or-later
"""A real Debian 12, installed from Debian's packages, boots and updates
through nmbl (the machine is made by test/system/mkimage).

Six starts of one machine (disk and EFI variables kept from one to the
next; each start is one QEMU run, `systemctl reboot` ends it):

1. nmbl's first start, offered by its package (BootNext): Debian's own
   grub.cfg, its default entry booted without a second kernel; systemd
   reaches multi-user.target; bootctl and systemd-analyze name nmbl;
   nmbl-bless.service made nmbl's slot the default.  The owner makes the
   machine's key and puts it in db with their KEK (nmbl-key).  Then a
   kernel update from a package: Debian's hooks write the initramfs and
   grub.cfg, and nmbl's (zz-nmbl) a UKI around the new kernel, signed with
   the machine's key and offered once in the other slot.
2. The firmware tries that slot; the new kernel is the default, as it
   would be with GRUB, and boots without a second kernel; the new slot is
   blessed.  grub-reboot picks the next start's entry.
3. That entry boots, and next_entry is spent.  bootctl set-oneshot and
   grub-set-default pick the following ones.
4. The one-shot entry boots, once.
5. grub-set-default's entry boots.  Then a broken kernel update: the new
   kernel replaced by one signed with a key no keyring trusts, made the
   default.
6. nmbl refuses it and says why, the menu comes back, and the previous
   kernel, picked from Debian's "Advanced options" submenu, boots.
"""

import re

from machine import (BOOT_TIMEOUT, MENU_READY, SYSTEM_UP, Machine, Shell, expected_cmdline,
                     info, root_uuid, selected)
from vm import KEY_DOWN, KEY_ENTER

DIRECT = "without a second kernel"


def up(vm, kver):
    """Wait for the system's line: kernel KVER with Debian's command line,
    multi-user.target reached."""
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


def test_debian_boots_and_updates_through_nmbl():
    m = info()
    kver, other = m["kernel"], m["other_kernel"]
    ids = entry_ids()
    machine = Machine("system")

    # 1. First start: nmbl's slot on trial, Debian's default entry, direct boot.
    with machine.vm("1-first") as vm:
        vm.wait_for(r'nmbl: boot-current: Boot[0-9A-F]{4} "nmbl \(slot a\)"', timeout=BOOT_TIMEOUT,
                    clean=True)
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        up(vm, kver)
        sh = Shell(vm, m["root_password"])
        assert f"booting /boot/vmlinuz-{kver} {DIRECT}" in sh.check(
            f"journalctl -b -o cat -t nmbl --grep '{DIRECT}'"), "no direct boot in the journal"
        status = sh.check("bootctl status")
        assert re.search(r"Product: nmbl \d", status), status
        assert selected(sh) == ids["simple"]
        analyze = sh.check("systemd-analyze")
        assert re.search(r"\(firmware\) \+ [\d.]+m?s \(loader\) \+", analyze), analyze
        sh.check("systemctl is-active nmbl-bless.service")
        slots = sh.check("nmbl bootcfg status")
        assert re.search(r"slot a: good", slots) and "current: slot a" in slots, slots
        order = sh.check("efibootmgr")
        slot_a = re.search(r"Boot([0-9A-F]{4})\* nmbl \(slot a\)", order).group(1)
        assert re.search(rf"BootOrder: {slot_a},", order), order
        assert "BootNext" not in order, order

        # The machine's own key, in db: its owner keeps the firmware's keys.
        out = sh.check("nmbl-key create --subject 'nmbl-debian machine key' 2>&1")
        assert "made /etc/nmbl/keys/nmbl.key" in out, out
        kek = f"{m['payload']}/kek"
        out = sh.check(f"nmbl-key enroll --db --kek-key {kek}.key --kek-cert {kek}.crt 2>&1")
        assert "/etc/nmbl/keys/nmbl.crt is in db." in out, out
        out = sh.check("nmbl-key status 2>&1")
        assert "CN = nmbl-debian machine key" in out and "in the firmware's db." in out, out

        # A kernel update from a package: Debian's hooks run, nmbl's last.
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
        slots = sh.check("nmbl bootcfg status")
        assert re.search(r"slot a: good", slots) and re.search(r"slot b: trial", slots), slots
        slot_b = re.search(r"slot b: trial .*\(Boot([0-9A-F]{4})\)", slots).group(1)
        assert f"BootNext: {slot_b}" in sh.check("efibootmgr")
        sh.reboot()

    # 2. The new nmbl, tried once: the new kernel is the default, and boots
    # without a second kernel.  grub-reboot.
    with machine.vm("2-update") as vm:
        vm.wait_for(r'nmbl: boot-current: Boot[0-9A-F]{4} "nmbl \(slot b\)"',
                    timeout=BOOT_TIMEOUT, clean=True)
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        up(vm, other)
        sh = Shell(vm, m["root_password"])
        assert f"booting /boot/vmlinuz-{other} {DIRECT}" in sh.check(
            f"journalctl -b -o cat -t nmbl --grep '{DIRECT}'"), "no direct boot in the journal"
        assert selected(sh) == ids["simple"]
        sh.check("systemctl is-active nmbl-bless.service")
        slots = sh.check("nmbl bootcfg status")
        assert re.search(r"slot b: good", slots) and "current: slot b" in slots, slots
        sh.check(f"grub-reboot '{ids['nmbl-kernel']}'")
        env = sh.check("grub-editenv list")
        assert f"next_entry={ids['nmbl-kernel']}" in env, env
        sh.reboot()

    # 3. grub-reboot's entry (by kexec now), once.  bootctl set-oneshot,
    # grub-set-default.
    with machine.vm("3-grub-reboot") as vm:
        up(vm, kver)
        sh = Shell(vm, m["root_password"])
        assert selected(sh) == ids["nmbl-kernel"]
        env = sh.check("grub-editenv list")
        assert not re.search(r"^next_entry=.", env, re.M), f"next_entry not spent:\n{env}"
        sh.check(f"bootctl set-oneshot '{ids['other-kernel']}'")
        sh.check(f"grub-set-default '{ids['nmbl-kernel']}'")
        sh.reboot()

    # 4. The one-shot entry, once.
    with machine.vm("4-oneshot") as vm:
        up(vm, other)
        sh = Shell(vm, m["root_password"])
        assert selected(sh) == ids["other-kernel"]
        sh.reboot()

    # 5. grub-set-default's entry.  Then a broken update, made the default.
    with machine.vm("5-saved") as vm:
        up(vm, kver)
        sh = Shell(vm, m["root_password"])
        assert selected(sh) == ids["nmbl-kernel"]
        sh.check(f"cp {m['payload']}/vmlinuz-{other}.untrusted /boot/vmlinuz-{other}")
        sh.check("grub-set-default 0")
        sh.reboot()

    # 6. Refused, menu back, the previous kernel from the submenu.
    with machine.vm("6-broken") as vm:
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        vm.wait_for(re.escape(f"cannot load /boot/vmlinuz-{other}: the kernel is signed by a key "
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
        up(vm, kver)
        sh = Shell(vm, m["root_password"])
        assert selected(sh) == ids["nmbl-kernel"]
