#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write the seed corpus of the PE/UKI fuzzer: small images with the shape of
a Linux kernel (EFI stub + boot header), a UKI holding one, and a signed
one.  Real kernels are megabytes; the fuzzer needs only their structure.

    test/fuzz/mkseeds.py test/fuzz/corpus/pe [SIGNATURE.der]

SIGNATURE.der, a PKCS#7 SignedData (any content) whose signer certificate it
carries, becomes the signed seed's Authenticode signature; the committed seed
was made with Debian's OVMF test certificate ("snakeoil"):
    openssl smime -sign -binary -nodetach -outform DER -signer CERT -inkey KEY
"""

import os
import struct
import sys

LFANEW = 0x400  # after the setup code, as in a real kernel
OPT_SIZE = 240  # PE32+ with 16 data directories


def pe(sections, cert=b"", linux_version=None):
    """A PE32+ image: SECTIONS is a list of (name, data); CERT is appended as
    the security directory; LINUX_VERSION adds Linux's boot header."""
    head = LFANEW + 4 + 20 + OPT_SIZE + 40 * len(sections)
    data_off = (head + 0x1ff) & ~0x1ff
    out = bytearray(data_off)
    out[0:2] = b"MZ"
    struct.pack_into("<I", out, 0x3c, LFANEW)
    if linux_version is not None:
        out[0x1f1] = 1  # setup_sects: the setup code ends at 0x400
        out[0x202:0x206] = b"HdrS"
        struct.pack_into("<H", out, 0x206, 0x20f)
        struct.pack_into("<H", out, 0x20e, 0x280 - 0x200)
        struct.pack_into("<I", out, 0x238, 2047)
        v = linux_version.encode() + b"\0"
        out[0x280:0x280 + len(v)] = v
    out[LFANEW:LFANEW + 4] = b"PE\0\0"
    struct.pack_into("<HHIIIHH", out, LFANEW + 4, 0x8664, len(sections), 0, 0, 0, OPT_SIZE, 0x22)
    opt = LFANEW + 24
    struct.pack_into("<H", out, opt, 0x20b)
    struct.pack_into("<I", out, opt + 108, 16)
    table = opt + OPT_SIZE
    body = bytearray()
    for i, (name, blob) in enumerate(sections):
        off = data_off + len(body)
        struct.pack_into("<8sIIII", out, table + 40 * i, name.encode(), len(blob),
                         0x1000 * (i + 1), (len(blob) + 0x1ff) & ~0x1ff, off)
        body += blob + b"\0" * (((len(blob) + 0x1ff) & ~0x1ff) - len(blob))
    image = out + body
    if cert:
        struct.pack_into("<II", image, opt + 112 + 4 * 8, len(image), len(cert))
        image += cert
    return bytes(image)


def main(directory, signature=None):
    os.makedirs(directory, exist_ok=True)
    kernel = pe([(".text", b"\x90" * 64)], linux_version="6.1.0-test (nmbl) #1 SMP")
    pkcs7 = open(signature, "rb").read() if signature else b"\x30\x82" + b"\0" * 14
    win_cert = struct.pack("<IHH", 8 + len(pkcs7), 0x0200, 0x0002) + pkcs7
    win_cert += b"\0" * (-len(win_cert) % 8)
    seeds = {
        "kernel.efi": kernel,
        "kernel-signed.efi": pe([(".text", b"\x90" * 64)], cert=win_cert,
                                linux_version="6.1.0-test (nmbl) #1 SMP"),
        "uki.efi": pe([(".osrel", b"ID=test\n"), (".cmdline", b"quiet\0"),
                       (".ucode", b"UCODE"), (".linux", kernel), (".initrd", b"07070100")]),
        "efi-program.efi": pe([(".text", b"\xc3")]),
    }
    for name, blob in seeds.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(blob)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "pe"),
         sys.argv[2] if len(sys.argv) > 2 else None)
