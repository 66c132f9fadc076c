# SPDX-License-Identifier: GPL-3.0-or-later
"""specs/nmbl.spec: it parses, rpmbuild makes its five packages from
"make dist" and the GRUB tarball (the UKI around this build's kernel,
signed with the test key), each package holds exactly its files, the
scriptlets call the slot tool as agreed and never fail a transaction, and
the packages install into a scratch root and erase from it."""

import functools
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time

from test_install import BUILD, TOP, make, make_var
from test_kernel_install import PLUGIN, TEST_KERNEL, assert_offered, machine, nmbl_lines

SPEC = os.path.join(TOP, "specs", "nmbl.spec")
UKI_SPEC = os.path.join(TOP, "specs", "kernel-uki-nmbl.spec")
TOPDIR = os.path.join(BUILD, "rpm")
PACKAGES = ("nmbl", "nmbl-devel", "nmbl-dracut", "nmbl-uki", "nmbl-net-uki")
# Neither the caller's make flags nor nmbl's build variables reach rpmbuild,
# as on a build server.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")}


def kver():
    with open(os.path.join(BUILD, "kernel", "kver")) as f:
        return f.read().strip()


def run(*args, **kwargs):
    p = subprocess.run(args, capture_output=True, text=True, env=kwargs.pop("env", CLEAN_ENV), **kwargs)
    assert p.returncode == 0, f"{' '.join(args)} exited {p.returncode}\n{p.stdout}{p.stderr}"
    return p


def remember_failure(fn):
    """Run FN once; later calls return its result or raise its error again."""
    memo = []

    @functools.wraps(fn)
    def once():
        if not memo:
            try:
                memo.append((fn(), None))
            except Exception as e:
                memo.append((None, e))
        result, error = memo[0]
        if error:
            raise error
        return result
    return once


@remember_failure
def built():
    """rpmbuild -bb of the spec, as a build server would run it, with the
    kernel of this build and the test key.  Returns {package: rpm file}."""
    start = time.monotonic()
    shutil.rmtree(TOPDIR, ignore_errors=True)
    sources = os.path.join(TOPDIR, "SOURCES")
    os.makedirs(sources)
    make("dist")
    version = make_var("VERSION")
    shutil.copy(os.path.join(BUILD, f"nmbl-{version}.tar.gz"), sources)
    grub = make_var("GRUB_TARBALL")
    assert os.path.exists(os.path.join(TOP, grub)), f"no GRUB tarball at {grub}"
    os.symlink(os.path.join(TOP, grub), os.path.join(sources, f"grub-{make_var('GRUB_VERSION')}.tar.xz"))
    key, cert = make_var("SIGN_KEY"), make_var("SIGN_CERT")
    make(key, cert)
    tree = os.path.join(BUILD, "kernel", "tree")
    p = subprocess.run(
        ["rpmbuild", "-bb", "--nodeps", "--define", f"_topdir {TOPDIR}",
         "--define", f"nmbl_kver {kver()}", "--define", f"nmbl_kernel_tree {tree}",
         "--define", f"nmbl_kernel_image {tree}/boot/vmlinuz-{kver()}",
         "--define", f"nmbl_sign_key {os.path.join(TOP, key)}",
         "--define", f"nmbl_sign_cert {os.path.join(TOP, cert)}", SPEC],
        capture_output=True, text=True, env=CLEAN_ENV)
    with open(os.path.join(TOPDIR, "rpmbuild.log"), "w") as f:
        f.write(p.stdout + p.stderr)
    assert p.returncode == 0, f"rpmbuild exited {p.returncode}: see {TOPDIR}/rpmbuild.log\n{p.stderr[-3000:]}"
    # Warnings rpmbuild collects (a binary without a build id, an unpackaged
    # file...) are defects of the spec or the build.
    assert "RPM build warnings" not in p.stdout + p.stderr, (p.stdout + p.stderr)[-3000:]
    rpms = {}
    for name in PACKAGES:
        path = os.path.join(TOPDIR, "RPMS", "x86_64", f"{name}-{version}-1.x86_64.rpm")
        assert os.path.exists(path), f"{path} was not built"
        rpms[name] = path
    sizes = {name: os.stat(path).st_size for name, path in rpms.items()}
    with open(os.path.join(TOPDIR, "sizes.json"), "w") as f:
        json.dump(sizes, f)
    print(f"    rpmbuild took {time.monotonic() - start:.0f} s; package sizes: "
          + ", ".join(f"{n} {s / 1024:.0f} KiB" for n, s in sizes.items()), flush=True)
    return rpms


