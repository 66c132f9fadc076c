# SPDX-License-Identifier: GPL-3.0-or-later
"""Measured boot in Secure Boot VMs with a TPM 2.0 (swtpm, its state kept
across boots): nmbl extends PCR 8 with GRUB's commands and the kernel's
command line, PCR 9 with the files GRUB reads and the kernel and initrds
it boots, PCR 11 with the phase it leaves by; the logs the booted system
gets replay to its live PCRs, by kexec and by direct boot, in each of
three banks (one bank: test_agree); what changes in a boot changes the PCRs it should and no other;
a disk sealed to PCRs 7+8+9 unlocks for the entry it was sealed in only;
a TPM lost under nmbl refuses the boot and the menu comes back."""

import functools
import hashlib
import os
import re

from fixture import (AT_MENU, BOOT_TIMEOUT, BOOT_UUID, MENU_READY, ROOT_UUID, TARGET_KERNEL,
                     TARGET_UP, VM, build_path, debian_stub, entry, kver, make_disk)
import measured
from vm import KEY_CTRL_X, KEY_DOWN, KEY_END, KEY_ENTER, KEY_HOME, make_tpm_state

# The test target reports what a verifier reads (test/target/init.c).
TPM_ARGS = "nmbl.test-tpm"
# nmbl's own kernel parameters (dracut/uki.mk): an entry that keeps them
# boots directly.
CONSOLES = "console=tty0 console=ttyS0,115200"
MENU_SHOWN = r"Use the .* keys to select which entry is highlighted"


def grub_cfg():
    k = kver()
    cfg = "set default=0\nset timeout=3\n\n"
    cfg += entry("Entry A", f"/vmlinuz-{k}", f"nmbl.entry=a {TPM_ARGS}")
    cfg += entry("Entry B", f"/vmlinuz-{k}", f"nmbl.entry=b {TPM_ARGS}",
                 initrd=f"/initrd.img-{k} /marker.img")
    cfg += entry("Unsigned", "/vmlinuz-unsigned", f"nmbl.entry=unsigned {TPM_ARGS}")
    cfg += f"""menuentry 'Direct' {{
	search --no-floppy --fs-uuid --set=root {BOOT_UUID}
	linux /vmlinuz-{k} root=UUID={ROOT_UUID} ro {CONSOLES} quiet nmbl.entry=direct nmbl.test-tpm
	initrd /initrd.img-{k}
}}
"""
    return cfg


def boot_files(initrd):
    k = kver()
    return {f"vmlinuz-{k}": build_path("test", "vmlinuz-test"),
            f"initrd.img-{k}": initrd,
            "vmlinuz-unsigned": build_path("test", "vmlinuz-unsigned"),
            "marker.img": build_path("test", "marker.img")}


@functools.cache
def disk():
    return make_disk("measured", grub_cfg(), boot_files(build_path("test", "target-initrd-dracut.img")))


@functools.cache
def disk_initrd_changed():
    """The same machine, one byte more at the end of the initrd (the
    kernel's unpacker skips zeros between and after archives)."""
    changed = build_path("test", "target-initrd-changed.img")
    with open(build_path("test", "target-initrd-dracut.img"), "rb") as f, open(changed, "wb") as out:
        out.write(f.read() + b"\0")
    return make_disk("measured-initrd", grub_cfg(), boot_files(changed))


@functools.cache
def disk_with_stub(loader="nmbl.efi"):
    """The same machine with the stub Debian's grub-install writes on the
    ESP, where GRUB's EFI image starts; LOADER the ESP's default program."""
    return make_disk(f"measured-stub-{os.path.basename(loader)}", grub_cfg(),
                     boot_files(build_path("test", "target-initrd-dracut.img")), uki=loader,
                     esp_files={"EFI/debian/grub.cfg": debian_stub("measured")})


# The TPM's banks: three, as a machine whose firmware allocates them all
# has them; every boot here measures into each, and the comparisons read
# sha256's.
BANKS = ("sha1", "sha256", "sha384")


@functools.cache
def tpm(banks):
    return make_tpm_state(build_path("test", "tpm-" + "-".join(banks)), banks)


@functools.cache
def luks_volume():
    """A LUKS volume the first boot of entry A seals to PCRs 7, 8 and 9 with
    systemd-cryptenroll, kept across the boots that get it."""
    return measured.make_luks(build_path("test", "measured-luks.img"), "7+8+9")


