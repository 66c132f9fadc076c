#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
#
# cmdline hook, sourced by dracut's init.  nmbl's root file system is chosen
# in the menu, not on nmbl's own command line: tell init there is one to
# come, so that it proceeds to the pre-mount hook that runs the menu.
# shellcheck disable=SC2034 # read by dracut's init, which sources this
root=nmbl
# shellcheck disable=SC2034
rootok=1