def files_of(rpm):
    out = run("rpm", "-qlp", rpm).stdout.split("\n")
    # rpm's own build-id links for the ELF files, when its configuration
    # makes them.
    return {f for f in out if f and not f.startswith("/usr/lib/.build-id")}


def query(rpm, fmt):
    return run("rpm", "-qp", "--qf", fmt, rpm).stdout


def test_spec_parses_and_agrees_with_the_makefile():
    p = run("rpmspec", "-P", SPEC)
    assert not p.stderr, p.stderr
    assert re.search(r"^Version: +" + re.escape(make_var("VERSION")) + "$", p.stdout, re.M), \
        "the spec's Version is not the Makefile's VERSION"
    assert re.search(r"^Provides: +bundled\(grub2\) = " + re.escape(make_var("GRUB_VERSION")) + "$",
                     p.stdout, re.M), "no bundled(grub2) of the GRUB the Makefile builds"
    # Where Fedora defines them: %pesign signs the UKI make left unsigned,
    # and the unit is enabled as its preset says.
    fedora = ["--define", "pesign(si:o:a:c:n:) PESIGN %{-i*} %{-o*}",
              "--define", "systemd_post() SYSTEMD_POST %1",
              "--define", "systemd_preun() SYSTEMD_PREUN %1",
              "--define", "systemd_postun() SYSTEMD_POSTUN %1",
              "--define", "nmbl_kver 6.6.0-1.fc40.x86_64"]
    p = run("rpmspec", "-P", *fedora, SPEC)
    assert not p.stderr, p.stderr
    assert "SIGN_KEY= SIGN_CERT=" in p.stdout
    assert "\nPESIGN build/nmbl.efi build/nmbl.efi.signed\n" in p.stdout
    assert "\nPESIGN build/nmbl-net.efi build/nmbl-net.efi.signed\n" in p.stdout
    for macro in ("POST", "PREUN", "POSTUN"):
        assert f"\nSYSTEMD_{macro} nmbl-bless.service\n" in p.stdout, macro
    # Kernel-core's own vmlinuz of the kernel named, in the buildroot.
    assert "KERNEL_TREE=/ NMBL_KERNEL=//lib/modules/6.6.0-1.fc40.x86_64/vmlinuz" in p.stdout


def test_dist_holds_the_tree_as_git_sees_it():
    make("dist")
    version = make_var("VERSION")
    tarball = os.path.join(BUILD, f"nmbl-{version}.tar.gz")
    names = run("tar", "-tzf", tarball).stdout.split()
    assert all(n.startswith(f"nmbl-{version}/") for n in names)
    names = {n[len(f"nmbl-{version}/"):] for n in names}
    for f in ("Makefile", "COPYING", "specs/nmbl.spec", "nmbl-loader/libnmbl/libnmbl.pc.in",
              "nmbl-loader/tools/systemd/nmbl-bless.service", "dracut/modules.d/97nmbl/module-setup.sh"):
        assert f in names, f
    assert not any(n.startswith("build/") or "__pycache__" in n for n in names)
    # Symbolic links stay links, to what they point at in the tree.
    with tarfile.open(tarball) as tar:
        links = {m.name[len(f"nmbl-{version}/"):]: m.linkname for m in tar.getmembers() if m.issym()}
    assert links, "no symbolic link in the tarball"
    for name, target in links.items():
        assert os.readlink(os.path.join(TOP, name)) == target, (name, target)
    if os.path.exists(os.path.join(TOP, ".git")):
        tracked = run("git", "-C", TOP, "ls-files", "--cached", "--others", "--exclude-standard",
                      env=os.environ).stdout.split()
        present = {t for t in tracked if os.path.lexists(os.path.join(TOP, t))}
        assert names == present, sorted(names ^ present)