def boot(name, choose=None, banks=BANKS, image=None, secure_boot=True, luks=None):
    """Boot (the disk IMAGE, and the volume LUKS as a second disk), let
    CHOOSE(vm) pick at the menu, and return what the target reported, its
    command line and the console log."""
    second = ["-drive", f"file={luks},format=raw,if=virtio"] if luks else []
    with VM(image or disk(), snapshot=True, tpm=tpm(banks), secure_boot=secure_boot,
            qemu_args=second, log_file=build_path("test", f"measured-{name}.log"),
            **AT_MENU) as vm:
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        if choose:
            choose(vm)
        up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=120)
        log = vm.clean_log()
    return measured.Report(log), up.group(2), log


@functools.cache
def boot_a():
    return boot("a", luks=luks_volume())


@functools.cache
def boot_a_again():
    return boot("a-again", luks=luks_volume())


def edit(vm):
    """In GRUB's editor, a word more at the end of the linux line (after
    setparams, a blank line, search and echo)."""
    vm.send("e")
    vm.wait_for("Minimum Emacs-like screen editing", timeout=60, clean=True)
    vm.send(KEY_DOWN * 4 + KEY_END + " nmbl.edited" + KEY_CTRL_X)


@functools.cache
def boot_a_edited():
    return boot("a-edited", edit, luks=luks_volume())


@functools.cache
def boot_b():
    return boot("b", lambda vm: vm.send(KEY_DOWN + KEY_ENTER), luks=luks_volume())


@functools.cache
def boot_direct():
    return boot("direct", lambda vm: vm.send(KEY_DOWN * 3 + KEY_ENTER))


def refused_then_a(vm):
    """The unsigned kernel first: refused, the menu again, then entry A."""
    vm.send(KEY_DOWN * 2 + KEY_ENTER)
    vm.wait_for("Press any key to continue", timeout=BOOT_TIMEOUT, clean=True)
    vm.send(KEY_ENTER)
    vm.wait_for(MENU_SHOWN, timeout=60, clean=True)
    vm.send(KEY_HOME + KEY_ENTER)


def nmbl_events(report):
    """nmbl's events: the binary log after the firmware's own."""
    events = measured.parse_tcg(report.files[measured.NMBL_EVENT_LOG])
    firmware = measured.parse_tcg(report.files[measured.FIRMWARE_LOG])
    assert events[:len(firmware)] == firmware, "nmbl's log does not start as the firmware's"
    return events[len(firmware):]


def check_replays(report, json_log):
    """Both logs replay to the live PCRs 8, 9, 11 in every bank."""
    events = measured.parse_tcg(report.files[measured.NMBL_EVENT_LOG])
    for bank in report.banks():
        replayed = measured.replay(events, bank)
        for i in (8, 9, 11):
            assert replayed[i] == report.pcr(bank, i), \
                f"{bank} PCR {i}: the log replays to {replayed[i].hex()}, " \
                f"the TPM has {report.pcr(bank, i).hex()}"
    records = measured.parse_json_seq(report.files[json_log])
    mine = nmbl_events(report)
    assert [r["pcr"] for r in records] == [e.pcr for e in mine], \
        "the JSON log's events are not the binary log's"
    for r, e in zip(records, mine):
        for d in r["digests"]:
            assert bytes.fromhex(d["digest"]) == e.digests[d["hashAlg"]], (r, e)
    return mine


def texts(events, pcr):
    return [measured.grub_event_text(e) for e in events if e.pcr == pcr]


