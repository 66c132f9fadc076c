/* SPDX-License-Identifier: GPL-3.0-or-later */
#ifndef NMBL_FAKE_SYS_H
#define NMBL_FAKE_SYS_H

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>

struct fake_sys {
	/* Set by the test. */
	const char *root; /* stripped from recorded paths */
	int kexec_errno, mount_errno, reboot_errno, systemctl_errno, keyring_errno,
	    finit_errno, efivar_errno;
	/* One module (its file's name) fails to insert with this errno, as a
	 * module for hardware the machine lacks does (crc32c-intel: ENODEV). */
	const char *finit_fail_module;
	int finit_fail_errno;
	/* The watchdog: opening it, setting its timeout, stopping it fail
	 * with these; the timeout the driver sets instead (0: as asked). */
	int watchdog_errno, watchdog_timeout_errno, watchdog_stop_errno;
	unsigned watchdog_timeout_set;
	/* kexec_file_load(2) would take a command line without its NUL. */
	bool check_loads;
	/* The boot clock; 0 = none. */
	uint64_t clock_now_usec, clock_kernel_usec;
	struct {
		int32_t keyring, id;
		const char *description;
		const char *type; /* NULL: "asymmetric" */
	} keys[8];
	/* A TPM 2.0 (nmbl_sys_tpm_*): the algorithm of each allocated bank
	 * (0 ends the list), and the errno of opening it or the response code
	 * of an extension. */
	uint16_t tpm_banks[4];
	int tpm_open_errno;
	uint32_t tpm_extend_rc;
	/* Its PCRs, bank by bank as in tpm_banks, and how many extensions. */
	unsigned char tpm_pcrs[4][24][64];
	unsigned tpm_extends;
	/* Recorded. */
	char calls[4096];
	unsigned long kexec_flags;
	unsigned long mount_flags; /* of the last mount */
	char kexec_cmdline[4096];
	char kexec_kernel[256];
	ssize_t kexec_kernel_len;
	char kexec_initrd[64 * 1024];
	ssize_t kexec_initrd_len;
};

extern struct fake_sys fake;

/* The digest size of TPM algorithm ALG (sha1, sha256, sha384, sha512), 0
 * for another; the OpenSSL name of its digest. */
size_t fake_tpm_alg_size(uint16_t alg);
const char *fake_tpm_alg_md(uint16_t alg);

#endif
