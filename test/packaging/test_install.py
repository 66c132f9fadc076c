# SPDX-License-Identifier: GPL-3.0-or-later
"""make install and make uninstall with every GNU directory moved away from
its default, below DESTDIR: each file in its place with its mode, the
programs named where they were put, a pkg-config file a C program builds
and runs with, and nothing left behind by uninstall."""

import os
import re
import subprocess
import tempfile

BUILD = os.path.abspath(os.environ.get("NMBL_BUILD", "build"))
TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# None of them the default, each in a place of its own.
DIRS = {
    "PREFIX": "/opt/nmbl",
    "BINDIR": "/opt/nmbl/sbin",
    "LIBDIR": "/opt/nmbl/lib64",
    "INCLUDEDIR": "/opt/nmbl/inc",
    "LIBEXECDIR": "/opt/nmbl/lib/exec",
    "DATADIR": "/opt/nmbl/data",
    "SYSCONFDIR": "/opt/etc",
    "MANDIR": "/opt/nmbl/manual",
    "DRACUTDIR": "/opt/dracut",
    "KERNELINSTALLDIR": "/opt/kernel/install.d",
    "SYSTEMDUNITDIR": "/opt/systemd/system",
    "PRESETDIR": "/opt/systemd/system-preset",
    "UKIDIR": "/opt/nmbl/uki",
}
PLUGIN = os.path.join(TOP, "specs", "95-nmbl.install")


def make(*args, check=True):
    """make in the top directory for this build.  Only the directories the
    build was made with come from the environment (CACHE, GRUB_TARBALL):
    the caller's make flags and nmbl build variables must not leak in."""
    env = {k: v for k, v in os.environ.items()
           if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "CACHE", "GRUB_TARBALL")}
    # A build inside the tree is named as make named it, so that make
    # recognises the files it made (and their dependency lists).
    build = os.path.relpath(BUILD, TOP) if BUILD.startswith(TOP + os.sep) else BUILD
    p = subprocess.run(["make", "-s", "--no-print-directory", "-C", TOP, f"BUILD={build}", *args],
                       capture_output=True, text=True, env=env)
    if check:
        assert p.returncode == 0, f"make {' '.join(args)} exited {p.returncode}\n{p.stdout}{p.stderr}"
    return p


def make_var(name):
    """The value make gives NAME for this build."""
    p = make("--eval", "nmbl-print-%: ; @echo $($*)", f"nmbl-print-{name}")
    return p.stdout.strip()


def expected_files():
    """Every file (not directory) make install puts below DESTDIR, with its
    mode; the link target for a symbolic link."""
    d = DIRS
    files = {
        f"{d['BINDIR']}/nmbl": 0o755,
        f"{d['BINDIR']}/nmbl-key": 0o755,
        f"{d['LIBDIR']}/libnmbl.so.1": 0o755,
        f"{d['LIBDIR']}/libnmbl.so": "libnmbl.so.1",
        f"{d['INCLUDEDIR']}/libnmbl.h": 0o644,
        f"{d['LIBDIR']}/pkgconfig/libnmbl.pc": 0o644,
        f"{d['MANDIR']}/man8/nmbl.8": 0o644,
        f"{d['MANDIR']}/man8/nmbl-key.8": 0o644,
        f"{d['MANDIR']}/man8/nmbl-init.8": 0o644,
        f"{d['MANDIR']}/man3/libnmbl.3": 0o644,
        f"{d['DATADIR']}/nmbl/os-release": 0o644,
        f"{d['DATADIR']}/nmbl/sbat.csv": 0o644,
        f"{d['DRACUTDIR']}/modules.d/97nmbl/module-setup.sh": 0o755,
        f"{d['DRACUTDIR']}/modules.d/97nmbl/grub.cfg": 0o644,
        f"{d['DRACUTDIR']}/modules.d/97nmbl/mdadm.conf": 0o644,
        f"{d['DRACUTDIR']}/modules.d/97nmbl/lvm.conf": 0o644,
        f"{d['DRACUTDIR']}/modules.d/97nmbl/dhcpcd.conf": 0o644,
        f"{d['DRACUTDIR']}/modules.d/96nmbl-handover/module-setup.sh": 0o755,
        f"{d['DRACUTDIR']}/modules.d/96nmbl-handover/nmbl-handover.sh": 0o755,
        f"{d['SYSTEMDUNITDIR']}/nmbl-bless.service": 0o644,
        f"{d['PRESETDIR']}/90-nmbl.preset": 0o644,
    }
    for prog in ("grub-emu", "nmbl-init", "nmbl-console", "nmbl-fetch", "mkuki", "run-dracut"):
        files[f"{d['LIBEXECDIR']}/nmbl/{prog}"] = 0o755
    if os.path.exists(PLUGIN):
        files[f"{d['KERNELINSTALLDIR']}/95-nmbl.install"] = 0o755
    # Debian's kernel packages run these, never kernel-install.
    for hooks in ("postinst.d", "postrm.d"):
        files[f"{d['SYSCONFDIR']}/kernel/{hooks}/zz-nmbl"] = 0o755
    return files


