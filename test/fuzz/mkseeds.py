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

# Where real images put their headers.  A bzImage (Debian's 6.1 vmlinuz) has
# its PE header right after the DOS header, at 0x40, with 6 data directories;
# the section table ends before Linux's boot header at 0x1f1 ("HdrS" at 0x202),
# which shares the first sector with it.  An EFI program (systemd's
# linuxx64.efi.stub, hence a UKI) has a 0x80-byte DOS stub, 16 directories and
# its first section at 0x400.
BZIMAGE_LFANEW = 0x40
BZIMAGE_DIRS = 6
EFI_LFANEW = 0x80
EFI_DIRS = 16
HEADERS_SIZE = 0x400
FILE_ALIGN = 0x200
SECURITY_DIR = 4
SCN_CODE = 0x60000020  # code, execute, read
SCN_RODATA = 0x40000040  # initialised data, read
SCN_DATA = 0xc0000040  # initialised data, read, write
SCN_DISCARDABLE = 0x02000000

# A bzImage scaled down from Debian's: its setup code ends after SETUP_SECTS
# sectors (0xa00, not 0x5000), its .setup and .compat sections lie in it,
# .text and .data follow; the version string is in the setup code.
SETUP_SECTS = 4
VERSION_AT = 0x700


def align(n, to=FILE_ALIGN):
    return (n + to - 1) & ~(to - 1)


def pe_header(out, lfanew, n_dirs, table, image_size):
    """Write the DOS header and a PE32+ header into OUT; TABLE lists the
    sections as (name, rva, offset, virtual size, raw size, flags).  Return
    the optional header's offset."""
    opt_size = 112 + 8 * n_dirs
    out[0:2] = b"MZ"
    struct.pack_into("<I", out, 0x3c, lfanew)
    out[lfanew:lfanew + 4] = b"PE\0\0"
    struct.pack_into("<HHIIIHH", out, lfanew + 4, 0x8664, len(table), 0, 0, 0, opt_size, 0x206)
    opt = lfanew + 24
    struct.pack_into("<H", out, opt, 0x20b)
    struct.pack_into("<II", out, opt + 32, 0x1000, FILE_ALIGN)
    struct.pack_into("<II", out, opt + 56, image_size, HEADERS_SIZE)
    struct.pack_into("<H", out, opt + 68, 10)  # an EFI application
    struct.pack_into("<I", out, opt + 108, n_dirs)
    for i, (name, rva, off, vsize, raw, flags) in enumerate(table):
        struct.pack_into("<8sIIII12xI", out, opt + opt_size + 40 * i, name.encode(),
                         vsize, rva, raw, off, flags)
    return opt


def sign(image, opt, cert):
    """IMAGE with CERT appended as its security directory."""
    image = bytearray(image)
    struct.pack_into("<II", image, opt + 112 + SECURITY_DIR * 8, len(image), len(cert))
    return bytes(image + cert)


def pe(sections):
    """An EFI program laid out as systemd's stub is; SECTIONS is a list of
    (name, data)."""
    out = bytearray(HEADERS_SIZE)
    table, body = [], bytearray()
    for i, (name, blob) in enumerate(sections):
        table.append((name, 0x1000 * (i + 1), HEADERS_SIZE + len(body), len(blob),
                      align(len(blob)), SCN_RODATA))
        body += blob + b"\0" * (align(len(blob)) - len(blob))
    pe_header(out, EFI_LFANEW, EFI_DIRS, table, 0x1000 * (len(sections) + 1))
    return bytes(out + body)


def bzimage(version, cert=b""):
    """A Linux kernel as the EFI stub and the boot protocol lay it out."""
    setup_end = (SETUP_SECTS + 1) * 512
    table = [(".setup", HEADERS_SIZE, HEADERS_SIZE, 0x400, 0x400, SCN_RODATA | SCN_DISCARDABLE),
             (".compat", 0x800, 0x800, 0x200, 0x200, SCN_RODATA | SCN_DISCARDABLE),
             (".text", setup_end, setup_end, 0x400, 0x400, SCN_CODE),
             # its bss makes the virtual size bigger than the raw one
             (".data", 0xe00, 0xe00, 0x4000, 0x200, SCN_DATA)]
    out = bytearray(0x1000)
    opt = pe_header(out, BZIMAGE_LFANEW, BZIMAGE_DIRS, table, 0xe00 + 0x4000)
    table_end = opt + 112 + 8 * BZIMAGE_DIRS + 40 * len(table)
    out[table_end:0x1f1] = b"\xff" * (0x1f1 - table_end)
    # setup_sects, root_flags, syssize, ram_size, vid_mode, root_dev, boot_flag
    struct.pack_into("<BHIHHHH", out, 0x1f1, SETUP_SECTS, 1, (len(out) - setup_end) // 16,
                     0, 0xffff, 0, 0xaa55)
    # jump, "HdrS", protocol 2.15, realmode_swtch, start_sys_seg, kernel_version
    struct.pack_into("<2s4sHIHH", out, 0x200, b"\xeb\x6a", b"HdrS", 0x20f, 0, 0x1000,
                     VERSION_AT - 0x200)
    # type_of_loader, loadflags (LOADED_HIGH), setup_move_size, code32_start
    struct.pack_into("<BBHI", out, 0x210, 0, 1, 0x8000, 0x100000)
    # kernel_alignment, relocatable_kernel, min_alignment, xloadflags, cmdline_size
    struct.pack_into("<IBBHI", out, 0x230, 0x200000, 1, 0x15, 0x7f, 2047)
    v = version.encode() + b"\0"
    out[VERSION_AT:VERSION_AT + len(v)] = v
    out[setup_end:setup_end + 64] = b"\x90" * 64
    return sign(out, opt, cert) if cert else bytes(out)


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
    version = "6.1.0-test (nmbl) #1 SMP"
    kernel = bzimage(version)
    pkcs7 = open(signature, "rb").read() if signature else b"\x30\x82" + b"\0" * 14
    win_cert = struct.pack("<IHH", 8 + len(pkcs7), 0x0200, 0x0002) + pkcs7
    win_cert += b"\0" * (-len(win_cert) % 8)
    seeds = {
        "kernel.efi": kernel,
        "kernel-signed.efi": bzimage(version, cert=win_cert),
        # A kernel cut inside its boot header, after the protocol version and
        # before the version string's pointer.
        "kernel-cut-at-0x208": kernel[:0x208],
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
