# SPDX-License-Identifier: GPL-3.0-or-later
"""nmbl's kernel-install plugin (specs/95-nmbl.install) under this machine's
own /usr/bin/kernel-install (systemd 252) and its 90-loaderentry plugin, with
layout=bls and layout=uki, into scratch directories.

The keys nmbl trusts are real kernel keys: the test makes a keyring holding
the test key's certificate (the kernel describes it, "SnakeOil: 63b8..."),
and the plugin's nmbl reads it as ".platform" through nmbl --root, whose
proc/keys names that keyring.  The same root holds a fake ESP (a GPT disk
image, its sysfs entries and mountinfo) and an empty EFI variable store,
where the slot tool, "nmbl bootcfg install", puts the UKI the plugin builds.
"""

import contextlib
import ctypes
import os
import platform
import shutil
import subprocess
import tempfile

BUILD = os.environ.get("NMBL_BUILD", "build")
TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PLUGIN = os.path.join(TOP, "specs", "95-nmbl.install")
LOADERENTRY = "/usr/lib/kernel/install.d/90-loaderentry.install"
MACHINE_ID = "0123456789abcdef0123456789abcdef"
GLOBAL = "8be4df61-93ca-11d2-aa0d-00e098032b8c"
ESP_UUID = "e5b0e5b0-1111-4222-8333-e5b0e5b0e5b0"
UKI_CMDLINE = "console=ttyS0,115200 panic=10 nmbl.test=kernel-install"


def build(*parts):
    return os.path.join(BUILD, *parts)


def kver():
    with open(build("kernel", "kver")) as f:
        return f.read().strip()


# The kernels: Debian's (signed by Debian's key, which the test keyring does
# not hold), the same re-signed with the test key, and unsigned.
def debian_kernel():
    return build("kernel", "tree", "boot", f"vmlinuz-{kver()}")


TEST_KERNEL = build("test", "vmlinuz-test")
UNSIGNED_KERNEL = build("test", "vmlinuz-unsigned")
# The target as UKIs: the test kernel inside, and an unsigned one.
TEST_UKI = build("test", "target-uki.efi")
UNSIGNED_UKI = build("test", "target-uki-unsigned.efi")
DEBIAN_SIGNER = "Debian Secure Boot Signer 2022 - linux"


def untrusted_warning(what):
    return (f"nmbl: kernel {kver()} {what}: nmbl will refuse to boot it under Secure Boot.")


def no_key_warning(version=None):
    return (f"nmbl: no key of this machine signs nmbl's UKI: kernel {version or kver()} will be "
            "booted through a second kernel start (kexec), not directly; 'nmbl-key create' and "
            "'nmbl-key enroll' make one and enrol it (nmbl-key(8)).")


# --- kernel keys -------------------------------------------------------------

SYSCALLS = {"x86_64": (248, 250), "aarch64": (217, 219)}  # add_key, keyctl
KEY_SPEC_PROCESS_KEYRING = -2
KEYCTL_DESCRIBE, KEYCTL_SETPERM, KEYCTL_UNLINK = 6, 5, 9


def _syscall(number, *args):
    libc = ctypes.CDLL(None, use_errno=True)
    r = libc.syscall(number, *args)
    if r < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return r


def add_key(key_type, description, payload, keyring):
    add, _ = SYSCALLS[platform.machine()]
    return _syscall(add, key_type.encode(), description.encode(), payload,
                    ctypes.c_size_t(len(payload) if payload else 0), ctypes.c_int(keyring))


def keyctl(op, *args):
    return _syscall(SYSCALLS[platform.machine()][1], ctypes.c_int(op),
                    *[ctypes.c_long(a) for a in args])


