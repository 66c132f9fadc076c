# SPDX-License-Identifier: GPL-3.0-or-later
"""libnmbl accepts and refuses exactly the kernels that kexec-tools'
"kexec -s -l" does, under Secure Boot: both ask kexec_file_load, and nmbl
must not be more lenient, nor refuse what the kernel would take."""

import re

import test_kexec
from fixture import BOOT_TIMEOUT, VM, build_path, kver, make_disk

AGREE = re.compile(r"NMBL-AGREE (\S+) nmbl=(\w+) kexec=(\w+)")


def test_nmbl_and_kexec_tools_agree_on_each_kernel():
    disk = make_disk("agree", test_kexec.grub_cfg(), test_kexec.boot_files(),
                     uki="test/nmbl-selftest.efi")
    with VM(disk, snapshot=True, log_file=build_path("test", "agree.log")) as vm:
        vm.wait_for("NMBL-AGREE-DONE", timeout=BOOT_TIMEOUT)
        verdicts = {m.group(1): (m.group(2), m.group(3)) for m in AGREE.finditer(vm.log)}
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