def test_kexec_logs_replay_to_the_pcrs_and_say_what_booted():
    report, cmdline, _ = boot_a()
    k = kver()
    mine = check_replays(report, measured.NMBL_JSON_LOG_KEXEC)
    pcr8, pcr9 = texts(mine, 8), texts(mine, 9)
    # GRUB's events: the entry's commands, then the kernel's command line
    # as GRUB measures it (without BOOT_IMAGE=).
    assert f"grub_cmd: linux /vmlinuz-{k} root=UUID={ROOT_UUID} ro console=ttyS0,115200 " \
           f"nmbl.entry=a {TPM_ARGS}" in pcr8, pcr8
    assert cmdline.startswith("BOOT_IMAGE=")
    assert "kernel_cmdline: " + cmdline[len("BOOT_IMAGE="):] in pcr8, (cmdline, pcr8)
    # The files GRUB read, then the kernel and the initrd, named as the
    # commands name them, the last two in that order.
    assert "(hd0,gpt2)/grub/grub.cfg" in pcr9, pcr9
    assert pcr9[-2:] == [f"/vmlinuz-{k}", f"/initrd.img-{k}"], pcr9
    # Their digests are the files'.
    with open(build_path("test", "vmlinuz-test"), "rb") as f:
        kernel_digest = hashlib.sha256(f.read()).digest()
    assert [e for e in mine if e.pcr == 9][-2].digests["sha256"] == kernel_digest
    leave = [e for e in mine if e.pcr == 11]
    assert [e.data for e in leave] == [b"leave-nmbl:kexec"], leave
    # What IMA measured into PCR 10 before the load, for the target to
    # explain its PCR 10.
    assert report.files["/run/log/nmbl/ima-binary-runtime-measurements"], \
        "no copy of nmbl's IMA list reached the target"


def test_started_as_grub_on_efi_measures_what_grub_measures():
    """With the distribution's stub on the ESP, grub-emu starts where
    GRUB's EFI image starts: the first things measured are the stub and
    its commands, as GRUB measures them, and nothing of nmbl's own."""
    report, cmdline, _ = boot_stub()
    assert "nmbl.entry=a" in cmdline, cmdline
    mine = check_replays(report, measured.NMBL_JSON_LOG_KEXEC)
    pcr8, pcr9 = texts(mine, 8), texts(mine, 9)
    assert pcr9[:2] == ["(hd0,gpt1)/EFI/debian/grub.cfg", "(hd0,gpt2)/grub/grub.cfg"], pcr9
    assert pcr8[:3] == [f"grub_cmd: search.fs_uuid {BOOT_UUID} root",
                        "grub_cmd: set prefix=(hd0,gpt2)/grub",
                        "grub_cmd: configfile (hd0,gpt2)/grub/grub.cfg"], pcr8
    assert not [t for t in pcr8 if "nmbl_" in t], pcr8


@functools.cache
def boot_stub():
    return boot("stub", image=disk_with_stub())


def test_same_pcr8_as_grub_on_efi():
    """GRUB's EFI image (Debian's modules, built in; its prefix the
    distribution's directory on the ESP) on the same machine: the same
    commands and command line measured into PCR 8, so the same PCR 8."""
    nmbl, _, _ = boot_stub()
    grub, cmdline, _ = boot("grub", image=disk_with_stub("test/grub-debian-prefix.efi"),
                            secure_boot=False)
    assert "nmbl.entry=a" in cmdline, cmdline
    # A kernel GRUB 2.06 starts gets no event log of the firmware's, so
    # the PCR itself is compared; nmbl's events say what it holds.
    assert nmbl.pcr("sha256", 8) == grub.pcr("sha256", 8), \
        "PCR 8 differs from GRUB's; nmbl measured:\n" + "\n".join(texts(nmbl_events(nmbl), 8))


def test_same_entry_twice_gives_the_same_pcrs():
    first, _, _ = boot_a()
    again, _, _ = boot_a_again()
    for i in (8, 9, 11):
        assert first.pcr("sha256", i) == again.pcr("sha256", i), f"PCR {i} differs"


def test_edited_command_line_changes_pcr8_only():
    first, _, _ = boot_a()
    edited, cmdline, _ = boot_a_edited()
    assert cmdline.endswith(" nmbl.edited"), cmdline
    check_replays(edited, measured.NMBL_JSON_LOG_KEXEC)
    assert edited.pcr("sha256", 8) != first.pcr("sha256", 8)
    assert edited.pcr("sha256", 9) == first.pcr("sha256", 9)
    assert edited.pcr("sha256", 11) == first.pcr("sha256", 11)


def test_other_entry_changes_pcrs_8_and_9():
    first, _, _ = boot_a()
    other, cmdline, _ = boot_b()
    assert "nmbl.entry=b" in cmdline, cmdline
    mine = check_replays(other, measured.NMBL_JSON_LOG_KEXEC)
    assert texts(mine, 9)[-3:] == [f"/vmlinuz-{kver()}", f"/initrd.img-{kver()}", "/marker.img"]
    assert other.pcr("sha256", 8) != first.pcr("sha256", 8)
    assert other.pcr("sha256", 9) != first.pcr("sha256", 9)