@contextlib.contextmanager
def keyring(*certs):
    """A keyring of this process holding CERTS (PEM files), readable by root's
    other processes (the plugin's nmbl); its serial, and the kernel's
    descriptions of the keys."""
    ring = add_key("keyring", "nmbl-test-platform", None, KEY_SPEC_PROCESS_KEYRING)
    try:
        keyctl(KEYCTL_SETPERM, ring, 0x3f3f0000)
        descriptions = []
        for cert in certs:
            der = subprocess.run(["openssl", "x509", "-in", cert, "-outform", "DER"],
                                 check=True, capture_output=True).stdout
            key = add_key("asymmetric", "", der, ring)
            buf = ctypes.create_string_buffer(512)
            _syscall(SYSCALLS[platform.machine()][1], ctypes.c_int(KEYCTL_DESCRIBE),
                     ctypes.c_long(key), buf, ctypes.c_long(len(buf)))
            descriptions.append(buf.value.decode().split(";", 4)[4])
        yield ring, descriptions
    finally:
        keyctl(KEYCTL_UNLINK, ring, KEY_SPEC_PROCESS_KEYRING)


# --- the scratch machine -----------------------------------------------------

def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


class Machine:
    """Scratch directories for kernel-install (its configuration, BOOT_ROOT)
    and for nmbl (configuration, state, and the root nmbl --root reads)."""

    def __init__(self, top, layout, ring):
        self.top = top
        self.conf = os.path.join(top, "kernel")
        self.boot = os.path.join(top, "boot")
        self.nmbl_conf = os.path.join(top, "nmbl-conf")
        self.state = os.path.join(top, "state")
        self.root = os.path.join(top, "root")
        write(os.path.join(self.conf, "install.conf"), f"layout={layout}\n")
        write(os.path.join(self.conf, "cmdline"), "root=UUID=7a46e7a1 ro quiet\n")
        os.makedirs(self.boot)
        os.makedirs(self.nmbl_conf)
        write(os.path.join(self.root, "proc", "keys"),
              f"{ring:08x} I------     1 perm 3f3f0000     0     0 keyring   .platform: 1\n")
        self.make_esp()

    def make_esp(self):
        """What nmbl bootcfg reads of an ESP mounted on /efi: mountinfo, the
        partition in sysfs, a GPT disk image holding it, EFI variables."""
        r = self.root
        write(os.path.join(r, "proc", "self", "mountinfo"),
              "22 1 254:3 / / rw,relatime - ext4 /dev/vda3 rw\n"
              "36 22 254:1 / /efi rw,relatime - vfat /dev/vda1 rw\n")
        os.makedirs(os.path.join(r, "efi", "EFI", "BOOT"))
        part = os.path.join(r, "sys", "class", "block", "vda", "vda1")
        write(os.path.join(part, "start"), "2048\n")
        write(os.path.join(part, "size"), "204800\n")
        write(os.path.join(part, "partition"), "1\n")
        os.makedirs(os.path.join(r, "sys", "dev", "block"))
        os.symlink("../../class/block/vda/vda1", os.path.join(r, "sys", "dev", "block", "254:1"))
        os.makedirs(os.path.join(r, "sys", "firmware", "efi", "efivars"))
        disk = os.path.join(r, "dev", "vda")
        os.makedirs(os.path.dirname(disk))
        with open(disk, "wb") as f:
            f.truncate(102 * 1024 * 1024)
        subprocess.run(["sfdisk", "-q", disk], check=True, capture_output=True, text=True,
                       input=f"label: gpt\nunit: sectors\nstart=2048, size=204800, type=U, "
                             f"uuid={ESP_UUID}\n")

    def configure_uki(self, text=None):
        write(os.path.join(self.nmbl_conf, "uki.conf"), text if text is not None else
              "# nmbl's UKI, signed by this machine\n"
              f"SIGN_KEY={os.path.abspath(build('keys', 'test.key'))}\n"
              f"SIGN_CERT=\"{os.path.abspath(build('keys', 'test.crt'))}\"\n"
              f"CMDLINE='{UKI_CMDLINE}'\n"
              "ESP=/efi\n")

    def env(self, plugins, **extra):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("KERNEL_INSTALL_", "NMBL_")) and
               k not in ("BOOT_ROOT", "MACHINE_ID", "NMBL")}
        b = os.path.abspath(BUILD)
        env.update({
            "KERNEL_INSTALL_CONF_ROOT": self.conf,
            "BOOT_ROOT": self.boot,
            "MACHINE_ID": MACHINE_ID,
            "KERNEL_INSTALL_PLUGINS": " ".join(plugins),
            "NMBL": os.path.join(b, "nmbl"),
            "NMBL_ROOT": self.root,
            "NMBL_CONF_DIR": self.nmbl_conf,
            "NMBL_STATE_DIR": self.state,
            "NMBL_UKIDIR": os.path.join(self.top, "nmbl-uki"),
            # The installed layout's pieces, from the source tree and the build.
            "NMBL_LIBEXECDIR": os.path.join(TOP, "dracut"),
            "NMBL_DATADIR": os.path.join(TOP, "dracut"),
            "NMBL_DRACUT_MODULE": os.path.join(TOP, "dracut", "modules.d", "97nmbl"),
            "NMBL_KERNEL_TREE": os.path.join(b, "kernel", "tree"),
            "NMBL_GRUB_EMU": os.path.join(b, "grub-emu"),
            "NMBL_BIN": os.path.join(b, "nmbl"),
            "NMBL_CONSOLE": os.path.join(b, "nmbl-console"),
            "NMBL_INIT": os.path.join(b, "nmbl-init"),
        })
        env.update(extra)
        return env

    def kernel_install(self, *args, plugins=(PLUGIN, LOADERENTRY), verbose=False, **extra):
        cmd = ["kernel-install"] + (["--verbose"] if verbose else []) + list(args)
        return subprocess.run(cmd, env=self.env(plugins, **extra), capture_output=True, text=True)

    def entry(self):
        return os.path.join(self.boot, "loader", "entries", f"{MACHINE_ID}-{kver()}.conf")

    def entry_dir(self):
        return os.path.join(self.boot, MACHINE_ID, kver())

    def uki(self):
        return os.path.join(self.state, kver(), "nmbl.efi")

    def efivar(self, name):
        return os.path.join(self.root, "sys", "firmware", "efi", "efivars", f"{name}-{GLOBAL}")


