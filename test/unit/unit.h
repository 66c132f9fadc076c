/* SPDX-License-Identifier: GPL-3.0-or-later */
/* The little a unit test needs: checks that report where they failed, and a
 * fixture root built in a temporary directory. */
#ifndef NMBL_UNIT_H
#define NMBL_UNIT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

extern int unit_failures;

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "%s:%d: %s: check failed: %s\n",     \
				__FILE__, __LINE__, __func__, #cond);        \
			unit_failures++;                                     \
		}                                                            \
	} while (0)
#define CHECK_INT(a, b)                                                      \
	do {                                                                 \
		long long a_ = (a), b_ = (b);                                \
		if (a_ != b_) {                                              \
			fprintf(stderr, "%s:%d: %s: %s == %lld, expected %lld\n", \
				__FILE__, __LINE__, __func__, #a, a_, b_);   \
			unit_failures++;                                     \
		}                                                            \
	} while (0)
#define CHECK_STR(a, b)                                                      \
	do {                                                                 \
		const char *a_ = (a), *b_ = (b);                             \
		if (!a_ || !b_ || strcmp(a_, b_) != 0) {                     \
			fprintf(stderr, "%s:%d: %s: %s == \"%s\", expected \"%s\"\n", \
				__FILE__, __LINE__, __func__, #a,            \
				a_ ? a_ : "(null)", b_ ? b_ : "(null)");     \
			unit_failures++;                                     \
		}                                                            \
	} while (0)

/* EFI variables below the fixture root, named as efivarfs names them:
 * NMBL_EFIVARS "Name" GLOBAL for one of the global vendor's (nmbl-private.h
 * has the path and the vendors' GUIDs). */
#define GLOBAL "-" NMBL_EFI_GLOBAL_GUID
#define SB_VAR NMBL_EFIVARS "SecureBoot" GLOBAL

/* A fresh fixture root; removed at exit. */
const char *fixture_root(void);
/* Write DATA (LEN bytes) to ROOT/PATH, creating directories. */
void fixture_write(const char *path, const void *data, size_t len);
void fixture_text(const char *path, const char *text);
/* The full path of PATH below the fixture root (static buffer). */
const char *fixture_path(const char *path);
/* Run the shell command FMT (mkfs and the like); exit 2 when it fails. */
void fixture_run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ROOT/PATH as an image of SIZE bytes of zeros (sparse); its full path,
 * malloc'ed. */
char *fixture_image(const char *path, off_t size);
/* Write DATA (LEN bytes) at OFF in the file PATH (a full path). */
void fixture_put(const char *path, off_t off, const void *data, size_t len);
/* An LVM physical volume's label (sector 1) on the image DEV, as libblkid
 * finds it: its checksum right, or wrong with CORRUPT_BYTE (non-zero)
 * flipped. */
void fixture_lvm_label(const char *dev, unsigned corrupt_byte);

int unit_main(void (*const tests[])(void));
/* unit_main with *CTX a context on the fixture root, and the fake seam's
 * recorded paths relative to it; 2 when no context can be made. */
struct nmbl_ctx;
int unit_main_ctx(void (*const tests[])(void), struct nmbl_ctx **ctx);

#endif
