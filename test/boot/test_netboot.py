# SPDX-License-Identifier: GPL-3.0-or-later
"""Network boot: OVMF PXE-boots nmbl's network UKI from QEMU's TFTP server,
Secure Boot on; nmbl brings the card up, asks DHCP and reads the grub.cfg
GRUB's network image would (the one for its MAC first), then kernels and
initrds over TFTP and HTTP.

Nothing leaves the VM process: QEMU's user network with restrict=on, its
built-in TFTP and DHCP, and an HTTP server of the test on 127.0.0.1 reached
through guestfwd (relay.py) at 10.0.2.100:80."""

import contextlib
import functools
import os
import re
import shutil
import subprocess

from fixture import (BOOT_TIMEOUT, BOOT_UUID, MENU_READY, NMBL_BOOT_ID, ROOT_UUID, TARGET_KERNEL,
                     TARGET_UP, VM, back_to_the_menu, build_path, choose, kver, mkdisk, words)
from netserve import HTTP, MAC, STALL_AFTER, Files, forwards, http_server, net_args
from vm import KEY_ENTER, KEY_ESC

# What the per-MAC grub.cfg echoes of GRUB's network variables, in lines
# short enough for the serial line's 80 columns (none is wrapped).
NET_LINE = r"NMBL-NET (.*?) END\r?\n"


def grub_cfg():
    """The menu for this machine's MAC, installer-style."""
    target = f"root=UUID={ROOT_UUID} ro console=ttyS0,115200"
    return f"""set timeout=30
echo "NMBL-NET ip=$net_default_ip mac=$net_default_mac server=$net_default_server END"
echo "NMBL-NET if=$net_default_interface next=$net_efinet0_next_server END"
echo "NMBL-NET boot_file=$net_efinet0_boot_file root=$root END"
echo "NMBL-NET prefix=$prefix END"
net_bootp
net_ls_cards
net_ls_addr
net_get_dhcp_option mask efinet0 1 hex
echo "NMBL-NET mask=$mask def_if=$net_default_interface END"
menuentry 'Install (HTTP)' {{
	linuxefi (http,{HTTP})/vmlinuz {target} ip=dhcp BOOTIF=01-$net_default_mac inst.repo=http://{HTTP}/repo
	initrdefi (http,{HTTP})/initrd.img
}}
menuentry 'Missing kernel (TFTP)' {{
	linux (tftp)/images/vmlinuz-missing {target}
}}
menuentry 'Unsigned kernel (TFTP)' {{
	linux /images/vmlinuz-unsigned {target}
}}
menuentry 'Slow initrd (HTTP)' {{
	linux (tftp)/images/vmlinuz {target}
	initrd (http,{HTTP})/slow/initrd.img
}}
menuentry 'Server stops (HTTP)' {{
	linux (http,{HTTP})/stops/vmlinuz {target}
}}
menuentry 'Rescue (TFTP)' {{
	linux (pxe)/images/vmlinuz {target} nmbl.entry=rescue
	initrd (tftp,$net_default_server)/images/initrd.img
}}
"""


@functools.cache
def tree():
    """The TFTP and HTTP servers' files, and a disk with the target's root."""
    top = build_path("test", "netboot")
    shutil.rmtree(top, ignore_errors=True)
    tftp, www = os.path.join(top, "tftp"), os.path.join(top, "www")
    for d in (os.path.join(tftp, "nmbl"), os.path.join(tftp, "images"), www):
        os.makedirs(d)
    shutil.copy(build_path("nmbl-net.efi"), os.path.join(tftp, "nmbl", "nmbl-net.efi"))
    for name, src in (("vmlinuz", "vmlinuz-test"), ("initrd.img", "target-initrd.img"),
                      ("vmlinuz-unsigned", "vmlinuz-unsigned")):
        shutil.copy(build_path("test", src), os.path.join(tftp, "images", name))
    for name, src in (("vmlinuz", "vmlinuz-test"), ("initrd.img", "target-initrd.img")):
        shutil.copy(build_path("test", src), os.path.join(www, name))
    with open(os.path.join(tftp, "nmbl", "grub.cfg-01-" + MAC.replace(":", "-")), "w") as f:
        f.write(grub_cfg())
    # What every other machine gets: never this one.
    with open(os.path.join(tftp, "nmbl", "grub.cfg"), "w") as f:
        f.write("menuentry 'Generic grub.cfg, for any machine' { true }\n")
    # The disk: a /boot with the kernel nmbl runs (no grub.cfg: the menus
    # are the network's), and the target's root.
    boot = os.path.join(top, "boot")
    os.makedirs(boot)
    shutil.copy(build_path("test", "vmlinuz-test"), os.path.join(boot, f"vmlinuz-{kver()}"))
    image = os.path.join(top, "root.img")
    mkdisk.build(image, None, boot=boot, root=build_path("test", "target-root"),
                 boot_uuid=BOOT_UUID, root_uuid=ROOT_UUID)
    return tftp, www, image


