/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * PE/COFF as far as nmbl needs it: the section table (to split a UKI), the
 * security directory (the Authenticode signatures) and the Linux boot
 * header (the kernel's version string).  No I/O: the parser takes the
 * file's bytes, checks every offset against them, and never reads past.
 */
#include <string.h>

#include "nmbl-private.h"

#define DOS_LFANEW 0x3c
#define COFF_SIZE 20
#define SECTION_SIZE 40
#define OPT_MAGIC_PE32 0x10b
#define OPT_MAGIC_PE32PLUS 0x20b
#define DIRECTORY_SECURITY 4

/* Linux's boot protocol header, inside the PE image's first sectors. */
#define LINUX_HDRS_OFFSET 0x202
#define LINUX_SETUP_SECTS 0x1f1
#define LINUX_VERSION_PTR 0x20e
#define LINUX_CMDLINE_SIZE 0x238
#define LINUX_PROTOCOL 0x206

/* True when [off, off + size) lies within LEN bytes. */
static bool within(size_t len, uint64_t off, uint64_t size)
{
	return off <= len && size <= len - off;
}

static void parse_linux(const unsigned char *b, size_t len, struct nmbl_pe *pe)
{
	uint64_t setup_end, ptr;
	size_t n;

	if (!within(len, LINUX_HDRS_OFFSET, 4) ||
	    memcmp(b + LINUX_HDRS_OFFSET, "HdrS", 4) != 0)
		return;
	pe->is_linux = true;
	pe->linux_cmdline_size = 255;
	/* The magic is there but the header after it is cut: a kernel, a
	 * truncated one, whose fields are not to be read. */
	if (!within(len, LINUX_SETUP_SECTS, 1) ||
	    !within(len, LINUX_PROTOCOL, 2) ||
	    !within(len, LINUX_VERSION_PTR, 2)) {
		pe->truncated = true;
		return;
	}
	pe->linux_protocol = nmbl_le16(b + LINUX_PROTOCOL);
	/* cmdline_size exists from protocol 2.06; before, 255 was the rule. */
	if (pe->linux_protocol >= 0x206) {
		if (within(len, LINUX_CMDLINE_SIZE, 4))
			pe->linux_cmdline_size = nmbl_le32(b + LINUX_CMDLINE_SIZE);
		else
			pe->truncated = true;
	}

	/* The version string lives in the setup code, which ends after
	 * setup_sects sectors (4 when the field is 0, as the kernel says). */
	n = b[LINUX_SETUP_SECTS] ? b[LINUX_SETUP_SECTS] : 4;
	setup_end = (n + 1) * 512;
	if (setup_end > len)
		setup_end = len;
	ptr = (uint64_t)nmbl_le16(b + LINUX_VERSION_PTR) + 0x200;
	if (nmbl_le16(b + LINUX_VERSION_PTR) == 0 || ptr >= setup_end)
		return;
	n = strnlen((const char *)b + ptr, setup_end - ptr);
	if (ptr + n == setup_end || n == 0)
		return;
	pe->linux_version = (const char *)b + ptr;
}

int nmbl_pe_parse(const void *buf, size_t len, struct nmbl_pe *ret)
{
	const unsigned char *b = buf;
	struct nmbl_pe pe = { .buf = b, .len = len };
	uint64_t off, opt, sections;
	uint32_t n_dirs, dir;
	uint16_t n_sections, opt_size, magic;

	if (!buf || !ret)
		return -EINVAL;
	if (len < 0x40 || b[0] != 'M' || b[1] != 'Z')
		return -ENOEXEC;
	off = nmbl_le32(b + DOS_LFANEW);
	if (!within(len, off, 4 + COFF_SIZE) || memcmp(b + off, "PE\0\0", 4) != 0)
		return -ENOEXEC;
	pe.machine = nmbl_le16(b + off + 4);
	n_sections = nmbl_le16(b + off + 6);
	opt_size = nmbl_le16(b + off + 20);
	opt = off + 4 + COFF_SIZE;
	if (opt_size < 2 || !within(len, opt, opt_size))
		return -ENOEXEC;

	magic = nmbl_le16(b + opt);
	if (magic == OPT_MAGIC_PE32PLUS) {
		n_dirs = opt_size >= 112 ? nmbl_le32(b + opt + 108) : 0;
		dir = 112;
	} else if (magic == OPT_MAGIC_PE32) {
		n_dirs = opt_size >= 96 ? nmbl_le32(b + opt + 92) : 0;
		dir = 96;
	} else {
		return -ENOEXEC;
	}
	dir += DIRECTORY_SECURITY * 8;
	if (n_dirs > DIRECTORY_SECURITY && dir + 8 <= opt_size) {
		pe.cert_offset = nmbl_le32(b + opt + dir);
		pe.cert_size = nmbl_le32(b + opt + dir + 4);
		/* A truncated file loses its signature: say so, do not read. */
		if (pe.cert_size && !within(len, pe.cert_offset, pe.cert_size))
			pe.truncated = true;
	}

	sections = opt + opt_size;
	if (n_sections > NMBL_PE_MAX_SECTIONS ||
	    !within(len, sections, (uint64_t)n_sections * SECTION_SIZE))
		return -ENOEXEC;
	for (uint16_t i = 0; i < n_sections; i++) {
		const unsigned char *s = b + sections + (uint64_t)i * SECTION_SIZE;
		struct nmbl_pe_section *sec = &pe.sections[pe.n_sections];
		uint32_t vsize = nmbl_le32(s + 8), raw_size = nmbl_le32(s + 16);

		memcpy(sec->name, s, 8);
		sec->offset = nmbl_le32(s + 20);
		/* The raw data is padded to the file alignment; the virtual
		 * size is what the section holds, when it is not bigger. */
		sec->size = vsize && vsize < raw_size ? vsize : raw_size;
		if (sec->size && !within(len, sec->offset, sec->size)) {
			pe.truncated = true;
			continue;
		}
		pe.n_sections++;
	}
	parse_linux(b, len, &pe);
	*ret = pe;
	return 0;
}

const struct nmbl_pe_section *nmbl_pe_section(const struct nmbl_pe *pe,
					      const char *name)
{
	char key[8] = { 0 };

	memcpy(key, name, strnlen(name, sizeof(key)));
	for (size_t i = 0; i < pe->n_sections; i++)
		if (memcmp(pe->sections[i].name, key, sizeof(key)) == 0)
			return &pe->sections[i];
	return NULL;
}