def test_rpmbuild_makes_each_package_with_exactly_its_files():
    rpms = built()
    k, v = kver(), make_var("VERSION")
    want = {
        "nmbl": {"/usr/bin/nmbl", "/usr/bin/nmbl-key", "/usr/lib64/libnmbl.so.1",
                 "/usr/share/man/man8/nmbl.8", "/usr/share/man/man8/nmbl-key.8",
                 "/usr/lib/dracut/modules.d/96nmbl-handover",
                 "/usr/lib/dracut/modules.d/96nmbl-handover/module-setup.sh",
                 "/usr/lib/dracut/modules.d/96nmbl-handover/nmbl-handover.sh",
                 "/usr/lib/kernel/install.d/95-nmbl.install",
                 "/usr/lib/systemd/system/nmbl-bless.service",
                 "/usr/lib/systemd/system-preset/90-nmbl.preset", "/etc/nmbl", "/var/lib/nmbl",
                 f"/usr/share/doc/nmbl-{v}", f"/usr/share/doc/nmbl-{v}/README.md",
                 f"/usr/share/doc/nmbl-{v}/uki.conf.example",
                 f"/usr/share/licenses/nmbl-{v}", f"/usr/share/licenses/nmbl-{v}/COPYING"},
        "nmbl-devel": {"/usr/include/libnmbl.h", "/usr/lib64/libnmbl.so",
                       "/usr/lib64/pkgconfig/libnmbl.pc", "/usr/share/man/man3/libnmbl.3"},
        "nmbl-dracut": {"/usr/libexec/nmbl", "/usr/libexec/nmbl/grub-emu",
                        "/usr/libexec/nmbl/nmbl-init", "/usr/libexec/nmbl/nmbl-console",
                        "/usr/libexec/nmbl/nmbl-fetch",
                        "/usr/libexec/nmbl/mkuki", "/usr/libexec/nmbl/run-dracut",
                        "/usr/share/nmbl", "/usr/share/nmbl/os-release", "/usr/share/nmbl/sbat.csv",
                        "/usr/lib/dracut/modules.d/97nmbl",
                        "/usr/lib/dracut/modules.d/97nmbl/module-setup.sh",
                        "/usr/lib/dracut/modules.d/97nmbl/grub.cfg",
                        "/usr/lib/dracut/modules.d/97nmbl/mdadm.conf",
                        "/usr/lib/dracut/modules.d/97nmbl/lvm.conf",
                        "/usr/lib/dracut/modules.d/97nmbl/dhcpcd.conf",
                        "/usr/share/man/man8/nmbl-init.8"},
        # Debian's kernel hooks are not Fedora's: kernel-install runs the
        # plugin there.
        "nmbl-uki": {"/usr/lib/nmbl", f"/usr/lib/nmbl/{k}", f"/usr/lib/nmbl/{k}/nmbl.efi"},
        "nmbl-net-uki": {"/usr/lib/nmbl", f"/usr/lib/nmbl/{k}", f"/usr/lib/nmbl/{k}/nmbl-net.efi"},
    }
    for name, rpm in rpms.items():
        got = files_of(rpm)
        assert got == want[name], (name, sorted(got ^ want[name]))
    # Every ELF program and library carries a build id, which debug
    # information is found by.
    assert "/usr/lib/.build-id/" in run("rpm", "-qlp", rpms["nmbl-dracut"]).stdout
    assert query(rpms["nmbl-dracut"], "[%{PROVIDES}\\n]").count("bundled(grub2)") == 1
    # The library's soname is what the devel package's link points at, and
    # what the package provides.
    assert "libnmbl.so.1()(64bit)" in query(rpms["nmbl"], "[%{PROVIDES}\\n]").split("\n")
    requires = query(rpms["nmbl-uki"], "[%{REQUIREFLAGS:deptype} %{REQUIRES}\\n]")
    for when in ("posttrans", "preun"):
        assert f"{when} nmbl(x86-64)" in requires, requires