@contextlib.contextmanager
def machine(layout):
    with keyring(build("keys", "test.crt")) as (ring, descriptions):
        # The kernel itself names the test key: what nmbl must match.
        assert descriptions == ["SnakeOil: 63b8d5ee5df87b9a2f08dde4dba1e606c854dadb"], descriptions
        with tempfile.TemporaryDirectory(prefix="nmbl-kernel-install.") as top:
            yield Machine(top, layout, ring)


def nmbl_lines(stream):
    return [line for line in stream.splitlines() if line.startswith("nmbl:")]


def section(path, name, out):
    subprocess.run(["objcopy", "-O", "binary", f"--only-section={name}", path, out], check=True)
    return read(out)


def initramfs_files(path):
    """The names in an initramfs, compressed as the plugin's dracut does."""
    with open(path, "rb") as f:
        magic = f.read(4)
    tool = {b"\x02\x21\x4c\x18": ["lz4", "-dc"], b"\x28\xb5\x2f\xfd": ["zstd", "-dc"]}[magic]
    with open(path, "rb") as f:
        cpio = subprocess.run(tool, stdin=f, check=True, capture_output=True).stdout
    p = subprocess.run(["cpio", "-it", "--quiet"], input=cpio, check=True, capture_output=True)
    return set(p.stdout.decode().splitlines())