@functools.cache
def self_signed():
    """A certificate for 10.0.2.100 that no authority signed, with its key."""
    path = build_path("test", "netboot", "self-signed.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", f"/CN={HTTP}", "-addext", f"subjectAltName=IP:{HTTP}",
                    "-keyout", path, "-out", path], check=True, capture_output=True)
    return path


@contextlib.contextmanager
def tls_shut(server):
    """SERVER, shut down at the end."""
    try:
        yield server
    finally:
        server.shutdown()


def netboot_vm(name, image, ports, tftp=None, bootfile="nmbl/nmbl-net.efi"):
    """The machine, its card first in the boot order (netserve.net_args())."""
    return VM(image, snapshot=True, log_file=build_path("test", f"{name}.log"),
              qemu_args=net_args(ports, tftp, bootfile))


def test_pxe_menu_for_this_mac_faults_then_an_installer_by_kexec():
    """One PXE boot: the menu is the one for this machine's MAC, with GRUB's
    network variables; a missing kernel, an unsigned one, a download
    cancelled with Esc and a server that stops each give a sentence and the
    menu back; then the installer entry boots the target by kexec from HTTP,
    with ip= and BOOTIF= as the menu made them."""
    tftp, www, image = tree()
    server = http_server(www)
    try:
        with netboot_vm("netboot-pxe", image, {80: server.server_address[1]}, tftp=tftp) as vm:
            vm.wait_for("NBP filename is nmbl/nmbl-net.efi", timeout=BOOT_TIMEOUT, clean=True)
            up = vm.wait_for(r"nmbl-init: network: (\S+) is up \(DHCP\)", timeout=BOOT_TIMEOUT,
                             clean=True)
            nmbl_id = vm.wait_for(NMBL_BOOT_ID, timeout=BOOT_TIMEOUT, clean=True).group(1)
            net = {}
            for _ in range(5):
                line = vm.wait_for(NET_LINE, timeout=BOOT_TIMEOUT, clean=True).group(1)
                net.update(re.findall(r"(\w+)=(\S*)", line))
            assert net == {"ip": "10.0.2.15", "mac": MAC, "server": "10.0.2.2",
                           "if": "efinet0", "next": "10.0.2.2",
                           "boot_file": "nmbl/nmbl-net.efi", "root": "tftp,10.0.2.2",
                           "prefix": "(tftp,10.0.2.2)nmbl", "mask": "ffffff00",
                           "def_if": "efinet0"}, net
            vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
            menu = vm.clean_log()
            # GRUB's listing of the card, and of its addresses after
            # net_bootp: the firmware's (efinet0) and DHCP's (efinet0:dhcp).
            for line in (f"efinet0 {MAC}", f"efinet0 {MAC} 10.0.2.15",
                         f"efinet0:dhcp {MAC} 10.0.2.15"):
                assert re.search(rf"^{re.escape(line)}\s*$", menu, re.M), (line, menu[-3000:])
            assert "Install (HTTP)" in menu and "Generic grub.cfg" not in menu, \
                "the menu is not the one for this machine's MAC"

            # A kernel the TFTP server does not have: GRUB's words.
            choose(vm, 1)
            vm.wait_for(words("error: file `(tftp)/images/vmlinuz-missing' not found."),
                        timeout=BOOT_TIMEOUT, clean=True)
            back_to_the_menu(vm)
            # A kernel the keyrings do not trust, from $root on the network.
            choose(vm, 2)
            vm.wait_for(words("cannot load /images/vmlinuz-unsigned: the kernel is not signed"),
                        timeout=BOOT_TIMEOUT, clean=True)
            back_to_the_menu(vm)
            # A download under way shows how far it is; Esc ends it.
            choose(vm, 3)
            vm.wait_for(r"\(http,10\.0\.2\.100\)/slow/initrd\.img: \d+ of \d+ KiB \(\d+%\), "
                        r"Esc cancels", timeout=BOOT_TIMEOUT, clean=True)
            vm.send(KEY_ESC)
            vm.wait_for(words("error: `(http,10.0.2.100)/slow/initrd.img': cancelled."),
                        timeout=60, clean=True)
            back_to_the_menu(vm)
            # A server that stops sending: a sentence within the stall limit.
            choose(vm, 4)
            vm.wait_for(words(f"http://{HTTP}/stops/vmlinuz: the server stopped sending for "
                              f"15 s after {STALL_AFTER} bytes"), timeout=BOOT_TIMEOUT,
                        clean=True)
            back_to_the_menu(vm)

            choose(vm, 0)
            vm.wait_for(words(f"Booting by kexec (http,{HTTP})/vmlinuz: its kernel came from "
                              "the network."), timeout=BOOT_TIMEOUT, clean=True)
            target = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
            kernel = vm.wait_for(TARGET_KERNEL, timeout=60)
            vm.wait_exit(timeout=60)
    finally:
        server.shutdown()
    assert up.group(1) == "eth0", up.group(0)
    want = (f"BOOT_IMAGE=(http,{HTTP})/vmlinuz root=UUID={ROOT_UUID} ro console=ttyS0,115200 "
            f"ip=dhcp BOOTIF=01-{MAC} inst.repo=http://{HTTP}/repo")
    assert target.group(2) == want, f"target's cmdline\n  {target.group(2)!r}\nexpected\n  {want!r}"
    assert kernel.group(1) != nmbl_id, "the target runs nmbl's kernel: no kexec"
    # The kernel and initrd the target runs came over HTTP, each once.
    assert Files.requests.count("/vmlinuz") == 1 and Files.requests.count("/initrd.img") == 1, \
        Files.requests


