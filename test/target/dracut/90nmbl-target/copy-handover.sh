#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
#
# pre-pivot hook, sourced by dracut's init: no set -eu, no exit.
# nmbl hands a kexec'd system its measurement logs in the initramfs, below
# /.extra/nmbl/; switch_root discards them, /run goes along: the target
# reads them where a direct boot leaves them, /run/log/nmbl/.

if [ -d /.extra/nmbl ]; then
    mkdir -p /run/log/nmbl
    cp -p /.extra/nmbl/* /run/log/nmbl/ 2>/dev/null || :
fi