def check_uki(m, kernel, cert=None):
    """nmbl's UKI, built around KERNEL, signed by the test key (or CERT's),
    and offered once in the fake firmware's slot a."""
    cert = cert or build("keys", "test.crt")
    uki = m.uki()
    assert os.path.isfile(uki), os.listdir(m.state) if os.path.isdir(m.state) else m.state
    # Renamed into place: nothing else left in the state directory.
    assert sorted(os.listdir(m.state)) == [kver()], os.listdir(m.state)
    assert os.listdir(os.path.dirname(uki)) == ["nmbl.efi"]
    p = subprocess.run(["sbverify", "--cert", cert, uki], capture_output=True, text=True)
    assert p.returncode == 0 and "Signature verification OK" in p.stdout, p
    # ... and by no other key.
    other = os.path.join(m.top, "other")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=Other",
                    "-keyout", other + ".key", "-out", other + ".crt", "-days", "1"],
                   check=True, capture_output=True)
    p = subprocess.run(["sbverify", "--cert", other + ".crt", uki], capture_output=True, text=True)
    assert p.returncode != 0, p
    out = os.path.join(m.top, "section")
    assert section(uki, ".linux", out) == read(kernel), "the UKI holds another kernel"
    assert section(uki, ".cmdline", out) == UKI_CMDLINE.encode()
    # nmbl's initramfs, with the new kernel's modules.
    section(uki, ".initrd", out)
    files = initramfs_files(out)
    assert "init" in files and "usr/libexec/nmbl/grub-emu" in files, sorted(files)[:20]
    assert any(f.startswith(f"usr/lib/modules/{kver()}/kernel/") for f in files), sorted(files)[:20]
    assert_offered(m, uki)


def assert_offered(m, uki):
    """The slot tool put UKI in slot a and offered it once: BootNext is that
    slot's Boot####."""
    assert read(os.path.join(m.root, "efi", "EFI", "nmbl", "nmbl-a.efi")) == read(uki)
    p = subprocess.run([build("nmbl"), "--root", m.root, "bootcfg", "status"],
                       capture_output=True, text=True)
    assert p.returncode == 0 and "slot a: trial" in p.stdout, p
    boot_next = read(m.efivar("BootNext"))[4:]
    number = boot_next[0] | boot_next[1] << 8
    assert f"(Boot{number:04X})" in p.stdout, (number, p.stdout)


# --- layout=bls ----------------------------------------------------------------

def test_bls_untrusted_kernel_warns_and_the_entry_is_written():
    with machine("bls") as m:
        # The plugin first: had it exited 77 (or failed), systemd's
        # 90-loaderentry would not have written the entry.
        p = m.kernel_install("add", kver(), debian_kernel())
        assert p.returncode == 0, p
        assert nmbl_lines(p.stderr) == [untrusted_warning(
            f"is signed by '{DEBIAN_SIGNER}', which this machine's keys do not trust"),
            no_key_warning()], p.stderr
        entry = read(m.entry(), "r")
        assert f"linux      {m.entry_dir()}/linux\n" in entry, entry
        assert f"version    {kver()}\n" in entry
        assert read(os.path.join(m.entry_dir(), "linux")) == read(debian_kernel())
        # Without a local key, nmbl builds nothing.
        assert not os.path.exists(m.state)


def test_bls_trusted_kernel_no_warning_unsigned_kernel_one():
    with machine("bls") as m:
        p = m.kernel_install("add", kver(), TEST_KERNEL)
        assert p.returncode == 0, p
        # Nothing about the kernel's signature; that it will be kexec'd.
        assert nmbl_lines(p.stderr) == [no_key_warning()], p.stderr
        assert os.path.isfile(m.entry())
        # It did run, and found the kernel trusted.
        p = m.kernel_install("add", kver(), TEST_KERNEL, verbose=True)
        assert p.returncode == 0 and nmbl_lines(p.stderr) == [no_key_warning()], p
        assert f"nmbl: kernel {kver()} is trusted by this machine's keys.\n" in p.stdout, p.stdout
        p = m.kernel_install("add", kver(), UNSIGNED_KERNEL)
        assert p.returncode == 0, p
        assert nmbl_lines(p.stderr) == [untrusted_warning("is not signed"), no_key_warning()], p.stderr
        assert read(os.path.join(m.entry_dir(), "linux")) == read(UNSIGNED_KERNEL)