# nmbl's own consoles (its UKI's command line): an entry that keeps them
# boots without a second kernel.
CONSOLES = "console=tty0 console=ttyS0,115200"


def http_cfg():
    """HTTP Boot's menu: $root is the web server, HTTPS refused when its
    certificate is not one the image trusts, and an entry on the disk."""
    target = f"root=UUID={ROOT_UUID} ro console=ttyS0,115200"
    return f"""set timeout=30
echo "NMBL-NET root=$root if=$net_default_interface END"
echo "NMBL-NET prefix=$prefix END"
menuentry 'Target (HTTP)' {{
	linux /vmlinuz {target} nmbl.entry=http-boot
	initrd /initrd.img
}}
menuentry 'Untrusted server (HTTPS)' {{
	linux (https,{HTTP})/vmlinuz {target}
}}
menuentry 'From the disk' {{
	search --no-floppy --fs-uuid --set=root {BOOT_UUID}
	linux /vmlinuz-{kver()} root=UUID={ROOT_UUID} ro {CONSOLES} nmbl.entry=disk
}}
"""


def test_http_boot_by_url_menu_from_the_server_and_https_checked():
    """The firmware HTTP-boots nmbl by URL: nmbl's menu is the grub.cfg
    beside it on the same server, $root is that server; a kernel from an
    HTTPS server whose certificate no authority in the image signed is
    refused with a sentence; the entry on the disk boots without a second
    kernel, and the system it starts has nothing of nmbl's network: no
    card up, no address, no route (kernels from the network boot by kexec
    in the other tests)."""
    _, www, image = tree()
    os.makedirs(os.path.join(www, "nmbl"), exist_ok=True)
    shutil.copy(build_path("nmbl-net.efi"), os.path.join(www, "nmbl", "nmbl-net.efi"))
    with open(os.path.join(www, "nmbl", "grub.cfg"), "w") as f:
        f.write(http_cfg())
    Files.requests = []
    server, tls = http_server(www), http_server(www, tls=self_signed())
    try:
        with netboot_vm("netboot-http", image, {80: server.server_address[1],
                                                443: tls.server_address[1]},
                        bootfile=f"http://{HTTP}/nmbl/nmbl-net.efi") as vm:
            vm.wait_for("Start HTTP Boot over IPv4", timeout=BOOT_TIMEOUT, clean=True)
            nmbl_id = vm.wait_for(NMBL_BOOT_ID, timeout=BOOT_TIMEOUT, clean=True).group(1)
            net = {}
            for _ in range(2):
                net.update(re.findall(r"(\w+)=(\S*)", vm.wait_for(NET_LINE, timeout=BOOT_TIMEOUT,
                                                                  clean=True).group(1)))
            assert net == {"root": f"http,{HTTP}", "prefix": f"(http,{HTTP})/nmbl",
                           "if": "efinet0"}, net
            vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
            choose(vm, 1)
            vm.wait_for(words(f"https://{HTTP}/vmlinuz: the server's certificate is not one "
                              "the image trusts"), timeout=BOOT_TIMEOUT, clean=True)
            back_to_the_menu(vm)
            choose(vm, 2)
            target = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
            kernel = vm.wait_for(TARGET_KERNEL, timeout=60)
            net = vm.wait_for(r"NMBL-TARGET-NET([^\r\n]*)\r?\n", timeout=60).group(1).split()
            vm.wait_exit(timeout=60)
    finally:
        server.shutdown()
        tls.shutdown()
    want = (f"BOOT_IMAGE=/vmlinuz-{kver()} root=UUID={ROOT_UUID} ro {CONSOLES} "
            "nmbl.entry=disk")
    assert target.group(2) == want, f"target's cmdline\n  {target.group(2)!r}\nexpected\n  {want!r}"
    assert kernel.group(1) == nmbl_id and kernel.group(2) == "1", \
        f"a second kernel started: {kernel.group(0)}"
    # nmbl's network went before the hand-over: no card up, no address or
    # route of what DHCP answered (a rogue server's would be there too).
    assert net == ["routes=0"], net
    # The UKI and the menu by the firmware's URL's directory.
    assert Files.requests[:2] == ["/nmbl/nmbl-net.efi", "/nmbl/grub.cfg"], Files.requests


