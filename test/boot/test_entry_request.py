# SPDX-License-Identifier: GPL-3.0-or-later
"""The booted system asks for the next boot's entry as systemd's tools do
("bootctl set-oneshot", "bootctl set-default", "systemctl reboot
--boot-loader-entry"): the menu honours the one-shot request once, then the
default request, both over grub.cfg's own default.

One firmware variable store across three power cycles: the default entry's
target writes the requests; the next boot goes to the one-shot entry; the
one after that to the default request's entry."""

import os
import re

from fixture import (BOOT_TIMEOUT, MENU_READY, TARGET_UP, VM, build_path, entry,
                     expected_cmdline, kver, make_disk, workdir)


def grub_cfg():
    k = kver()
    cfg = "set default=0\nset timeout=3\n\n"
    # The requests as a person types them: a glob in another case, and a
    # BLS-style file name for an entry whose id has no ".conf".
    cfg += entry("First", f"/vmlinuz-{k}",
                 "nmbl.entry=first 'nmbl_test.efivar=LoaderEntryOneShot=SECOND*' "
                 "nmbl_test.efivar=LoaderEntryDefault=third.conf", entry_id="first")
    cfg += entry("Second", f"/vmlinuz-{k}", "nmbl.entry=second", entry_id="second-entry")
    cfg += entry("Third", f"/vmlinuz-{k}", "nmbl.entry=third", entry_id="third")
    return cfg


def efivars(log):
    return dict(re.findall(r"NMBL-TARGET-EFIVAR (\w+)=([^\r\n]*)", log))


def test_oneshot_then_default_request_over_three_boots():
    k = kver()
    disk = make_disk("entry-request", grub_cfg(), {
        f"vmlinuz-{k}": build_path("test", "vmlinuz-test"),
        f"initrd.img-{k}": build_path("test", "target-initrd.img"),
    })
    vars_file = os.path.join(workdir("entry-request-vars"), "OVMF_VARS.fd")
    boots = []
    for n in range(3):
        with VM(disk, snapshot=True, vars_file=vars_file,
                log_file=build_path("test", f"entry-request-{n + 1}.log")) as vm:
            vm.wait_for(MENU_READY, timeout=BOOT_TIMEOUT)
            up = vm.wait_for(TARGET_UP, timeout=BOOT_TIMEOUT)
            vm.wait_exit(timeout=60)
            boots.append((up.group(2), vm.clean_log()))

    (first, log1), (second, log2), (third, log3) = boots
    assert first == expected_cmdline(f"/vmlinuz-{k}", (
        "nmbl.entry=first nmbl_test.efivar=LoaderEntryOneShot=SECOND* "
        "nmbl_test.efivar=LoaderEntryDefault=third.conf")), first
    assert "NMBL-TARGET-EFIVAR-SET LoaderEntryOneShot=SECOND*" in log1, \
        "the first target could not write its one-shot request"
    assert "NMBL-TARGET-EFIVAR-SET LoaderEntryDefault=third.conf" in log1

    assert second == expected_cmdline(f"/vmlinuz-{k}", "nmbl.entry=second"), \
        f"the one-shot request was not honoured: {second!r}"
    found = efivars(log2)
    assert found.get("LoaderEntrySelected") == "second-entry", found
    assert "LoaderEntryOneShot" not in found, "nmbl left the one-shot request in place"
    assert found.get("LoaderEntryDefault") == "third.conf", found

    assert third == expected_cmdline(f"/vmlinuz-{k}", "nmbl.entry=third"), \
        f"the default request was not honoured once the one-shot was used: {third!r}"
    assert efivars(log3).get("LoaderEntrySelected") == "third", efivars(log3)
