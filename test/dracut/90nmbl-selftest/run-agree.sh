#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# pre-mount hook, sourced by dracut's init before nmbl's menu starts.
/usr/libexec/nmbl/nmbl-agree || warn "nmbl-agree failed"