def test_bls_local_key_rebuilds_and_offers_the_uki():
    with machine("bls") as m:
        m.configure_uki()
        p = m.kernel_install("add", kver(), TEST_KERNEL)
        assert p.returncode == 0, p
        assert nmbl_lines(p.stderr) == [], p.stderr
        check_uki(m, TEST_KERNEL)
        assert os.path.isfile(m.entry())


def test_bls_older_kernel_leaves_the_uki():
    with machine("bls") as m:
        m.configure_uki()
        # This kernel's modules, and a newer kernel's.
        tree = os.path.join(m.top, "tree")
        os.makedirs(os.path.join(tree, "lib", "modules", "99.0.0-newer", "kernel"))
        os.symlink(os.path.abspath(build("kernel", "tree", "lib", "modules", kver())),
                   os.path.join(tree, "lib", "modules", kver()))
        p = m.kernel_install("add", kver(), TEST_KERNEL, verbose=True, NMBL_KERNEL_TREE=tree)
        assert p.returncode == 0 and nmbl_lines(p.stderr) == [], p
        assert (f"nmbl: kernel 99.0.0-newer is newer than {kver()}: "
                "nmbl's UKI stays around it.\n") in p.stdout, p.stdout
        assert not os.path.exists(m.state)
        assert os.path.isfile(m.entry())


def test_bls_remove_deletes_only_nmbl_files():
    with machine("bls") as m:
        p = m.kernel_install("add", kver(), TEST_KERNEL)
        assert p.returncode == 0 and os.path.isfile(m.entry()), p
        # nmbl's files for this kernel and for another, and a slot on the ESP.
        write(m.uki(), "nmbl's UKI for this kernel")
        other = os.path.join(m.state, "6.0.0-other", "nmbl.efi")
        write(other, "nmbl's UKI for another kernel")
        slot = os.path.join(m.root, "efi", "EFI", "nmbl", "nmbl-a.efi")
        write(slot, "a slot")
        p = m.kernel_install("remove", kver())
        assert p.returncode == 0, p
        assert nmbl_lines(p.stderr) == [], p.stderr
        assert not os.path.exists(os.path.dirname(m.uki()))
        assert read(other, "r") == "nmbl's UKI for another kernel"
        # The firmware's slots are the slot tool's business, not remove's.
        assert read(slot, "r") == "a slot"
        # systemd's plugin and kernel-install removed theirs.
        assert not os.path.exists(m.entry())
        assert not os.path.exists(m.entry_dir())