def test_no_link_one_sentence_and_a_menu_without_network():
    """The cable pulled once the firmware has loaded nmbl: nmbl says so in
    a sentence within its link wait, the menu comes up all the same (no
    grub.cfg on the network or the disk: GRUB's prompt, as GRUB gives it),
    and a file asked of the network gets GRUB's error, not a hang."""
    tftp, _, image = tree()
    with VM(image, snapshot=True, log_file=build_path("test", "netboot-nolink.log"), qmp=True,
            qemu_args=net_args({}, tftp=tftp)) as vm:
        vm.wait_for("BdsDxe: starting", timeout=BOOT_TIMEOUT, clean=True)
        vm.qmp().execute("set_link", name="n0", up=False)
        vm.wait_for(words("nmbl-init: no link on eth0 within 10 s (no cable, or the switch's "
                          "port is down): the menu starts without network"),
                    timeout=BOOT_TIMEOUT, clean=True)
        vm.wait_for("nmbl: no grub.cfg found on any disk", timeout=BOOT_TIMEOUT, clean=True)
        vm.wait_for("grub> ", timeout=BOOT_TIMEOUT, clean=True)
        vm.send_raw("cat (tftp,10.0.2.2)/nmbl/grub.cfg\r")
        vm.wait_for(words("error: `/nmbl/grub.cfg': nmbl has no network (it was not started "
                          "from the network, or its network did not come up)."),
                    timeout=60, clean=True)
        vm.wait_for("grub> ", timeout=60, clean=True)


# The machine's second card, on a network of its own (QEMU's user network
# again, restrict=on, the same TFTP files).
MAC2 = "52:54:00:12:34:57"
# The socket families the menu must not get (libnmbl's probe).
NET_SOCKETS = ("socket(AF_INET)", "socket(AF_INET6)", "socket(AF_PACKET)")
CONTAINED = re.compile(r"^nmbl-contained: (socket\(\w+\)) (\S+)\s*$", re.M)


def second_card_cfg():
    """The menu for the second card's MAC: GRUB's variables, its cards, a
    grub.cfg that loops over configfile, a target over HTTPS."""
    target = f"root=UUID={ROOT_UUID} ro console=ttyS0,115200 nmbl.entry=https"
    return f"""set timeout=60
echo "NMBL-NET if=$net_default_interface mac=$net_default_mac ip=$net_default_ip END"
net_ls_cards
menuentry 'Loop over configfile' {{
	configfile (tftp)/nmbl/loop.cfg
}}
menuentry 'Target (HTTPS)' {{
	linux (https,{HTTP})/vmlinuz {target}
	initrd (https,{HTTP})/initrd.img
}}
"""