def installed(destdir):
    """Every file and symbolic link below DESTDIR, as its absolute path."""
    found = set()
    for top, _, names in os.walk(destdir):
        for name in names:
            found.add("/" + os.path.relpath(os.path.join(top, name), destdir))
    return found


def dirs_args():
    return [f"{k}={v}" for k, v in DIRS.items()]


def test_install_puts_each_file_where_the_directories_say():
    with tempfile.TemporaryDirectory(dir=BUILD) as dest:
        make("install", f"DESTDIR={dest}", *dirs_args())
        want = expected_files()
        assert installed(dest) == set(want), sorted(installed(dest) ^ set(want))
        for path, mode in want.items():
            full = dest + path
            if isinstance(mode, str):
                assert os.readlink(full) == mode, path
            else:
                assert not os.path.islink(full) and os.stat(full).st_mode & 0o7777 == mode, \
                    (path, oct(os.stat(full).st_mode))
        for name in ("nmbl", "nmbl-init", "nmbl-console", "nmbl-fetch", "grub-emu"):
            src = os.path.join(BUILD, name)
            dst = (dest + DIRS["BINDIR"] + "/nmbl" if name == "nmbl"
                   else dest + DIRS["LIBEXECDIR"] + "/nmbl/" + name)
            with open(src, "rb") as a, open(dst, "rb") as b:
                assert a.read() == b.read(), f"{dst} is not {src}"
        p = subprocess.run(["readelf", "-d", dest + DIRS["LIBDIR"] + "/libnmbl.so.1"],
                           capture_output=True, text=True, check=True)
        assert "Library soname: [libnmbl.so.1]" in p.stdout, p.stdout
        # Local configuration the machine added stays, with its directory.
        conf = dest + DIRS["SYSCONFDIR"] + "/nmbl/uki.conf"
        with open(conf, "w") as f:
            f.write("# the machine's own\n")
        make("uninstall", f"DESTDIR={dest}", *dirs_args())
        assert installed(dest) == {DIRS["SYSCONFDIR"] + "/nmbl/uki.conf"}, sorted(installed(dest))
        os.unlink(conf)
        # A second install and uninstall leave nothing at all, not even the
        # directories nmbl has to itself.
        make("install", f"DESTDIR={dest}", *dirs_args())
        make("uninstall", f"DESTDIR={dest}", *dirs_args())
        assert installed(dest) == set(), sorted(installed(dest))
        for own in (f"{DIRS['LIBEXECDIR']}/nmbl", f"{DIRS['DATADIR']}/nmbl",
                    f"{DIRS['DRACUTDIR']}/modules.d/97nmbl",
                    f"{DIRS['DRACUTDIR']}/modules.d/96nmbl-handover", f"{DIRS['SYSCONFDIR']}/nmbl"):
            assert not os.path.exists(dest + own), own
        # Uninstalling what is not there is no error.
        make("uninstall", f"DESTDIR={dest}", *dirs_args())


