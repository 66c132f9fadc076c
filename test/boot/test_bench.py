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
    # Every second of a boot is in one of its steps, each step seen: the
    # firmware's, nmbl's kernel's and init's, the hand-over's.
    nmbl_steps = ["firmware", "image load", "stub, kernel decompression", "kernel",
                  "initramfs unpacking", "kernel, after unpacking", "modules",
                  "the ESP's disk", "status, grub-emu start", "grub.cfg read, menu"]
    want_steps = {
        "grub": ["firmware", "image load", "GRUB start", "grub.cfg read, menu", "hand-over",
                 "target up"],
        "nmbl-kexec": nmbl_steps + ["hand-over", "target up"],
        "nmbl-direct": nmbl_steps + ["switch root, target up"],
        "lvm-nmbl-direct": nmbl_steps + ["to multi-user"],
    }
    for name, want in want_steps.items():
        r = results["variants"][name]
        assert list(r["steps"]) == want, (name, r["steps"])
        assert all(s["median"] >= 0 for s in r["steps"].values()), (name, r["steps"])
        # Each figure is rounded to hundredths: a dozen steps may be off
        # by 0.06 together.
        total = sum(s["median"] for s in r["steps"].values())
        assert abs(total - r["target"]["median"]) < 0.1, (name, total, r["target"])
        if name != "grub":
            assert r["memory_kib"]["median"] > 0, name
            # nmbl's menu came after its kernel started, before the target.
            assert 0 < r["menu"]["median"] < r["target"]["median"], (name, r)
    assert 0 < results["small_vm_memory_used_kib"] < 256 * 1024, results
    with open(os.path.splitext(out)[0] + ".svg") as f:
        picture = f.read()
    for name in want_steps:
        assert f">{name}</text>" in picture, name
    assert picture.count("<rect") >= sum(len(w) for w in want_steps.values()), picture
    assert "vs grub" in p.stdout and "nmbl-direct:" in p.stdout, p.stdout