def scriptlet(rpm, tag):
    body = query(rpm, "%{" + tag + "}")
    return "" if body == "(none)" else body


def run_scriptlet(body, arg, efi, nmbl_exit):
    """BODY with its two machine paths pointed at the test's: the firmware
    directory (EFI when true) and a stand-in nmbl that logs its arguments
    and exits NMBL_EXIT."""
    with tempfile.TemporaryDirectory(dir=BUILD) as tmp:
        fw = os.path.join(tmp, "firmware-efi")
        if efi:
            os.mkdir(fw)
        log = os.path.join(tmp, "nmbl.log")
        fake = os.path.join(tmp, "nmbl")
        with open(fake, "w") as f:
            f.write(f'#!/bin/sh\necho "$*" >>{log}\nexit {nmbl_exit}\n')
        os.chmod(fake, 0o755)
        script = body.replace("/sys/firmware/efi", fw).replace("/usr/bin/nmbl ", fake + " ")
        p = subprocess.run(["sh", "-eu", "-c", script, "scriptlet", str(arg)],
                           capture_output=True, text=True, env=CLEAN_ENV)
        calls = []
        if os.path.exists(log):
            with open(log) as f:
                calls = f.read().splitlines()
        return p, calls


def test_scriptlets_offer_and_remove_the_uki_and_never_fail():
    rpms = built()
    uki = f"/usr/lib/nmbl/{kver()}/nmbl.efi"
    listing = run("rpm", "-qp", "--scripts", rpms["nmbl-uki"]).stdout
    assert "posttrans scriptlet (using /bin/sh):" in listing
    assert "preuninstall scriptlet (using /bin/sh):" in listing
    for name in ("nmbl", "nmbl-devel", "nmbl-dracut"):
        assert run("rpm", "-qp", "--scripts", rpms[name]).stdout == "", name
    posttrans = scriptlet(rpms["nmbl-uki"], "POSTTRANS")
    preun = scriptlet(rpms["nmbl-uki"], "PREUN")
    for body in (posttrans, preun):
        p = subprocess.run(["shellcheck", "-s", "sh", "-"], input=body, capture_output=True, text=True)
        assert p.returncode == 0, p.stdout

    # Install (and upgrade): the UKI goes to the slot tool; a failure is
    # said on stderr and the transaction goes on.
    p, calls = run_scriptlet(posttrans, 0, efi=True, nmbl_exit=0)
    assert p.returncode == 0 and not p.stderr and calls == [f"bootcfg install {uki}"], (p, calls)
    p, calls = run_scriptlet(posttrans, 0, efi=True, nmbl_exit=1)
    assert p.returncode == 0 and calls == [f"bootcfg install {uki}"], (p, calls)
    assert "was not installed on the ESP; the machine boots as before" in p.stderr, p.stderr
    p, calls = run_scriptlet(posttrans, 0, efi=False, nmbl_exit=0)
    assert p.returncode == 0 and calls == [] and "not booted with EFI" in p.stderr, (p, calls)

    # Erase removes the slots; an upgrade ($1 is 1) keeps them.
    p, calls = run_scriptlet(preun, 0, efi=True, nmbl_exit=0)
    assert p.returncode == 0 and not p.stderr and calls == ["bootcfg remove"], (p, calls)
    p, calls = run_scriptlet(preun, 0, efi=True, nmbl_exit=1)
    assert p.returncode == 0 and calls == ["bootcfg remove"] and "left on the ESP" in p.stderr, (p, calls)
    p, calls = run_scriptlet(preun, 1, efi=True, nmbl_exit=0)
    assert p.returncode == 0 and calls == [], (p, calls)
    p, calls = run_scriptlet(preun, 0, efi=False, nmbl_exit=0)
    assert p.returncode == 0 and calls == [], (p, calls)


