# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmark runs: one run of each way through it, every run checked by
the benchmark itself (the target booted with the entry's command line, a
direct boot kept nmbl's kernel, a kexec did not): GRUB, which the ratios
are to, nmbl's kexec and direct boots on the lab's target, and nmbl's
direct boot on the encrypted-LVM machine (a real machine, its passphrase
typed).  The variants left out take one of these paths with another
program on the ESP (floor, kexec-floor), Secure Boot on (nmbl-direct-sb),
or another machine: `make bench` runs them all.  Its speed is not a test:
`make bench` measures it."""

import json
import os
import subprocess
import sys

from fixture import BUILD, build_path

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "bench", "bench.py")
LAB = ["grub", "nmbl-kexec", "nmbl-direct"]


def test_bench_runs_each_variant_once():
    out = build_path("test", "bench-once.json")
    variants = LAB + ["lvm-nmbl-direct"]
    p = subprocess.run([sys.executable, BENCH, "--build", BUILD, "--runs", "1", "--out", out]
                       + [f"--variant={v}" for v in variants],
                       capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, f"bench failed:\n{p.stdout}\n{p.stderr}"
    with open(out) as f:
        results = json.load(f)
    assert set(results["variants"]) == set(variants), results["variants"].keys()
    for name, r in results["variants"].items():
        assert len(r["target"]["runs"]) == 1 and r["target"]["median"] > 0, (name, r)
        if name not in LAB:
            continue
        assert results["sizes"][name]["efi_bytes"] > 0, name
        # Each round's own ratio: the variant's time over GRUB's in that round.
        want = r["target"]["median"] / results["variants"]["grub"]["target"]["median"]
        assert abs(r["vs_grub_paired"]["median"] - want) < 0.01, (name, r["vs_grub_paired"], want)
    for name in ("nmbl-kexec", "nmbl-direct"):
        parts = results["variants"][name]["breakdown"]
        assert set(parts) == {"firmware to stub", "kernel to init", "init to menu",
                              "menu to hand-over", "hand-over to target"}, parts
        assert results["variants"][name]["memory_kib"]["median"] > 0, name
    parts = results["variants"]["lvm-nmbl-direct"]["breakdown"]
    assert set(parts) == {"firmware to stub", "kernel to init", "init to menu",
                          "menu to multi-user"}, parts
    assert "vs grub" in p.stdout and "nmbl-direct:" in p.stdout, p.stdout
