#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
#
# For the VM tests only: a secret sealed to PCR 11 while nmbl runs.  When
# the second disk holds a LUKS2 volume labelled nmbl-selftest-pcrs=LIST
# (test/boot/measured.py), enroll it for the TPM's PCRs in LIST with
# systemd-cryptenroll, as a user would, then unlock it with the token
# alone without activating it, saying on the console:
#   NMBL-SEAL enroll pcrs=LIST exit=STATUS
#   NMBL-SEAL unlock exit=STATUS      (0: the TPM gave the key)
# The booted system tries the same unlock (test/target/init.c).  Without
# such a volume, nothing.
set -eu

disk=/dev/vdb
key=/run/nmbl-seal-key
[ -b "$disk" ] || exit 0
cryptsetup isLuks "$disk" 2>/dev/null || exit 0
label=
cryptsetup luksDump "$disk" >/run/nmbl-seal-dump
while IFS= read -r line; do
	case $line in
	Label:*) label=${line#Label:} ;;
	esac
done </run/nmbl-seal-dump
rm -f /run/nmbl-seal-dump
# shellcheck disable=SC2086 # the label's blanks go
set -- $label
case ${1-} in
nmbl-selftest-pcrs=*) pcrs=${1#*=} ;;
*) exit 0 ;;
esac
umask 077
printf '%s' nmbl-test-passphrase >"$key"
status=0
systemd-cryptenroll --tpm2-device=auto --tpm2-pcrs="$pcrs" --unlock-key-file="$key" \
	"$disk" >/dev/console 2>&1 || status=$?
rm -f "$key"
echo "NMBL-SEAL enroll pcrs=$pcrs exit=$status" >/dev/console
status=0
cryptsetup open --test-passphrase --token-only "$disk" >/dev/console 2>&1 || status=$?
echo "NMBL-SEAL unlock exit=$status" >/dev/console
