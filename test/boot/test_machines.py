# SPDX-License-Identifier: GPL-3.0-or-later
"""Machines unlike the tests' usual one (q35, QEMU's "max" CPU, one virtio
disk with GPT, a serial console): each boots through nmbl's menu into the
target, with the entry's command line."""

import test_kexec
from fixture import BOOT_TIMEOUT, MENU_READY, TARGET_UP, VM, build_path, expected_cmdline, kver


def boot_default(name, **machine):
    """Test_kexec's machine, changed as MACHINE says (VM's arguments): the
    default entry boots after the timeout; the target's line."""
    with VM(test_kexec.disk(), snapshot=True, log_file=build_path("test", f"machine-{name}.log"),
            **machine) as vm:
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        vm.wait_exit(timeout=60)
    return up


def first_entry_cmdline():
    """What the target's command line must be: the default entry's."""
    return expected_cmdline(f"/vmlinuz-{kver()}", "nmbl.entry=first")


def test_qemu64_cpu_boots():
    """libvirt's CPU for a machine made without --cpu: no SSE4.2, so
    crc32c-intel, the first module of ext4's soft dependency crypto-crc32c,
    cannot load; nmbl must go on to crc32c_generic to mount /boot."""
    up = boot_default("qemu64", cpu="qemu64")
    assert up.group(1) == kver(), up.group(1)
    want = first_entry_cmdline()
    assert up.group(2) == want, f"target's cmdline\n  {up.group(2)!r}\nexpected\n  {want!r}"


def test_older_cpu_without_avx_two_vcpus_boots():
    """A named older model (Nehalem: SSE4.2, no AVX) with two vCPUs."""
    up = boot_default("nehalem-smp2", cpu="Nehalem", qemu_args=["-smp", "2"])
    assert up.group(2) == first_entry_cmdline(), up.group(2)


def test_amd_cpu_with_4_gib_boots():
    """An AMD model, and memory above 4 GiB's hole: the kernel and initrds
    wherever kexec_file_load puts them."""
    up = boot_default("epyc-4g", cpu="EPYC", memory=4608)
    assert up.group(2) == first_entry_cmdline(), up.group(2)


def test_256_mib_boots():
    """The smallest machine nmbl promises to boot."""
    up = boot_default("256m", memory=256)
    assert up.group(2) == first_entry_cmdline(), up.group(2)