def test_packages_install_into_a_scratch_root_and_erase():
    rpms = built()
    with tempfile.TemporaryDirectory(dir=BUILD) as root:
        # The scratch root has no shell to run scriptlets with; they are
        # tested above.
        run("rpm", "--root", root, "--nodeps", "--noscripts", "-i", *rpms.values())
        assert sorted(run("rpm", "--root", root, "-qa", "--qf", "%{NAME}\\n").stdout.split()) == \
            sorted(PACKAGES)
        for name, rpm in rpms.items():
            for f in files_of(rpm):
                if f.startswith("/usr/share/doc/") or f.startswith("/usr/share/man/"):
                    continue
                assert os.path.lexists(root + f), f"{name}: {f} not installed"
        assert os.readlink(root + "/usr/lib64/libnmbl.so") == "libnmbl.so.1"
        with open(root + "/usr/lib/dracut/modules.d/97nmbl/module-setup.sh") as f:
            module = f.read()
        assert "\n    local libexecdir=/usr/libexec/nmbl\n" in module
        # The packaged UKI: around this build's kernel, signed by the key
        # given, which the firmware checks.
        uki = f"{root}/usr/lib/nmbl/{kver()}/nmbl.efi"
        info = json.loads(run(os.path.join(BUILD, "nmbl"), "inspect", "--json", uki).stdout)
        assert info["type"] == "uki" and info["signed"] is True, info
        assert info["version"].startswith(kver() + " "), info["version"]
        run("sbverify", "--cert", os.path.join(TOP, make_var("SIGN_CERT")), uki)
        # The network boots' UKI beside it, signed as well, with what a
        # network boot needs inside.
        net = f"{root}/usr/lib/nmbl/{kver()}/nmbl-net.efi"
        run("sbverify", "--cert", os.path.join(TOP, make_var("SIGN_CERT")), net)
        info = json.loads(run(os.path.join(BUILD, "nmbl"), "inspect", "--json", net).stdout)
        assert info["type"] == "uki" and info["version"].startswith(kver() + " "), info
        run("rpm", "--root", root, "--nodeps", "--noscripts", "-e", *PACKAGES)
        left = [os.path.join(t, n) for t, _, names in os.walk(root) for n in names]
        # Only rpm's own database is left.
        assert all("/var/lib/rpm" in f or "/.rpmdb" in f or "/usr/lib/sysimage/rpm" in f for f in left), left


