# SPDX-License-Identifier: GPL-3.0-or-later
"""What a verifier of a measured boot does, for the VM tests: read the PCRs
and logs the target reported (its init with nmbl.test-tpm), parse the TCG
event log and systemd's JSON-SEQ log, and replay them to PCR values.

Written from the TCG PC Client specification, not from nmbl's code, so that
the tests check nmbl against the format rather than against itself."""

import base64
import collections
import hashlib
import json
import os
import re
import struct
import subprocess

EV_NO_ACTION = 0x03
EV_IPL = 0x0D
ALGS = {0x0004: "sha1", 0x000B: "sha256", 0x000C: "sha384", 0x000D: "sha512"}

Event = collections.namedtuple("Event", "pcr type digests data")

NMBL_EVENT_LOG = "/run/log/nmbl/tpm2-event-log.bin"
NMBL_JSON_LOG_KEXEC = "/run/log/nmbl/tpm2-measure.log"
SYSTEMD_JSON_LOG = "/run/log/systemd/tpm2-measure.log"
FIRMWARE_LOG = "/sys/kernel/security/tpm0/binary_bios_measurements"


class Report:
    """The target's NMBL-TARGET-PCR and NMBL-TARGET-FILE lines."""

    def __init__(self, log):
        self.pcrs = {}
        for bank, index, value in re.findall(r"NMBL-TARGET-PCR (\w+) (\d+) ([0-9a-fA-F]+)", log):
            self.pcrs[(bank, int(index))] = bytes.fromhex(value)
        chunks = collections.defaultdict(list)
        for path, b64 in re.findall(r"NMBL-TARGET-FILE (\S+) ([A-Za-z0-9+/=]+)\r?\n", log):
            chunks[path].append(b64)
        self.files = {}
        for path, end in re.findall(r"NMBL-TARGET-FILE-END (\S+) (\S+)", log):
            if end == "missing":
                self.files[path] = None
                continue
            data = b"".join(base64.b64decode(c) for c in chunks[path])
            assert len(data) == int(end), f"{path}: {len(data)} bytes arrived of {end}"
            self.files[path] = data

        # test/target/init.c's lines for a LUKS volume on a second disk.
        self.luks = {}
        for m in re.finditer(r"NMBL-TARGET-LUKS (enroll|unlock) (?:pcrs=\S+ )?"
                             r"(?:token=(\w+) )?exit=(-?\d+)", log):
            self.luks[m.group(1)] = m.group(3)
            if m.group(2):
                self.luks["token"] = m.group(2)

    def banks(self):
        return sorted({bank for bank, _ in self.pcrs})

    def pcr(self, bank, index):
        return self.pcrs[(bank, index)]


# What test/target/init.c enrolls with: the label names the PCRs.
LUKS_ENROLL_LABEL = "nmbl-tpm2-pcrs="
LUKS_TEST_PASSPHRASE = b"nmbl-test-passphrase"
# What systemd's TPM2 token says when the PCRs are not the sealed ones.
POLICY_MISMATCH = "Current policy digest does not match stored policy digest"


def make_luks(path, pcrs, label=LUKS_ENROLL_LABEL):
    """A small LUKS2 volume with a passphrase only, which the target enrolls
    for the TPM's PCRS (e.g. "7+8+9") the first time it sees it (with
    another LABEL, whoever that label names)."""
    key = path + ".key"
    with open(path, "wb") as f:
        f.truncate(8 * 1024 * 1024)
    with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
        f.write(LUKS_TEST_PASSPHRASE)
    # PBKDF2 and a small header: the passphrase only enrolls, and the VM is slow.
    subprocess.run(["cryptsetup", "luksFormat", "--batch-mode", "--type", "luks2",
                    "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000",
                    "--luks2-metadata-size", "16k", "--luks2-keyslots-size", "1m",
                    "--label", label + pcrs, "--key-file", key, path],
                   check=True, capture_output=True)
    os.unlink(key)
    return path


def parse_tcg(data):
    """A crypto-agile TCG event log: the events after its Spec ID header."""
    assert len(data) >= 32, "no TCG log header"
    header_size = struct.unpack_from("<I", data, 28)[0]
    spec = data[32:32 + header_size]
    assert spec[:16] == b"Spec ID Event03\0", "not a crypto-agile log"
    sizes = {}
    for i in range(struct.unpack_from("<I", spec, 24)[0]):
        alg, size = struct.unpack_from("<HH", spec, 28 + 4 * i)
        sizes[alg] = size
    events, off = [], 32 + header_size
    while off < len(data):
        pcr, etype, count = struct.unpack_from("<III", data, off)
        off += 12
        assert count == len(sizes), f"event at {off}: {count} digests, the header has {len(sizes)}"
        digests = {}
        for _ in range(count):
            alg = struct.unpack_from("<H", data, off)[0]
            digests[ALGS.get(alg, hex(alg))] = data[off + 2:off + 2 + sizes[alg]]
            off += 2 + sizes[alg]
        size = struct.unpack_from("<I", data, off)[0]
        events.append(Event(pcr, etype, digests, data[off + 4:off + 4 + size]))
        off += 4 + size
    assert off == len(data), "the log ends inside an event"
    return events


def replay(events, bank, pcrs=(8, 9, 11)):
    """PCRs as EVENTS extend them from zero (EV_NO_ACTION extends nothing)."""
    size = hashlib.new(bank).digest_size
    values = {i: bytes(size) for i in pcrs}
    for e in events:
        if e.type != EV_NO_ACTION and e.pcr in values:
            values[e.pcr] = hashlib.new(bank, values[e.pcr] + e.digests[bank]).digest()
    return values


def parse_json_seq(data):
    """systemd's userspace measurement log: RFC 7464 records."""
    assert data.startswith(b"\x1e"), "a JSON-SEQ log starts with a record separator"
    return [json.loads(r) for r in data.split(b"\x1e")[1:]]


def grub_event_text(e):
    """What GRUB logs for an EV_IPL event: a string and its NUL."""
    assert e.type == EV_IPL and e.data.endswith(b"\0"), e
    return e.data[:-1].decode()
