# SPDX-License-Identifier: GPL-3.0-or-later
"""The nmbl command's contract as scripts see it: --help on every verb,
exit codes (0 success, 1 failure, 2 usage), JSON that parses, errors on
stderr naming the file and the fault."""

import json
import os
import subprocess

BUILD = os.environ.get("NMBL_BUILD", "build")
CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "corpus", "pe")
VERBS = ["load", "boot", "exec", "unload", "status", "inspect", "modprobe", "coldplug"]


def nmbl(*args):
    return subprocess.run([os.path.join(BUILD, "nmbl"), *args], capture_output=True, text=True)


def test_help_on_every_verb():
    top = nmbl("--help")
    assert top.returncode == 0 and "Exit status" in top.stdout, top
    for verb in VERBS:
        assert verb in top.stdout, f"{verb} missing from nmbl --help"
        p = nmbl(verb, "--help")
        assert p.returncode == 0 and p.stdout.startswith(f"Usage: nmbl {verb}"), (verb, p)


def test_usage_errors_exit_2():
    for args in [(), ("frobnicate",), ("load",), ("load", "a", "b"),
                 ("load", "k", "--cmdline", "x", "--reuse-cmdline"), ("exec", "x"),
                 ("status", "--yaml"), ("inspect",), ("modprobe",), ("coldplug", "x")]:
        p = nmbl(*args)
        assert p.returncode == 2, (args, p)
        assert p.stderr, (args, "usage errors go to stderr")


def test_reuse_cmdline_names_the_file_it_read():
    p = nmbl("--root", "/nonexistent", "load", "k", "--reuse-cmdline")
    assert p.returncode == 1, p
    assert "nmbl: /nonexistent/proc/cmdline: " in p.stderr, p.stderr


def test_inspect_json_describes_a_uki():
    p = nmbl("inspect", "--json", os.path.join(CORPUS, "uki.efi"))
    assert p.returncode == 0, p
    info = json.loads(p.stdout)
    assert info["type"] == "uki"
    assert info["version"] == "6.1.0-test (nmbl) #1 SMP"
    # Built for the tests, so never the kernel running them.
    assert info["running"] is False
    assert info["cmdline_max"] == 2047
    assert [s["name"] for s in info["sections"]] == [".osrel", ".cmdline", ".ucode", ".linux", ".initrd"]


def test_inspect_refuses_what_is_no_image():
    p = nmbl("inspect", os.path.abspath(__file__))
    assert p.returncode == 1
    assert "is not a Linux kernel" in p.stderr and "test_nmbl.py" in p.stderr, p.stderr
    p = nmbl("inspect", "/nonexistent/vmlinuz")
    assert p.returncode == 1 and "does not exist" in p.stderr, p.stderr


def test_status_json_parses():
    p = nmbl("status", "--json")
    assert p.returncode == 0, p
    info = json.loads(p.stdout)
    assert set(info) == {"secure_boot", "setup_mode", "lockdown", "kexec_loaded", "kernel",
                         "boot_id", "uptime_usec", "kernel_usec", "memory_used_kib", "boot_current"}
    assert info["kernel"] == os.uname().release
    with open("/proc/sys/kernel/random/boot_id") as f:
        assert info["boot_id"] == f.read().strip()
