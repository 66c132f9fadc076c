# SPDX-License-Identifier: GPL-3.0-or-later
"""One boot of the self-test UKI, two checks.  libnmbl accepts and refuses
exactly the kernels that kexec-tools' "kexec -s -l" does, under Secure
Boot: both ask kexec_file_load, and nmbl must not be more lenient, nor
refuse what the kernel would take.  And a secret sealed to PCR 11 while
nmbl runs (a LUKS volume enrolled with systemd-cryptenroll --tpm2-pcrs=11)
unseals there, but not in the system nmbl boots: nmbl extends PCR 11 as it
leaves."""

import functools
import re

import measured
import test_kexec
from fixture import BOOT_TIMEOUT, TARGET_UP, VM, build_path, kver, make_disk
from vm import make_tpm_state

AGREE = re.compile(r"NMBL-AGREE (\S+) nmbl=(\w+) kexec=(\w+)")
SEAL = re.compile(r"NMBL-SEAL (enroll|unlock) (?:pcrs=\S+ )?exit=(-?\d+)")


@functools.cache
def selftest_boot():
    """The self-test UKI with a TPM and a LUKS volume for nmbl to seal,
    through its checks and the menu's default entry: the console log."""
    disk = make_disk("agree", test_kexec.grub_cfg(), test_kexec.boot_files(),
                     uki="test/nmbl-selftest.efi")
    luks = measured.make_luks(build_path("test", "agree-luks.img"), "11",
                              label="nmbl-selftest-pcrs=")
    tpm = make_tpm_state(build_path("test", "tpm-agree"), ("sha256",))
    with VM(disk, snapshot=True, tpm=tpm, log_file=build_path("test", "agree.log"),
            qemu_args=["-drive", f"file={luks},format=raw,if=virtio"]) as vm:
        vm.wait_for("NMBL-AGREE-DONE", timeout=BOOT_TIMEOUT)
        vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=120)
        return vm.clean_log()


def test_nmbl_and_kexec_tools_agree_on_each_kernel():
    verdicts = {m.group(1): (m.group(2), m.group(3)) for m in AGREE.finditer(selftest_boot())}
    k = kver()
    expected = {
        f"vmlinuz-{k}": "accepted",
        f"vmlinuz-{k}.debian": "refused",
        "vmlinuz-unsigned": "refused",
        "vmlinuz-truncated": "refused",
        "notes.txt": "refused",
    }
    assert set(verdicts) == set(expected), f"checked {sorted(verdicts)}, expected {sorted(expected)}"
    for name, (nmbl, kexec) in sorted(verdicts.items()):
        assert nmbl == kexec, f"{name}: nmbl {nmbl}, kexec-tools {kexec}"
        assert nmbl == expected[name], f"{name}: {nmbl}, expected {expected[name]}"


def test_secret_sealed_to_pcr11_in_nmbl_stays_sealed_in_the_target():
    log = selftest_boot()
    in_nmbl = dict(SEAL.findall(log))
    assert in_nmbl == {"enroll": "0", "unlock": "0"}, \
        f"nmbl could not seal and unseal its volume: {in_nmbl}"
    target = measured.Report(log)
    assert "nmbl.entry=first" in re.search(TARGET_UP, log).group(2)
    assert target.luks.get("token") == "yes" and target.luks["unlock"] != "0", \
        f"the booted system unsealed what was sealed to nmbl's PCR 11: {target.luks}"
    assert measured.POLICY_MISMATCH in log.split("NMBL-TARGET-UP", 1)[1], \
        "the booted system's unlock failed, but not for its PCRs"