def test_installed_module_and_unit_name_the_installed_programs():
    with tempfile.TemporaryDirectory(dir=BUILD) as dest:
        make("install", f"DESTDIR={dest}", *dirs_args())
        module = dest + DIRS["DRACUTDIR"] + "/modules.d/97nmbl/module-setup.sh"
        # dracut sources the module and calls install(): record what it
        # would copy into the image, and from where.
        script = ('inst_binary() { echo "inst_binary $*"; }; inst_simple() { echo "inst_simple $*"; }; '
                  'inst_dir() { echo "inst_dir $*"; }; inst_multiple() { echo "inst_multiple $*"; }; '
                  f'moddir=/m; . "{module}"; install')
        p = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                           env={"PATH": os.environ["PATH"]})
        assert p.returncode == 0 and not p.stderr, p
        libexec = DIRS["LIBEXECDIR"] + "/nmbl"
        for line in (f"inst_binary {libexec}/nmbl-init /init",
                     f"inst_binary {libexec}/grub-emu /usr/libexec/nmbl/grub-emu",
                     f"inst_binary {DIRS['BINDIR']}/nmbl /usr/bin/nmbl",
                     f"inst_binary {libexec}/nmbl-console /usr/libexec/nmbl/nmbl-console",
                     "inst_simple /m/grub.cfg /usr/share/nmbl/grub/grub.cfg"):
            assert line in p.stdout.splitlines(), (line, p.stdout)
        # An image for network boots takes the installed nmbl-fetch.
        p = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                           env={"PATH": os.environ["PATH"], "NMBL_NET": "1"})
        assert p.returncode == 0 and not p.stderr, p
        for line in (f"inst_binary {libexec}/nmbl-fetch /usr/libexec/nmbl/nmbl-fetch",
                     "inst_simple /m/dhcpcd.conf /etc/nmbl/dhcpcd.conf"):
            assert line in p.stdout.splitlines(), (line, p.stdout)
        # Only the two lines install rewrites differ from the source.
        with open(os.path.join(TOP, "dracut", "modules.d", "97nmbl", "module-setup.sh")) as f:
            src = f.read().splitlines()
        with open(module) as f:
            dst = f.read().splitlines()
        changed = [(a, b) for a, b in zip(src, dst) if a != b]
        assert len(src) == len(dst) and len(changed) == 2, changed
        with open(dest + DIRS["SYSTEMDUNITDIR"] + "/nmbl-bless.service") as f:
            unit = f.read()
        assert f"\nExecStart={DIRS['BINDIR']}/nmbl bootcfg bless\n" in unit, unit
        if not os.path.exists(PLUGIN):
            return
        # The plugin's defaults, each still overridable by its variable.
        with open(PLUGIN) as f:
            src = f.read().splitlines()
        with open(dest + DIRS["KERNELINSTALLDIR"] + "/95-nmbl.install") as f:
            dst = f.read().splitlines()
        changed = {b for a, b in zip(src, dst) if a != b}
        assert len(src) == len(dst) and changed == {
            f"nmbl=${{NMBL:-{DIRS['BINDIR']}/nmbl}}",
            f"conf_dir=${{NMBL_CONF_DIR:-{DIRS['SYSCONFDIR']}/nmbl}}",
            f"libexec_dir=${{NMBL_LIBEXECDIR:-{libexec}}}",
            f"data_dir=${{NMBL_DATADIR:-{DIRS['DATADIR']}/nmbl}}",
            f"dracut_module=${{NMBL_DRACUT_MODULE:-{DIRS['DRACUTDIR']}/modules.d/97nmbl}}",
            f"uki_dir=${{NMBL_UKIDIR:-{DIRS['UKIDIR']}}}",
        }, sorted(changed)
        # Debian's hook calls the plugin where it was put, in both places.
        with open(os.path.join(TOP, "specs", "zz-nmbl")) as f:
            src = f.read().splitlines()
        for hooks in ("postinst.d", "postrm.d"):
            with open(f"{dest}{DIRS['SYSCONFDIR']}/kernel/{hooks}/zz-nmbl") as f:
                dst = f.read().splitlines()
            changed = {b for a, b in zip(src, dst) if a != b}
            assert len(src) == len(dst) and changed == {
                f"plugin=${{NMBL_KERNEL_PLUGIN:-{DIRS['KERNELINSTALLDIR']}/95-nmbl.install}}"}, changed


def test_unit_and_preset_bless_once_per_boot_after_boot_complete():
    with open(os.path.join(TOP, "nmbl-loader", "tools", "systemd", "nmbl-bless.service")) as f:
        unit = f.read()
    lines = set(unit.splitlines())
    for want in ("Type=oneshot", "RemainAfterExit=yes", "Requires=boot-complete.target",
                 "ConditionFirmware=uefi", "Documentation=man:nmbl(8)",
                 "ExecStart=/usr/bin/nmbl bootcfg bless", "WantedBy=basic.target"):
        assert want in lines, want
    after = [ln for ln in lines if ln.startswith("After=")]
    assert len(after) == 1 and "boot-complete.target" in after[0].split("=", 1)[1].split(), after
    with open(os.path.join(TOP, "nmbl-loader", "tools", "systemd", "90-nmbl.preset")) as f:
        rules = [ln for ln in f.read().splitlines() if ln and not ln.startswith("#")]
    assert rules == ["enable nmbl-bless.service"], rules
    # systemd's own reading of the unit: nothing unknown or misplaced.  It
    # checks that ExecStart's program exists, which only an installed
    # system has: point it at one that does.
    with tempfile.TemporaryDirectory(dir=BUILD) as tmp:
        path = os.path.join(tmp, "nmbl-bless.service")
        with open(path, "w") as f:
            f.write(unit.replace("/usr/bin/nmbl ", os.path.join(BUILD, "nmbl") + " "))
        p = subprocess.run(["systemd-analyze", "verify", "--man=no", path],
                           capture_output=True, text=True)
        assert p.returncode == 0 and "nmbl-bless.service" not in p.stderr, p


