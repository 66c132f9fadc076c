/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <errno.h>
#include <string.h>

#include "nmbl-private.h"
#include "unit.h"

/* The corpus kernel's layout (test/fuzz/mkseeds.py), a real bzImage's:
 * the PE header at 0x40, its section table ending before the boot header,
 * the setup code ending at 0xa00 with the version string in it. */
#define KERNEL_LFANEW 0x40
#define KERNEL_PE_END 0x198
#define KERNEL_SETUP_END 0xa00
#define KERNEL_VERSION_AT 0x700
#define KERNEL_VERSION "6.1.0-test (nmbl) #1 SMP"

static unsigned char *load(const char *name, size_t *ret_len)
{
	char path[4096];
	unsigned char *buf;
	FILE *f;
	long len;

	snprintf(path, sizeof(path), "%s/%s", CORPUS, name);
	f = fopen(path, "rb");
	if (!f || fseek(f, 0, SEEK_END) < 0 || (len = ftell(f)) < 0) {
		perror(path);
		exit(2);
	}
	rewind(f);
	buf = malloc((size_t)len);
	if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
		perror(path);
		exit(2);
	}
	fclose(f);
	*ret_len = (size_t)len;
	return buf;
}

static void test_kernel(void)
{
	struct nmbl_image *img;
	size_t len;
	unsigned char *b = load("kernel.efi", &len);

	CHECK_INT(nmbl_image_new_from_buffer(b, len, &img), 0);
	CHECK_INT(nmbl_image_get_type(img), NMBL_IMAGE_LINUX);
	CHECK_STR(nmbl_image_get_version(img), KERNEL_VERSION);
	CHECK_INT(nmbl_image_get_cmdline_max(img), 2047);
	CHECK_INT(nmbl_image_get_signed(img), 0);
	CHECK_INT(nmbl_image_get_truncated(img), 0);
	/* .setup, .compat, .text, .data, as Debian's kernels have. */
	CHECK_INT(nmbl_image_get_n_sections(img), 4);
	nmbl_image_unref(img);

	/* The version pointer must stay inside the setup code, and the
	 * string must end there. */
	b[0x20e] = 0xff;
	b[0x20f] = 0x7f;
	CHECK_INT(nmbl_image_new_from_buffer(b, len, &img), 0);
	CHECK(nmbl_image_get_version(img) == NULL);
	nmbl_image_unref(img);
	b[0x20e] = (KERNEL_VERSION_AT - 0x200) & 0xff;
	b[0x20f] = (KERNEL_VERSION_AT - 0x200) >> 8;
	memset(b + KERNEL_VERSION_AT, 'x', KERNEL_SETUP_END - KERNEL_VERSION_AT);
	CHECK_INT(nmbl_image_new_from_buffer(b, len, &img), 0);
	CHECK(nmbl_image_get_version(img) == NULL);
	nmbl_image_unref(img);
	free(b);
}

static void test_uki(void)
{
	struct nmbl_image *img;
	const void *data;
	size_t len, n;
	unsigned char *b = load("uki.efi", &len);
	char name[9];
	uint64_t size;

	CHECK_INT(nmbl_image_new_from_buffer(b, len, &img), 0);
	CHECK_INT(nmbl_image_get_type(img), NMBL_IMAGE_UKI);
	CHECK_STR(nmbl_image_type_to_string(nmbl_image_get_type(img)), "uki");
	/* The version is the inner kernel's. */
	CHECK_STR(nmbl_image_get_version(img), KERNEL_VERSION);
	CHECK_INT(nmbl_image_section_data(img, ".cmdline", &data, &n), 0);
	CHECK_INT(n, 6);
	CHECK(memcmp(data, "quiet", 6) == 0);
	CHECK_INT(nmbl_image_section_data(img, ".ucode", &data, &n), 0);
	CHECK_INT(nmbl_image_section_data(img, ".splash", &data, &n), -ENOENT);
	CHECK_INT(nmbl_image_get_section(img, 3, name, &size), 0);
	CHECK_STR(name, ".linux");
	CHECK_INT(size, 4096);
	CHECK_INT(nmbl_image_get_section(img, 5, name, &size), -ERANGE);
	nmbl_image_unref(img);
	free(b);
}

