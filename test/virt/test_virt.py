# SPDX-License-Identifier: GPL-3.0-or-later
"""nmbl in VMs made as a libvirt user makes them: virt-install with Secure
Boot firmware, the prepared disk behind a throw-away overlay, the console
read from the serial log file."""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "boot"))

import test_kexec  # noqa: E402
import vm  # noqa: E402
from fixture import MENU_READY, TARGET_UP, build_path, expected_cmdline, kver  # noqa: E402
from virt import SNAKEOIL_VARS, Libvirt, defined, virt_install  # noqa: E402

# For each marker: firmware to multi-user.target of the real Debian, as
# this machine takes it, with room for a busy one (test/vm/vm.py).
TIMEOUT = vm.SYSTEM_TIMEOUT


def boot(name, disk, nvram_template, markers, powers_off):
    """Make domain NAME from DISK under libvirtd (started if none runs) and
    wait for each regex of MARKERS on its console in turn; if the guest
    POWERS_OFF after the last, wait for that too.  Then remove the domain
    and end the daemons started, and check that both are gone.
    Returns the matches, virsh dominfo as it was while the domain ran, and
    the console text."""
    with Libvirt() as libvirt:
        with virt_install(name, disk, nvram_template=nvram_template,
                          serial_log=build_path("test", "virt", f"{name}.log")) as dom:
            info = dom.dominfo()
            found = [dom.wait_for(marker, TIMEOUT) for marker in markers]
            if powers_off:
                dom.wait_stopped(60)
            log = dom.clean_log()
        assert name not in defined(), f"domain {name} is still defined"
    assert not libvirt.still_running(), f"still running: {libvirt.still_running()}"
    assert re.search(rf"^Name:\s+{re.escape(name)}$", info, re.M), info
    assert re.search(r"^State:\s+running$", info, re.M), info
    return found, info, log


def test_virt_install_boots_nmbl_to_target():
    """The kexec test's disk: nmbl's menu, then its default entry's kernel
    with the entry's command line, and the guest powers off."""
    (_, up), _, log = boot("nmbl-virt-kexec", test_kexec.disk(), SNAKEOIL_VARS,
                           [MENU_READY, TARGET_UP], powers_off=True)
    assert "nmbl: secure-boot: enabled" in log, "nmbl did not see Secure Boot enabled"
    assert up.group(1) == kver(), f"target runs {up.group(1)}, expected {kver()}"
    want = expected_cmdline(f"/vmlinuz-{kver()}", "nmbl.entry=first")
    assert up.group(2) == want, f"target's cmdline\n  {up.group(2)!r}\nexpected\n  {want!r}"


def test_virt_install_boots_real_debian():
    """The real Debian machine (test/system): nmbl's menu from Debian's own
    grub.cfg, then Debian's default entry reaches multi-user.target with
    Debian's command line; the system stays up and is destroyed."""
    sys.path.insert(0, os.path.join(HERE, "..", "system"))
    import machine
    (_, up), _, _ = boot("nmbl-virt-system", build_path("system", "disk.img"),
                         build_path("system", "vars.fd"), [MENU_READY, machine.SYSTEM_UP],
                         powers_off=False)
    release, state, cmdline = up.groups()
    kernel = machine.info()["kernel"]
    assert release == kernel, f"booted {release}, not {kernel}"
    assert state == "active", f"multi-user.target is {state}"
    assert cmdline.strip() == machine.expected_cmdline(kernel), cmdline