def test_pkg_config_builds_a_program_that_runs_with_the_installed_library():
    with tempfile.TemporaryDirectory(dir=BUILD) as dest:
        make("install", f"DESTDIR={dest}", *dirs_args())
        libdir = dest + DIRS["LIBDIR"]
        # The prefix taken from where the .pc file is, below DESTDIR (a
        # sysroot would move the system's own libraries' flags too).
        env = {"PATH": os.environ["PATH"], "PKG_CONFIG_PATH": libdir + "/pkgconfig"}

        def pkg_config(*args):
            p = subprocess.run(["pkg-config", "--define-prefix", *args], capture_output=True,
                               text=True, env=env)
            assert p.returncode == 0 and not p.stderr, (args, p)
            return p.stdout.split()

        flags = pkg_config("--cflags", "--libs", "libnmbl")
        # libnmbl's own, and the flags of the headers its header needs none
        # of but pkg-config adds from Requires.private.
        ours = [f"-I{dest}{DIRS['INCLUDEDIR']}", f"-L{libdir}", "-lnmbl"]
        private = pkg_config("--cflags", "libcrypto", "libkmod", "blkid", "lzo2")
        assert sorted(flags) == sorted(ours + private), flags
        assert pkg_config("--modversion", "libnmbl") == [make_var("VERSION")]
        # A static link would need libnmbl's own libraries.
        static = pkg_config("--static", "--libs", "libnmbl")
        for lib in ("-lcrypto", "-lkmod", "-lblkid"):
            assert lib in static, (lib, static)

        # The example of libnmbl(3), as installed.
        with open(dest + DIRS["MANDIR"] + "/man3/libnmbl.3") as f:
            page = f.read()
        example = re.search(r"^\.SH EXAMPLE\n\.nf\n(.*?)^\.fi$", page, re.S | re.M)
        assert example, "libnmbl(3) has no example"
        src = os.path.join(dest, "example.c")
        with open(src, "w") as f:
            f.write(example.group(1).replace("\\e", "\\"))
        exe = os.path.join(dest, "example")
        p = subprocess.run(["cc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-o", exe, src, *flags],
                           capture_output=True, text=True)
        assert p.returncode == 0 and not p.stderr, p
        p = subprocess.run(["readelf", "-d", exe], capture_output=True, text=True, check=True)
        assert "Shared library: [libnmbl.so.1]" in p.stdout, p.stdout
        env = {"PATH": os.environ["PATH"], "LD_LIBRARY_PATH": libdir}
        p = subprocess.run(["ldd", exe], capture_output=True, text=True, env=env)
        assert f"libnmbl.so.1 => {libdir}/libnmbl.so.1" in p.stdout, p.stdout
        p = subprocess.run([exe], capture_output=True, text=True, env=env)
        assert p.returncode == 0 and re.fullmatch(r"Secure Boot: (on|off|unknown)\n", p.stdout), p


def test_install_uki_puts_the_signed_uki_under_its_kernel_version():
    """The disk boots' UKI, and the network boots' beside it."""
    with tempfile.TemporaryDirectory(dir=BUILD) as dest:
        make("install-uki", "install-net-uki", f"DESTDIR={dest}", f"UKIDIR={DIRS['UKIDIR']}")
        with open(os.path.join(BUILD, "kernel", "kver")) as f:
            kver = f.read().strip()
        ukis = {f"{DIRS['UKIDIR']}/{kver}/{name}": name for name in ("nmbl.efi", "nmbl-net.efi")}
        assert installed(dest) == set(ukis), installed(dest)
        for uki, name in ukis.items():
            with open(os.path.join(BUILD, name), "rb") as a, open(dest + uki, "rb") as b:
                assert a.read() == b.read(), uki
            assert os.stat(dest + uki).st_mode & 0o7777 == 0o644
        make("uninstall-uki", f"DESTDIR={dest}", f"UKIDIR={DIRS['UKIDIR']}")
        assert installed(dest) == set() and not os.path.exists(dest + DIRS["UKIDIR"]), installed(dest)
