/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake-sys.h"
#include "nmbl-private.h"
#include "unit.h"

int unit_failures;
static char root[] = "/tmp/nmbl-unit.XXXXXX";
static int made;

static int remove_one(const char *path, const struct stat *st, int flag,
		      struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void cleanup(void)
{
	if (made)
		nftw(root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *fixture_root(void)
{
	if (!made) {
		if (!mkdtemp(root)) {
			perror("mkdtemp");
			exit(2);
		}
		made = 1;
		atexit(cleanup);
	}
	return root;
}

const char *fixture_path(const char *path)
{
	static char buf[PATH_MAX];

	snprintf(buf, sizeof(buf), "%s%s", fixture_root(), path);
	return buf;
}

void fixture_write(const char *path, const void *data, size_t len)
{
	char full[PATH_MAX];
	FILE *f;

	snprintf(full, sizeof(full), "%s%s", fixture_root(), path);
	for (char *p = full + strlen(root) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		if (mkdir(full, 0755) < 0 && errno != EEXIST) {
			perror(full);
			exit(2);
		}
		*p = '/';
	}
	f = fopen(full, "wb");
	if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
		perror(full);
		exit(2);
	}
}

void fixture_text(const char *path, const char *text)
{
	fixture_write(path, text, strlen(text));
}

int unit_main_ctx(void (*const tests[])(void), struct nmbl_ctx **ctx)
{
	int r;

	fake.root = fixture_root();
	if (nmbl_new(fixture_root(), ctx) < 0)
		return 2;
	r = unit_main(tests);
	*ctx = nmbl_unref(*ctx);
	return r;
}

int unit_main(void (*const tests[])(void))
{
	for (size_t i = 0; tests[i]; i++)
		tests[i]();
	if (unit_failures)
		fprintf(stderr, "%d check(s) failed\n", unit_failures);
	return unit_failures ? 1 : 0;
}

void fixture_run(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0) {
		fprintf(stderr, "failed: %s\n", cmd);
		exit(2);
	}
}

char *fixture_image(const char *path, off_t size)
{
	char *full;

	fixture_write(path, "", 0);
	full = strdup(fixture_path(path));
	if (!full || truncate(full, size) < 0) {
		perror(path);
		exit(2);
	}
	return full;
}

void fixture_put(const char *path, off_t off, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0 || pwrite(fd, data, len, off) != (ssize_t)len || close(fd) < 0) {
		perror(path);
		exit(2);
	}
}

/* LVM's label checksum (lib/label/label.c): from offset_xl to the end of
 * the label's sector. */
static uint32_t lvm_crc(const unsigned char *p, size_t len)
{
	static const uint32_t tab[] = {
		0x00000000, 0x1db71064, 0x3b6e20c8, 0x26d930ac, 0x76dc4190, 0x6b6b51f4,
		0x4db26158, 0x5005713c, 0xedb88320, 0xf00f9344, 0xd6d6a3e8, 0xcb61b38c,
		0x9b64c2b0, 0x86d3d2d4, 0xa00ae278, 0xbdbdf21c,
	};
	uint32_t crc = 0xf597a6cf;

	for (size_t i = 0; i < len; i++) {
		crc ^= p[i];
		crc = (crc >> 4) ^ tab[crc & 0xf];
		crc = (crc >> 4) ^ tab[crc & 0xf];
	}
	return crc;
}

void fixture_lvm_label(const char *dev, unsigned corrupt_byte)
{
	unsigned char label[512] = "LABELONE";

	nmbl_put_le64(label + 8, 1);   /* the label's own sector */
	nmbl_put_le32(label + 20, 32); /* offset_xl */
	memcpy(label + 24, "LVM2 001", 8);
	memcpy(label + 32, "abcdefghijklmnopqrstuvwxyz012345", 32);
	nmbl_put_le32(label + 16, lvm_crc(label + 20, sizeof(label) - 20));
	if (corrupt_byte)
		label[corrupt_byte % sizeof(label)] ^= 1;
	fixture_put(dev, 512, label, sizeof(label));
}