def test_failures_are_one_sentence_and_do_not_fail_the_install():
    with machine("bls") as m:
        m.configure_uki("SIGN_KEY=/nonexistent.key\nSIGN_CERT=/nonexistent.crt\nFROB=1\n"
                        "not a setting\n")
        # No modules for the kernel: dracut cannot run.
        empty = os.path.join(m.top, "empty")
        os.makedirs(empty)
        p = m.kernel_install("add", kver(), TEST_KERNEL, NMBL_KERNEL_TREE=empty)
        assert p.returncode == 0, p
        conf = os.path.join(m.nmbl_conf, "uki.conf")
        assert nmbl_lines(p.stderr) == [
            f"nmbl: {conf}:3 sets 'FROB', which nmbl does not know: ignored.",
            f"nmbl: {conf}:4 is not KEY=VALUE: ignored.",
            f"nmbl: cannot build nmbl's initramfs for kernel {kver()} (run-dracut: "
            f"'{empty}/lib/modules/{kver()}/kernel' not found): nmbl's UKI is not rebuilt.",
        ], p.stderr
        assert os.path.isfile(m.entry())
        assert not os.path.exists(m.uki())
        # Half-configured: no key, no UKI.
        m.configure_uki(f"SIGN_CERT={os.path.abspath(build('keys', 'test.crt'))}\n")
        p = m.kernel_install("add", kver(), TEST_KERNEL)
        assert p.returncode == 0, p
        assert nmbl_lines(p.stderr) == [
            f"nmbl: {m.nmbl_conf}/uki.conf sets no SIGN_KEY and SIGN_CERT: "
            "nmbl's UKI is not rebuilt."], p.stderr
        # No nmbl to ask.
        p = m.kernel_install("add", kver(), TEST_KERNEL, NMBL="/nonexistent/nmbl")
        assert p.returncode == 0, p
        lines = nmbl_lines(p.stderr)
        assert len(lines) == 1 and lines[0].startswith(f"nmbl: cannot inspect kernel {kver()} ("), p.stderr
        assert os.path.isfile(m.entry())
        # A program of nmbl's image whose library is not installed: dracut
        # would leave the library out, and the image's init could not start.
        m.configure_uki()
        lib = os.path.join(m.top, "libnmblgone.so")
        init = os.path.join(m.top, "nmbl-init")
        src = os.path.join(m.top, "gone.c")
        write(src, "int gone(void) { return 0; }\n")
        subprocess.run(["cc", "-shared", "-fPIC", "-o", lib, src], check=True)
        write(src, "int gone(void);\nint main(void) { return gone(); }\n")
        subprocess.run(["cc", "-o", init, src, lib, f"-Wl,-rpath,{m.top}"], check=True)
        os.unlink(lib)
        p = m.kernel_install("add", kver(), TEST_KERNEL, NMBL_INIT=init)
        assert p.returncode == 0, p
        assert nmbl_lines(p.stderr) == [
            f"nmbl: cannot build nmbl's initramfs for kernel {kver()}: {init} needs "
            f"{lib}, which is not installed: nmbl's UKI is not rebuilt."], p.stderr
        assert not os.path.exists(m.uki())
        # The slot tool finds no ESP: the UKI is built, the firmware left alone.
        m.configure_uki()
        os.unlink(os.path.join(m.root, "proc", "self", "mountinfo"))
        write(os.path.join(m.root, "proc", "self", "mountinfo"),
              "22 1 254:3 / / rw,relatime - ext4 /dev/vda3 rw\n")
        p = m.kernel_install("add", kver(), TEST_KERNEL)
        assert p.returncode == 0, p
        lines = nmbl_lines(p.stderr)
        assert len(lines) == 1 and lines[0].startswith(
            f"nmbl: nmbl bootcfg install {m.uki()} failed (") and lines[0].endswith(
            "): the firmware keeps booting the nmbl it has."), p.stderr
        assert os.path.isfile(m.uki())
        assert not os.path.exists(m.efivar("BootNext"))


# --- layout=uki ----------------------------------------------------------------

def test_uki_layout_add_rebuilds_around_the_uki_kernel_and_remove():
    with machine("uki") as m:
        m.configure_uki()
        p = m.kernel_install("add", kver(), TEST_UKI)
        assert p.returncode == 0, p
        assert nmbl_lines(p.stderr) == [], p.stderr
        # The kernel inside the target's UKI is the one nmbl's UKI runs.
        inner = os.path.join(m.top, "inner-linux")
        section(TEST_UKI, ".linux", inner)
        assert read(inner) == read(TEST_KERNEL)
        check_uki(m, inner)
        # systemd 252 writes no BLS entry for layout=uki.
        assert not os.path.exists(m.entry())
        # A UKI signed for the firmware around an unsigned kernel: kexec
        # checks the kernel.
        shutil.rmtree(m.state)
        os.unlink(os.path.join(m.nmbl_conf, "uki.conf"))
        p = m.kernel_install("add", kver(), UNSIGNED_UKI)
        assert p.returncode == 0, p
        assert nmbl_lines(p.stderr) == [untrusted_warning("is not signed"), no_key_warning()], p.stderr
        write(m.uki(), "nmbl's UKI")
        p = m.kernel_install("remove", kver())
        assert p.returncode == 0 and nmbl_lines(p.stderr) == [], p
        assert os.listdir(m.state) == []