static void test_truncated_and_signed(void)
{
	struct nmbl_image *img;
	size_t len;
	unsigned char *b = load("kernel-signed.efi", &len);

	CHECK_INT(nmbl_image_new_from_buffer(b, len, &img), 0);
	CHECK_INT(nmbl_image_get_signed(img), 1);
	CHECK_INT(nmbl_image_get_truncated(img), 0);
	nmbl_image_unref(img);
	/* Cut inside the signature: still a kernel, but truncated. */
	CHECK_INT(nmbl_image_new_from_buffer(b, len - 1, &img), 0);
	CHECK_INT(nmbl_image_get_truncated(img), 1);
	nmbl_image_unref(img);
	/* Cut inside the section: the section is dropped. */
	CHECK_INT(nmbl_image_new_from_buffer(b, 0x620, &img), 0);
	CHECK_INT(nmbl_image_get_truncated(img), 1);
	CHECK_INT(nmbl_image_get_n_sections(img), 0);
	nmbl_image_unref(img);
	free(b);
}

static void test_not_pe(void)
{
	struct nmbl_image *img = NULL;
	size_t len;
	unsigned char *b = load("kernel.efi", &len);

	CHECK_INT(nmbl_image_new_from_buffer("hello", 5, &img), -ENOEXEC);
	CHECK_INT(nmbl_image_new_from_buffer(b, 0x3f, &img), -ENOEXEC);
	nmbl_put_le32(b + 0x3c, (uint32_t)len);
	CHECK_INT(nmbl_image_new_from_buffer(b, len, &img), -ENOEXEC);
	nmbl_put_le32(b + 0x3c, 0xfffffffc);
	CHECK_INT(nmbl_image_new_from_buffer(b, len, &img), -ENOEXEC);
	nmbl_put_le32(b + 0x3c, KERNEL_LFANEW);
	/* More sections than any image has. */
	b[KERNEL_LFANEW + 6] = 0xff;
	b[KERNEL_LFANEW + 7] = 0xff;
	CHECK_INT(nmbl_image_new_from_buffer(b, len, &img), -ENOEXEC);
	CHECK(img == NULL);
	free(b);
}

/* The first N of the kernel's LEN bytes parsed as the file they would be. */
static void check_cut_kernel(const unsigned char *pe_bytes, size_t n, size_t len)
{
	const size_t version_end = KERNEL_VERSION_AT + sizeof(KERNEL_VERSION);
	struct nmbl_pe pe;
	int r = nmbl_pe_parse(pe_bytes, n, &pe);

	if (n < KERNEL_PE_END) {
		CHECK_INT(r, -ENOEXEC);
		return;
	}
	CHECK_INT(r, 0);
	CHECK_INT(pe.truncated, n < len);
	/* "HdrS" ends at 0x206. */
	CHECK_INT(pe.is_linux, n >= 0x206);
	if (!pe.is_linux)
		return;
	/* A cut header falls back to the old protocols' limit. */
	CHECK_INT(pe.linux_cmdline_size, n >= 0x23c ? 2047 : 255);
	CHECK_INT(pe.linux_protocol, n >= 0x210 ? 0x20f : 0);
	CHECK_INT(pe.linux_version != NULL, n >= version_end);
}

/*
 * Every length of the kernel, each in a block of exactly that size, so that
 * ASan sees a read one byte past the end.  A real bzImage's PE header ends
 * before its boot header, so a file cut inside the boot header parses.
 */
static void test_cut_kernel(void)
{
	size_t len;
	unsigned char *b = load("kernel.efi", &len);

	for (size_t n = 1; n <= len; n++) {
		unsigned char *copy = malloc(n);

		if (!copy)
			exit(2);
		memcpy(copy, b, n);
		check_cut_kernel(copy, n, len);
		free(copy);
	}
	free(b);
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_kernel,
		test_uki,
		test_truncated_and_signed,
		test_not_pe,
		test_cut_kernel,
		NULL,
	};
	return unit_main(tests);
}
