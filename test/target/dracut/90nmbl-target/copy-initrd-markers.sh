#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
#
# pre-pivot hook, sourced by dracut's init: no set -eu, no exit, and a
# failure must not stop the boot -- the target's init reports what it finds.

if [ -d /nmbl-initrd-marker ]; then
    mkdir -p /run/nmbl-initrd-marker
    cp -p /nmbl-initrd-marker/* /run/nmbl-initrd-marker/ 2>/dev/null || :
fi
