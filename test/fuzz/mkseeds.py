#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write the seed corpora of the fuzzers: for the PE/UKI parser, small images
with the shape of a Linux kernel (EFI stub + boot header), a UKI holding one,
and a signed one (real kernels are megabytes; the fuzzer needs only their
structure); for the Authenticode reader, certificate tables; for the EFI
load-option decoder, Boot#### values as firmware and nmbl write them.

    test/fuzz/mkseeds.py test/fuzz/corpus [SIGNATURE.der]

SIGNATURE.der, a PKCS#7 SignedData (any content) whose signer certificate it
carries, becomes the signed seed's Authenticode signature; the committed seed
was made with Debian's OVMF test certificate ("snakeoil"):
    openssl smime -sign -binary -nodetach -outform DER -signer CERT -inkey KEY
"""

import os
import struct
import sys
import uuid

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


def utf16(text):
    return text.encode("utf-16-le") + b"\0\0"


def node(kind, subtype, data):
    return struct.pack("<BBH", kind, subtype, 4 + len(data)) + data


def load_option(description, path, optional=b""):
    """An EFI_LOAD_OPTION; PATH is the device path's nodes, without the end."""
    path += node(0x7f, 0xff, b"")
    return struct.pack("<IH", 1, len(path)) + utf16(description) + path + optional


def guid(text):
    return uuid.UUID(text).bytes_le


def loadopt_seeds():
    hd = node(4, 1, struct.pack("<IQQ", 1, 2048, 204800)
              + guid("e5b0e5b0-1111-4222-8333-e5b0e5b0e5b0") + b"\x02\x02")
    mbr = node(4, 1, struct.pack("<IQQ", 2, 63, 1000) + b"\x78\x56\x34\x12" + b"\0" * 12
               + b"\x01\x01")
    pci = node(2, 1, struct.pack("<II", 0x0a0341d0, 0)) + node(1, 1, b"\x00\x03")
    return {
        "nmbl.opt": load_option("nmbl", hd + node(4, 4, utf16("\\EFI\\nmbl\\nmbl.efi"))),
        "split-file.opt": load_option("Windows Boot Manager",
                                      hd + node(4, 4, utf16("\\EFI\\Microsoft"))
                                      + node(4, 4, utf16("Boot\\bootmgfw.efi")),
                                      b"WINDOWS\0"),
        "mbr.opt": load_option("old disk", mbr + node(4, 4, utf16("\\boot.efi"))),
        "shell.opt": load_option("EFI Internal Shell",
                                 node(4, 7, guid("7cb8bdc9-f8eb-4f34-aaea-3ee4af6516a1"))
                                 + node(4, 6, guid("7c04a583-9e3e-4f1c-ad65-e05268d0b4d1"))),
        "two-instances.opt": load_option("UEFI QEMU HARDDISK \u00e9\U0001f600",
                                         pci + node(3, 1, b"\x01\x00") + node(0x7f, 1, b"")
                                         + pci),
    }


def main(root, signature=None):
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
    other_cert = struct.pack("<IHH", 8 + 4, 0x0100, 0x0001) + b"X509"
    other_cert += b"\0" * (-len(other_cert) % 8)
    corpora = {
        "pe": seeds,
        "authenticode": {"one.cert": win_cert, "two.cert": other_cert + win_cert},
        "loadopt": loadopt_seeds(),
    }
    for corpus, files in corpora.items():
        directory = os.path.join(root, corpus)
        os.makedirs(directory, exist_ok=True)
        for name, blob in files.items():
            with open(os.path.join(directory, name), "wb") as f:
                f.write(blob)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus"),
         sys.argv[2] if len(sys.argv) > 2 else None)