# --- kernels that bring their UKI, kernels removed, Debian's hooks -------------

def kernel_tree(m, *others):
    """A kernel tree holding this build's kernel (its modules and Debian's
    /boot/vmlinuz-VERSION) and, for each of OTHERS, a kernel installed
    beside it (an empty module directory)."""
    tree = os.path.join(m.top, "tree")
    modules = os.path.join(tree, "lib", "modules")
    os.makedirs(modules)
    os.symlink(os.path.abspath(build("kernel", "tree", "lib", "modules", kver())),
               os.path.join(modules, kver()))
    os.makedirs(os.path.join(tree, "boot"))
    os.symlink(os.path.abspath(TEST_KERNEL), os.path.join(tree, "boot", f"vmlinuz-{kver()}"))
    for version in others:
        os.makedirs(os.path.join(modules, version, "kernel"))
    return tree


def test_a_kernel_with_its_own_uki_has_it_offered_without_a_key():
    with machine("bls") as m:
        tree = kernel_tree(m)
        # As kernel-uki-nmbl installs it, beside the kernel's modules.
        packaged = os.path.join(tree, "usr", "lib", "modules", kver(), "nmbl.efi")
        os.makedirs(os.path.dirname(packaged))
        shutil.copy(build("nmbl.efi"), packaged)
        p = m.kernel_install("add", kver(), TEST_KERNEL, NMBL_KERNEL_TREE=tree)
        assert p.returncode == 0 and nmbl_lines(p.stderr) == [], p
        assert_offered(m, packaged)
        assert not os.path.exists(m.state)
        # Again (kernel-uki-nmbl's own scriptlet after kernel-core's): the
        # same UKI on trial is left as it is.
        before = read(m.efivar("BootNext"))
        p = m.kernel_install("add", kver(), TEST_KERNEL, NMBL_KERNEL_TREE=tree)
        assert p.returncode == 0 and nmbl_lines(p.stderr) == [], p
        assert read(m.efivar("BootNext")) == before
        assert_offered(m, packaged)


def test_removing_the_newest_kernel_offers_the_uki_of_the_one_left():
    with machine("bls") as m:
        m.configure_uki()
        tree = kernel_tree(m, "99.0.0-newer", "1.0.0-older")
        # An older kernel removed: nmbl's UKI stays around the newest.
        p = m.kernel_install("remove", "1.0.0-older", NMBL_KERNEL_TREE=tree)
        assert p.returncode == 0 and nmbl_lines(p.stderr) == [], p
        assert not os.path.exists(m.efivar("BootNext"))
        # The newest removed while the UKI built earlier around the kernel
        # left is there: that one is offered, nothing built.
        os.makedirs(os.path.dirname(m.uki()))
        shutil.copy(build("nmbl.efi"), m.uki())
        p = m.kernel_install("remove", "99.0.0-newer", NMBL_KERNEL_TREE=tree, verbose=True)
        assert p.returncode == 0 and nmbl_lines(p.stderr) == [], p
        assert f"nmbl: kernel {kver()} is now the newest: nmbl's UKI follows it.\n" in p.stdout
        assert read(m.uki()) == read(build("nmbl.efi"))
        assert_offered(m, m.uki())


def test_removing_the_newest_kernel_builds_a_uki_for_the_one_left():
    with machine("bls") as m:
        m.configure_uki()
        tree = kernel_tree(m, "99.0.0-newer")
        p = m.kernel_install("remove", "99.0.0-newer", NMBL_KERNEL_TREE=tree)
        assert p.returncode == 0 and nmbl_lines(p.stderr) == [], p
        check_uki(m, TEST_KERNEL)