def test_no_dhcp_answer_another_card_contained_menu_a_configfile_loop_https():
    """The card the firmware booted from gets no DHCP answer once nmbl runs
    (QEMU holds back all it sends): nmbl says so within its DHCP wait (5 s,
    nmbl.dhcp-timeout= on this test image's signed command line) and asks
    on the machine's other card, which answers; the menu is the one for
    that card's MAC, that card GRUB's default interface (efinet1, after
    the firmware's efinet0).  A grub.cfg that loads itself over configfile
    ends with GRUB's error and the menu back.  The menu, on a machine
    whose network is up, can open no socket to it (its self-test; then
    it is killed by its filter and comes back).  Then the target boots by
    kexec from an HTTPS server whose certificate an authority in the
    image signed (this test image's, test/test.mk)."""
    tftp, www, image = tree()
    with open(os.path.join(tftp, "nmbl", "grub.cfg-01-" + MAC2.replace(":", "-")), "w") as f:
        f.write(second_card_cfg())
    with open(os.path.join(tftp, "nmbl", "loop.cfg"), "w") as f:
        f.write("configfile (tftp)/nmbl/loop.cfg\n")
    shutil.copy(build_path("test", "nmbl-net-test.efi"), os.path.join(tftp, "nmbl", "nmbl-net-test.efi"))
    Files.requests = []
    tls = http_server(www, tls=build_path("test", "https-server.pem"))
    second = ["-netdev", f"user,id=n1,restrict=on,tftp={tftp},bootfile=nmbl/nmbl-net-test.efi"
              + forwards({443: tls.server_address[1]}),
              "-device", f"virtio-net-pci,netdev=n1,mac={MAC2},romfile="]
    with tls_shut(tls), VM(image, snapshot=True, log_file=build_path("test", "netboot-nodhcp.log"),
                           qmp=True, qemu_args=net_args({}, tftp=tftp,
                                                        bootfile="nmbl/nmbl-net-test.efi")
                           + second) as vm:
        vm.wait_for("BdsDxe: starting", timeout=BOOT_TIMEOUT, clean=True)
        # Whatever the first card sends from now on is held for an hour.
        vm.qmp().execute("object-add", **{"qom-type": "filter-buffer", "id": "hold",
                                          "netdev": "n0", "interval": 3600 * 1000 * 1000})
        vm.wait_for(words("nmbl-init: no DHCP answer on eth0 within 5 s: "
                          "trying the other cards"), timeout=BOOT_TIMEOUT, clean=True)
        vm.wait_for(r"nmbl-init: network: eth1 is up \(DHCP\)", timeout=BOOT_TIMEOUT,
                    clean=True)
        net = dict(re.findall(r"(\w+)=(\S*)", vm.wait_for(NET_LINE, timeout=BOOT_TIMEOUT,
                                                         clean=True).group(1)))
        assert net == {"if": "efinet1", "mac": MAC2, "ip": "10.0.2.15"}, net
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
        menu = vm.clean_log()
        for line in (f"efinet0 {MAC}", f"efinet1 {MAC2}"):
            assert re.search(rf"^{re.escape(line)}\s*$", menu, re.M), (line, menu[-3000:])

        choose(vm, 0)
        vm.wait_for(words("error: maximum recursion depth exceeded."), timeout=BOOT_TIMEOUT,
                    clean=True)
        back_to_the_menu(vm)

        vm.send("c")
        vm.wait_for(r"grub>", timeout=60, clean=True)
        vm.send("nmbl_selftest_containment" + KEY_ENTER)
        vm.wait_for(r"nmbl-contained: x32", timeout=60, clean=True)
        vm.wait_for(r"ended by signal 31", timeout=60, clean=True)
        vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT, clean=True)
        calls = dict(CONTAINED.findall(vm.clean_log()))

        choose(vm, 1)
        vm.wait_for(words(f"Booting by kexec (https,{HTTP})/vmlinuz: its kernel came from "
                          "the network."), timeout=BOOT_TIMEOUT, clean=True)
        target = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
        vm.wait_for(TARGET_KERNEL, timeout=60)
        vm.wait_exit(timeout=60)
    assert {c: calls.get(c) for c in NET_SOCKETS} == {c: "EPERM" for c in NET_SOCKETS}, calls
    want = (f"BOOT_IMAGE=(https,{HTTP})/vmlinuz root=UUID={ROOT_UUID} ro console=ttyS0,115200 "
            "nmbl.entry=https")
    assert target.group(2) == want, f"target's cmdline\n  {target.group(2)!r}\nexpected\n  {want!r}"
    assert Files.requests == ["/vmlinuz", "/initrd.img"], Files.requests
