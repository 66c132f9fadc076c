# SPDX-License-Identifier: GPL-3.0-or-later
"""dracut/mkuki takes each path as one word.  The kernel-install plugin and
Debian's hooks hand it paths that hold a kernel version, which a package
names: a directory "6.1.0 -R .linux *" used to be split and globbed into
objcopy's options, and its "-R .linux" took the kernel out of the UKI.
Here every path holds spaces, glob characters and words that would be
options, and each section must hold exactly its file."""

import os
import subprocess
import tempfile

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
STUB = os.environ.get("UKI_STUB", "/usr/lib/systemd/boot/efi/linuxx64.efi.stub")
CMDLINE = "root=UUID=0a1b2c3d-1111-2222-3333-444455556666 ro quiet 'x y' *"


def section(path, name):
    with tempfile.NamedTemporaryFile() as out:
        subprocess.run(["objcopy", "-O", "binary", f"--only-section={name}", path, out.name],
                       check=True)
        return open(out.name, "rb").read()


def test_paths_with_spaces_globs_and_options_stay_whole():
    with tempfile.TemporaryDirectory() as tmp:
        # What the old word-splitting globbed "*" into: the files here.
        for decoy in ("-R", ".linux", "--strip-all"):
            open(os.path.join(tmp, decoy), "w").close()
        odd = os.path.join(tmp, "6.1.0 -R .linux * --strip-all")
        os.makedirs(odd)
        files = {"kernel": b"not a kernel, but its bytes\n" * 100,
                 "initrd": b"not an initrd\n" * 50,
                 "os release": b"ID=nmbl\n",
                 "sbat *.csv": b"nmbl,1,nmbl,nmbl,1,https://example.invalid/nmbl\n"}
        for name, data in files.items():
            with open(os.path.join(odd, name), "wb") as f:
                f.write(data)
        out = os.path.join(odd, "nmbl -R .linux.efi")
        p = subprocess.run([os.path.join(TOP, "dracut", "mkuki"), STUB,
                            *(os.path.join(odd, n) for n in ("kernel", "initrd")), CMDLINE,
                            *(os.path.join(odd, n) for n in ("os release", "sbat *.csv")), out],
                           capture_output=True, text=True, cwd=tmp)
        assert p.returncode == 0, p.stdout + p.stderr
        assert section(out, ".linux") == files["kernel"]
        assert section(out, ".initrd") == files["initrd"]
        assert section(out, ".osrel") == files["os release"]
        assert section(out, ".cmdline") == CMDLINE.encode()
        assert section(out, ".sbat").endswith(files["sbat *.csv"])
        # Nothing else was written beside the UKI, no temporary left.
        assert sorted(os.listdir(odd)) == sorted([*files, os.path.basename(out)])
        assert sorted(os.listdir(tmp)) == sorted(["-R", ".linux", "--strip-all",
                                                  os.path.basename(odd)])