def debian_hooks(m):
    """Debian's /etc/kernel hook directories with nmbl's zz-nmbl in both,
    as make install puts it, after a hook of the distribution's."""
    hooks = os.path.join(m.top, "etc-kernel")
    for d in ("postinst.d", "postrm.d"):
        os.makedirs(os.path.join(hooks, d))
        shutil.copy(os.path.join(TOP, "specs", "zz-nmbl"), os.path.join(hooks, d, "zz-nmbl"))
        write(os.path.join(hooks, d, "initramfs-tools"), "#!/bin/sh\necho \"$0 $*\" >&2\n")
        os.chmod(os.path.join(hooks, d, "initramfs-tools"), 0o755)
    return hooks


def run_parts(m, hooks, stage, *args, **extra):
    """What a Debian kernel package's maintainer script runs."""
    env = m.env([], NMBL_KERNEL_PLUGIN=PLUGIN, **extra)
    return subprocess.run(["run-parts", "--report", "--exit-on-error"] +
                          [f"--arg={a}" for a in args] + [os.path.join(hooks, stage)],
                          env=env, capture_output=True, text=True)


def test_debian_hooks_build_and_offer_the_uki_with_the_key_nmbl_key_made():
    with machine("bls") as m:
        hooks = debian_hooks(m)
        tree = kernel_tree(m)
        image = os.path.join(tree, "boot", f"vmlinuz-{kver()}")
        # No key yet: said once, nothing built, nothing on stdout (debconf's).
        p = run_parts(m, hooks, "postinst.d", kver(), image, NMBL_KERNEL_TREE=tree)
        assert p.returncode == 0 and p.stdout == "", p
        assert nmbl_lines(p.stderr) == [no_key_warning()], p.stderr
        assert not os.path.exists(m.state) and not os.path.exists(m.efivar("BootNext"))
        # The machine's owner settles how the UKI is built, then makes the
        # key: nmbl-key keeps those lines and adds its own.
        m.configure_uki(f"CMDLINE='{UKI_CMDLINE}'\nESP=/efi\n")
        env = {"PATH": os.environ["PATH"], "NMBL_CONF_DIR": m.nmbl_conf}
        p = subprocess.run([os.path.join(TOP, "nmbl-loader", "tools", "nmbl-key"), "create",
                            "--subject", "nmbl test machine"],
                           env=env, capture_output=True, text=True)
        assert p.returncode == 0, p
        key, cert = (os.path.join(m.nmbl_conf, "keys", f) for f in ("nmbl.key", "nmbl.crt"))
        assert os.stat(key).st_mode & 0o777 == 0o600
        assert read(os.path.join(m.nmbl_conf, "uki.conf"), "r").splitlines()[-4:] == [
            f"CMDLINE='{UKI_CMDLINE}'", "ESP=/efi", f"SIGN_KEY='{key}'", f"SIGN_CERT='{cert}'"]
        p = run_parts(m, hooks, "postinst.d", kver(), image, NMBL_KERNEL_TREE=tree)
        assert p.returncode == 0 and p.stdout == "", p
        assert nmbl_lines(p.stderr) == [], p.stderr
        # The distribution's hook ran first, as "zz-" promises.
        assert p.stderr.startswith(os.path.join(hooks, "postinst.d", "initramfs-tools")), p.stderr
        check_uki(m, TEST_KERNEL, cert=cert)
        # The package removed: nmbl's files for it go, the slot keeps its
        # copy, which the firmware still boots.
        p = run_parts(m, hooks, "postrm.d", kver(), image, NMBL_KERNEL_TREE=tree)
        assert p.returncode == 0 and p.stdout == "" and nmbl_lines(p.stderr) == [], p
        assert os.listdir(m.state) == []
        assert read(os.path.join(m.root, "efi", "EFI", "nmbl", "nmbl-a.efi"))[:2] == b"MZ"