def test_per_kernel_package_holds_its_uki_and_hands_it_to_kernel_install():
    rpms = built()
    k = kver()
    tree = os.path.abspath(os.path.join(BUILD, "kernel", "tree"))
    with tempfile.TemporaryDirectory(dir=BUILD) as tmp:
        # The build server's buildroot: nmbl-dracut installed from its
        # package (BuildRequires), the kernel package unpacked.
        root = os.path.join(tmp, "root")
        run("rpm", "--root", root, "--nodeps", "--noscripts", "-i", rpms["nmbl"], rpms["nmbl-dracut"])
        libexec = f"{root}/usr/libexec/nmbl"
        env = dict(CLEAN_ENV, NMBL_GRUB_EMU=f"{libexec}/grub-emu", NMBL_BIN=f"{root}/usr/bin/nmbl",
                   NMBL_CONSOLE=f"{libexec}/nmbl-console", NMBL_INIT=f"{libexec}/nmbl-init")
        topdir = os.path.join(tmp, "rpmbuild")
        key, cert = (os.path.join(TOP, make_var(v)) for v in ("SIGN_KEY", "SIGN_CERT"))
        p = subprocess.run(
            ["rpmbuild", "-bb", "--nodeps", "--define", f"_topdir {topdir}",
             "--define", f"nmbl_kver {k}", "--define", f"nmbl_kernel_tree {tree}",
             "--define", f"nmbl_kernel_image {tree}/boot/vmlinuz-{k}",
             "--define", f"nmbl_libexecdir {libexec}",
             "--define", f"nmbl_datadir {root}/usr/share/nmbl",
             "--define", f"nmbl_dracut_module {root}/usr/lib/dracut/modules.d/97nmbl",
             "--define", f"nmbl_sign_key {key}", "--define", f"nmbl_sign_cert {cert}", UKI_SPEC],
            capture_output=True, text=True, env=env)
        assert p.returncode == 0 and "RPM build warnings" not in p.stdout + p.stderr, \
            (p.stdout + p.stderr)[-3000:]
        version, release = k.split("-", 1)
        rpm = os.path.join(topdir, "RPMS", "x86_64",
                           f"kernel-uki-nmbl-{version}-{release.replace('-', '_')}.x86_64.rpm")
        assert os.path.exists(rpm), os.listdir(os.path.join(topdir, "RPMS", "x86_64"))
        uki = f"/usr/lib/modules/{k}/nmbl.efi"
        assert files_of(rpm) == {uki}, files_of(rpm)
        # Kept one per kernel, as dnf keeps kernels; needing the plugin.
        assert "installonlypkg(kernel)" in query(rpm, "[%{PROVIDES}\\n]").split("\n")
        requires = query(rpm, "[%{REQUIREFLAGS:deptype} %{REQUIRES}\\n]").split("\n")
        assert "posttrans nmbl" in requires and "manual nmbl" in requires, requires
        run("rpm", "--root", root, "--nodeps", "--noscripts", "-i", rpm)
        # Around the kernel package's own vmlinuz, signed by the key given.
        info = json.loads(run(os.path.join(BUILD, "nmbl"), "inspect", "--json", root + uki).stdout)
        assert info["type"] == "uki" and info["version"].startswith(k + " "), info
        run("sbverify", "--cert", cert, root + uki)
        linux = os.path.join(tmp, "linux")
        run("objcopy", "-O", "binary", "--only-section=.linux", root + uki, linux)
        with open(linux, "rb") as a, open(f"{tree}/boot/vmlinuz-{k}", "rb") as b:
            assert a.read() == b.read(), "the UKI holds another kernel"

        # Its scriptlet, with this machine's kernel-install and nmbl's
        # plugin, on a scratch machine without a key of its own: the UKI
        # is offered through the slots.
        posttrans = scriptlet(rpm, "POSTTRANS")
        p = subprocess.run(["shellcheck", "-s", "sh", "-"], input=posttrans, capture_output=True, text=True)
        assert p.returncode == 0, p.stdout
        with machine("bls") as m:
            fw = os.path.join(tmp, "firmware-efi")
            os.mkdir(fw)
            script = (posttrans.replace("/sys/firmware/efi", fw)
                      .replace("/usr/lib/kernel/install.d/95-nmbl.install", PLUGIN)
                      .replace(f"/usr/lib/modules/{k}/vmlinuz", os.path.abspath(TEST_KERNEL)))
            env = m.env([], NMBL_KERNEL_TREE=root)
            del env["KERNEL_INSTALL_PLUGINS"]
            p = subprocess.run(["sh", "-eu", "-c", script, "posttrans", "0"],
                               capture_output=True, text=True, env=env)
            assert p.returncode == 0 and nmbl_lines(p.stderr) == [] and \
                "kernel-uki-nmbl" not in p.stderr, p
            assert_offered(m, root + uki)
            # The kernel's own entry is kernel-core's: not written again.
            assert not os.path.exists(m.entry()), m.entry()