def test_one_byte_of_an_initrd_changes_pcr9_only():
    """Also: entry A's boot had the LUKS volume as a second disk, this one
    has not, and PCR 8 is the same: nmbl's search for grub.cfg measures
    the same commands whatever the disks."""
    first, _, _ = boot_a()
    changed, _, _ = boot("initrd-changed", image=disk_initrd_changed())
    check_replays(changed, measured.NMBL_JSON_LOG_KEXEC)
    assert changed.pcr("sha256", 8) == first.pcr("sha256", 8)
    assert changed.pcr("sha256", 9) != first.pcr("sha256", 9)
    assert changed.pcr("sha256", 11) == first.pcr("sha256", 11)


def test_refused_kernel_is_in_the_log_and_the_replay_still_matches():
    report, cmdline, log = boot("refused-then-a", refused_then_a)
    assert "cannot load /vmlinuz-unsigned: the kernel is not signed" in log
    assert "nmbl.entry=a" in cmdline, cmdline
    mine = check_replays(report, measured.NMBL_JSON_LOG_KEXEC)
    pcr9 = texts(mine, 9)
    assert "/vmlinuz-unsigned" in pcr9, pcr9
    assert pcr9[-2:] == [f"/vmlinuz-{kver()}", f"/initrd.img-{kver()}"], pcr9


def test_luks_sealed_to_pcrs_7_8_9_unlocks_for_entry_a_only():
    """As a user seals a disk to the boot (systemd-cryptenroll
    --tpm2-pcrs=7+8+9, in entry A's system): the TPM gives the key when A
    boots again, not when B boots nor when A's command line is edited."""
    first, _, _ = boot_a()
    assert first.luks == {"enroll": "0", "token": "yes", "unlock": "0"}, \
        f"entry A could not enroll and unlock its volume: {first.luks}"
    again, _, _ = boot_a_again()
    assert again.luks == {"token": "yes", "unlock": "0"}, f"entry A again: {again.luks}"
    for name, (report, _, log) in (("entry B", boot_b()),
                                   ("entry A with an edited command line", boot_a_edited())):
        assert report.luks.get("token") == "yes" and report.luks["unlock"] != "0", \
            f"{name} unlocked the volume sealed to A: {report.luks}"
        assert measured.POLICY_MISMATCH in log, f"{name}: not refused for its PCRs"


def test_direct_boot_logs_replay_to_the_pcrs():
    report, cmdline, log = boot_direct()
    kernel = re.search(TARGET_KERNEL, log)
    assert kernel and kernel.group(2) == "1" and int(kernel.group(3)) > 0, \
        "the entry was not booted directly (one kernel start, nmbl's lines in its log)"
    assert "nmbl.entry=direct" in cmdline, cmdline
    mine = check_replays(report, measured.SYSTEMD_JSON_LOG)
    assert [e.data for e in mine if e.pcr == 11] == [b"leave-nmbl:direct"]
    # The same files measured as a kexec of them would.
    assert texts(mine, 9)[-2:] == [f"/vmlinuz-{kver()}", f"/initrd.img-{kver()}"]


def test_three_banks_replay_in_each():
    report, _, _ = boot_a()
    assert report.banks() == sorted(BANKS), report.banks()
    check_replays(report, measured.NMBL_JSON_LOG_KEXEC)


def test_tpm_lost_refuses_the_boot_and_the_menu_comes_back():
    with VM(disk(), snapshot=True, tpm=tpm(BANKS),
            log_file=build_path("test", "measured-tpm-lost.log"), **AT_MENU) as vm:
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        since = vm.pos(clean=True)
        vm.send(KEY_DOWN)
        vm.stop_tpm()
        vm.send(KEY_ENTER)
        # GRUB's sentence, wrapped at the serial line's 80 columns.
        vm.wait_for(r"cannot\s+load\s+/vmlinuz-\S+:\s+the\s+TPM\s+did\s+not\s+take\s+the\s+"
                    r"measurement", timeout=BOOT_TIMEOUT, since=since, clean=True)
        vm.wait_for(MENU_SHOWN, timeout=120, since=since, clean=True)
        assert "NMBL-TARGET-UP" not in vm.clean_log()
