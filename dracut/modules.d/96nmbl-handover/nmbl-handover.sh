#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
#
# pre-pivot hook, sourced by dracut's init: no set -eu, no exit, and a
# failure must not stop the boot.

if [ -d /.extra/nmbl ]; then
    mkdir -p /run/log/nmbl
    cp -p /.extra/nmbl/* /run/log/nmbl/ 2>/dev/null || :
fi
