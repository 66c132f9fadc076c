/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <errno.h>
#include <string.h>

#include "nmbl-private.h"
#include "unit.h"

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

static void put32(unsigned char *p, uint32_t v)
{
	p[0] = v & 0xff;
	p[1] = (v >> 8) & 0xff;
	p[2] = (v >> 16) & 0xff;
	p[3] = v >> 24;
}

static void test_kernel(void)
{
	struct nmbl_image *img;
	size_t len;
	unsigned char *b = load("kernel.efi", &len);

	CHECK_INT(nmbl_image_new_from_buffer(b, len, &img), 0);
	CHECK_INT(nmbl_image_get_type(img), NMBL_IMAGE_LINUX);
	CHECK_STR(nmbl_image_get_version(img), "6.1.0-test (nmbl) #1 SMP");
	CHECK_INT(nmbl_image_get_cmdline_max(img), 2047);
	CHECK_INT(nmbl_image_get_signed(img), 0);
	CHECK_INT(nmbl_image_get_truncated(img), 0);
	CHECK_INT(nmbl_image_get_n_sections(img), 1);
	nmbl_image_unref(img);

	/* The version pointer must stay inside the setup code, and the
	 * string must end there. */
	b[0x20e] = 0xff;
	b[0x20f] = 0x7f;
	CHECK_INT(nmbl_image_new_from_buffer(b, len, &img), 0);
	CHECK(nmbl_image_get_version(img) == NULL);
	nmbl_image_unref(img);
	b[0x20e] = 0x80;
	b[0x20f] = 0;
	memset(b + 0x280, 'x', 0x400 - 0x280);
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
	CHECK_STR(nmbl_image_get_version(img), "6.1.0-test (nmbl) #1 SMP");
	CHECK_INT(nmbl_image_section_data(img, ".cmdline", &data, &n), 0);
	CHECK_INT(n, 6);
	CHECK(memcmp(data, "quiet", 6) == 0);
	CHECK_INT(nmbl_image_section_data(img, ".ucode", &data, &n), 0);
	CHECK_INT(nmbl_image_section_data(img, ".splash", &data, &n), -ENOENT);
	CHECK_INT(nmbl_image_get_section(img, 3, name, &size), 0);
	CHECK_STR(name, ".linux");
	CHECK_INT(size, 2048);
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
	put32(b + 0x3c, (uint32_t)len);
	CHECK_INT(nmbl_image_new_from_buffer(b, len, &img), -ENOEXEC);
	put32(b + 0x3c, 0xfffffffc);
	CHECK_INT(nmbl_image_new_from_buffer(b, len, &img), -ENOEXEC);
	put32(b + 0x3c, 0x400);
	/* More sections than any image has. */
	b[0x406] = 0xff;
	b[0x407] = 0xff;
	CHECK_INT(nmbl_image_new_from_buffer(b, len, &img), -ENOEXEC);
	CHECK(img == NULL);
	free(b);
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_kernel,
		test_uki,
		test_truncated_and_signed,
		test_not_pe,
		NULL,
	};
	return unit_main(tests);
}
