/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * EFI load options: the value of a Boot#### variable (UEFI 2.10, 3.1.3),
 * decoded from bytes firmware or anyone with root wrote, so every length
 * is checked against the buffer, and encoded for an EFI program on a GPT
 * partition (what a one-time BootNext needs).
 *
 *   UINT32 Attributes; UINT16 FilePathListLength;
 *   CHAR16 Description[] (NUL-terminated);
 *   EFI_DEVICE_PATH FilePathList[FilePathListLength bytes];
 *   UINT8 OptionalData[] (the rest)
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nmbl-private.h"

/* Far more than any firmware's Boot#### holds. */
#define NMBL_LOAD_OPTION_MAX (64 * 1024)

#define DP_HARDWARE 0x01
#define DP_ACPI 0x02
#define DP_MESSAGING 0x03
#define DP_MEDIA 0x04
#define DP_END 0x7f
#define DP_HW_PCI 0x01
#define DP_ACPI_ACPI 0x01
#define DP_MSG_SCSI 0x02
#define DP_MSG_USB 0x05
#define DP_MSG_SATA 0x12
#define DP_MSG_NVME 0x17
#define DP_MSG_MAC 0x0b
#define DP_MSG_IPV4 0x0c
#define DP_MSG_IPV6 0x0d
#define DP_MSG_VLAN 0x14
#define DP_MSG_URI 0x18
/* The node lengths of UEFI 2.x, without the 4-byte header (and UEFI 1.x's
 * shorter IP nodes, which older firmware writes). */
#define MAC_NODE_LEN 33
#define IPV4_NODE_LEN 23
#define IPV4_NODE_LEN_OLD 15
#define IPV6_NODE_LEN 56
#define IPV6_NODE_LEN_OLD 39
#define DP_MEDIA_HD 0x01
#define DP_MEDIA_FILE 0x04
#define DP_MEDIA_FV_FILE 0x06
#define DP_MEDIA_FV 0x07
#define DP_END_INSTANCE 0x01
#define DP_END_ENTIRE 0xff
#define HD_SIZE 42
#define HD_FORMAT_MBR 1
#define HD_FORMAT_GPT 2
#define HD_SIGNATURE_MBR 1
#define HD_SIGNATURE_GUID 2
/* EISA ids as ACPI device paths carry them: PNP0A03 and PNP0A08. */
#define EISA_PNP0A03 0x0a0341d0
#define EISA_PNP0A08 0x0a0841d0

struct nmbl_load_option {
	uint32_t attributes;
	char *description;
	char *device_path;
	char *file;
	char partuuid[37];
	unsigned char *optional;
	size_t optional_len;
	/* A network boot's, from the first instance. */
	unsigned char mac[6];
	bool has_mac;
	unsigned ip_version;
	int vlan;
	char *uri;
};


void nmbl_format_guid(const unsigned char *g, bool upper, char out[37])
{
	snprintf(out, 37,
		 upper ? "%08X-%04X-%04X-%02X%02X-%02X%02X%02X%02X%02X%02X"
		       : "%08x-%04x-%04x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 nmbl_le32(g), nmbl_le16(g + 4), nmbl_le16(g + 6), g[8], g[9], g[10], g[11],
		 g[12], g[13], g[14], g[15]);
}

int nmbl_parse_guid(const char *s, unsigned char out[16])
{
	unsigned char raw[16];

	if (strlen(s) != 36)
		return -EINVAL;
	for (size_t i = 0, b = 0; i < 36; i++) {
		bool is_dash = i == 8 || i == 13 || i == 18 || i == 23;

		if (is_dash != (s[i] == '-'))
			return -EINVAL;
		if (is_dash)
			continue;
		if (!isxdigit((unsigned char)s[i]) || !isxdigit((unsigned char)s[i + 1]))
			return -EINVAL;
		sscanf(s + i, "%2hhx", &raw[b++]);
		i++;
	}
	/* Text is big-endian throughout; the first three fields are stored LE. */
	out[0] = raw[3], out[1] = raw[2], out[2] = raw[1], out[3] = raw[0];
	out[4] = raw[5], out[5] = raw[4], out[6] = raw[7], out[7] = raw[6];
	memcpy(out + 8, raw + 8, 8);
	return 0;
}

int nmbl_efi_path_normalize(const char *path, char **ret)
{
	size_t len = strlen(path);
	char *out = malloc(len + 2), *end = out;

	if (!out)
		return -ENOMEM;
	/* GRUB separates with '/', UEFI with '\\'.  GRUB found the file with
	 * "." and ".." resolved as it walked the path, ".." of the root being
	 * the root: the firmware is given the path GRUB opened. */
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, "/\\");

		if (n == 2 && p[0] == '.' && p[1] == '.') {
			while (end > out && *--end != '\\')
				;
		} else if (n > 0 && !(n == 1 && p[0] == '.')) {
			*end++ = '\\';
			memcpy(end, p, n);
			end += n;
		}
		p += n;
		p += strspn(p, "/\\");
	}
	if (end == out)
		*end++ = '\\';
	*end = '\0';
	*ret = out;
	return 0;
}

bool nmbl_efi_path_equal(const char *a, const char *b)
{
	_cleanup_free_ char *na = NULL, *nb = NULL;
	size_t i;

	if (nmbl_efi_path_normalize(a, &na) < 0 || nmbl_efi_path_normalize(b, &nb) < 0)
		return false;
	/* ASCII only: strcasecmp() would follow the caller's locale. */
	for (i = 0; na[i] && nb[i]; i++) {
		unsigned char ca = (unsigned char)na[i], cb = (unsigned char)nb[i];

		if (ca >= 'a' && ca <= 'z')
			ca = (unsigned char)(ca - 'a' + 'A');
		if (cb >= 'a' && cb <= 'z')
			cb = (unsigned char)(cb - 'a' + 'A');
		if (ca != cb)
			return false;
	}
	return na[i] == nb[i];
}

struct decode {
	FILE *text;
	struct nmbl_load_option *opt;
	bool first_instance;
};

/* A network boot's nodes: the card's address, IPv4 or IPv6, the VLAN,
 * HTTP Boot's URL.  0 when decoded, 1 when the node is none of them. */
static int decode_network_node(struct decode *d, unsigned subtype, const unsigned char *p,
			       size_t len)
{
	if (subtype == DP_MSG_MAC && len == MAC_NODE_LEN) {
		/* Ethernet's 6 bytes, in a field of 32. */
		fprintf(d->text, "MAC(%02x%02x%02x%02x%02x%02x,0x%x)", p[0], p[1], p[2], p[3],
			p[4], p[5], p[32]);
		if (d->first_instance && !d->opt->has_mac && p[32] <= 1) {
			memcpy(d->opt->mac, p, 6);
			d->opt->has_mac = true;
		}
		return 0;
	}
	if (subtype == DP_MSG_IPV4 && (len == IPV4_NODE_LEN || len == IPV4_NODE_LEN_OLD)) {
		fprintf(d->text, "IPv4(%u.%u.%u.%u)", p[4], p[5], p[6], p[7]);
		if (d->first_instance && !d->opt->ip_version)
			d->opt->ip_version = 4;
		return 0;
	}
	if (subtype == DP_MSG_IPV6 && (len == IPV6_NODE_LEN || len == IPV6_NODE_LEN_OLD)) {
		fputs("IPv6(", d->text);
		for (int i = 0; i < 16; i += 2)
			fprintf(d->text, "%s%x", i ? ":" : "", nmbl_be16(p + 16 + i));
		fputc(')', d->text);
		if (d->first_instance && !d->opt->ip_version)
			d->opt->ip_version = 6;
		return 0;
	}
	if (subtype == DP_MSG_VLAN && len == 2) {
		fprintf(d->text, "Vlan(%u)", nmbl_le16(p));
		if (d->first_instance && d->opt->vlan < 0)
			d->opt->vlan = nmbl_le16(p) & 0xfff;
		return 0;
	}
	if (subtype == DP_MSG_URI) {
		char *uri;

		/* ASCII, not NUL-terminated; empty in the boot options firmware
		 * makes for HTTP Boot. */
		for (size_t i = 0; i < len; i++)
			if (p[i] < 0x21 || p[i] > 0x7e)
				return -EBADMSG;
		fprintf(d->text, "Uri(%.*s)", (int)len, (const char *)p);
		if (d->first_instance && len && !d->opt->uri) {
			uri = strndup((const char *)p, len);
			if (!uri)
				return -ENOMEM;
			d->opt->uri = uri;
		}
		return 0;
	}
	return 1;
}

/* One node as UEFI's device-path-to-text does it, for the nodes a boot
 * entry holds; any other node in the generic Path(type,subtype,hex). */
static int decode_node(struct decode *d, unsigned type, unsigned subtype,
		       const unsigned char *p, size_t len)
{
	char guid[37];

	if (type == DP_HARDWARE && subtype == DP_HW_PCI && len == 2) {
		fprintf(d->text, "Pci(0x%x,0x%x)", p[1], p[0]);
		return 0;
	}
	if (type == DP_ACPI && subtype == DP_ACPI_ACPI && len == 8 &&
	    (nmbl_le32(p) == EISA_PNP0A03 || nmbl_le32(p) == EISA_PNP0A08)) {
		fprintf(d->text, "%s(0x%x)",
			nmbl_le32(p) == EISA_PNP0A03 ? "PciRoot" : "PcieRoot", nmbl_le32(p + 4));
		return 0;
	}
	if (type == DP_MESSAGING) {
		if (subtype == DP_MSG_SCSI && len == 4) {
			fprintf(d->text, "Scsi(0x%x,0x%x)", nmbl_le16(p), nmbl_le16(p + 2));
			return 0;
		}
		if (subtype == DP_MSG_USB && len == 2) {
			fprintf(d->text, "USB(0x%x,0x%x)", p[0], p[1]);
			return 0;
		}
		if (subtype == DP_MSG_SATA && len == 6) {
			fprintf(d->text, "Sata(0x%x,0x%x,0x%x)", nmbl_le16(p), nmbl_le16(p + 2),
				nmbl_le16(p + 4));
			return 0;
		}
		if (subtype == DP_MSG_NVME && len == 12) {
			fprintf(d->text, "NVMe(0x%x,%02X-%02X-%02X-%02X-%02X-%02X-%02X-%02X)",
				nmbl_le32(p), p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11]);
			return 0;
		}
	}
	if (type == DP_MESSAGING) {
		int r = decode_network_node(d, subtype, p, len);

		if (r <= 0)
			return r;
	}
	if (type == DP_MEDIA && subtype == DP_MEDIA_HD && len == HD_SIZE - 4) {
		uint32_t number = nmbl_le32(p);
		uint64_t start = nmbl_le64(p + 4), size = nmbl_le64(p + 12);
		const unsigned char *sig = p + 20;

		if (p[36] == HD_FORMAT_GPT && p[37] == HD_SIGNATURE_GUID) {
			nmbl_format_guid(sig, true, guid);
			fprintf(d->text, "HD(%u,GPT,%s,0x%llx,0x%llx)", number, guid,
				(unsigned long long)start, (unsigned long long)size);
			if (d->first_instance && !d->opt->partuuid[0])
				nmbl_format_guid(sig, false, d->opt->partuuid);
			return 0;
		}
		if (p[36] == HD_FORMAT_MBR && p[37] == HD_SIGNATURE_MBR) {
			fprintf(d->text, "HD(%u,MBR,0x%08x,0x%llx,0x%llx)", number,
				nmbl_le32(sig), (unsigned long long)start,
				(unsigned long long)size);
			return 0;
		}
	}
	if (type == DP_MEDIA && subtype == DP_MEDIA_FILE) {
		_cleanup_free_ char *name = NULL;
		int r = nmbl_utf16_to_utf8(p, len, &name);

		if (r < 0)
			return r;
		fputs(name, d->text);
		if (d->first_instance) {
			size_t have = d->opt->file ? strlen(d->opt->file) : 0;
			bool sep = have && d->opt->file[have - 1] != '\\' && name[0] != '\\';
			char *joined = malloc(have + sep + strlen(name) + 1);

			if (!joined)
				return -ENOMEM;
			snprintf(joined, have + sep + strlen(name) + 1, "%s%s%s",
				 have ? d->opt->file : "", sep ? "\\" : "", name);
			free(d->opt->file);
			d->opt->file = joined;
		}
		return 0;
	}
	if (type == DP_MEDIA && (subtype == DP_MEDIA_FV_FILE || subtype == DP_MEDIA_FV) &&
	    len == 16) {
		nmbl_format_guid(p, true, guid);
		fprintf(d->text, "%s(%s)", subtype == DP_MEDIA_FV ? "Fv" : "FvFile", guid);
		return 0;
	}
	fprintf(d->text, "Path(%u,%u,", type, subtype);
	for (size_t i = 0; i < len; i++)
		fprintf(d->text, "%02X", p[i]);
	fputc(')', d->text);
	return 0;
}

static int decode_device_path(struct decode *d, const unsigned char *p, size_t len)
{
	bool need_slash = false;
	size_t off = 0;

	d->first_instance = true;
	while (off + 4 <= len) {
		unsigned type = p[off], subtype = p[off + 1];
		size_t node_len = nmbl_le16(p + off + 2);
		int r;

		if (node_len < 4 || node_len > len - off)
			return -EBADMSG;
		if (type == DP_END && subtype == DP_END_ENTIRE)
			return 0;
		if (type == DP_END && subtype == DP_END_INSTANCE) {
			fputc(',', d->text);
			d->first_instance = false;
			need_slash = false;
		} else {
			if (need_slash)
				fputc('/', d->text);
			r = decode_node(d, type, subtype, p + off + 4, node_len - 4);
			if (r < 0)
				return r;
			need_slash = true;
		}
		off += node_len;
	}
	/* No end node: the list was cut short. */
	return -EBADMSG;
}

NMBL_EXPORT struct nmbl_load_option *nmbl_load_option_free(struct nmbl_load_option *opt)
{
	if (opt) {
		free(opt->description);
		free(opt->device_path);
		free(opt->file);
		free(opt->optional);
		free(opt->uri);
		free(opt);
	}
	return NULL;
}

NMBL_EXPORT int nmbl_load_option_parse(const void *buf, size_t len,
				       struct nmbl_load_option **ret)
{
	_cleanup_(nmbl_load_option_freep) struct nmbl_load_option *opt = NULL;
	const unsigned char *p = buf;
	size_t desc_end, path_len, text_len;
	struct decode d;
	int r;

	if (!buf || !ret)
		return -EINVAL;
	if (len < 6 || len > NMBL_LOAD_OPTION_MAX)
		return -EBADMSG;
	path_len = nmbl_le16(p + 4);
	for (desc_end = 6; desc_end + 1 < len; desc_end += 2)
		if (p[desc_end] == 0 && p[desc_end + 1] == 0)
			break;
	if (desc_end + 1 >= len)
		return -EBADMSG;
	if (path_len > len - (desc_end + 2))
		return -EBADMSG;

	opt = calloc(1, sizeof(*opt));
	if (!opt)
		return -ENOMEM;
	opt->attributes = nmbl_le32(p);
	opt->vlan = -1;
	r = nmbl_utf16_to_utf8(p + 6, desc_end - 6, &opt->description);
	if (r < 0)
		return r;

	d = (struct decode){ .opt = opt };
	d.text = open_memstream(&opt->device_path, &text_len);
	if (!d.text)
		return -ENOMEM;
	r = decode_device_path(&d, p + desc_end + 2, path_len);
	if (fclose(d.text) != 0 && r >= 0)
		r = -ENOMEM;
	if (r < 0)
		return r;

	opt->optional_len = len - (desc_end + 2 + path_len);
	if (opt->optional_len) {
		opt->optional = malloc(opt->optional_len);
		if (!opt->optional)
			return -ENOMEM;
		memcpy(opt->optional, p + desc_end + 2 + path_len, opt->optional_len);
	}
	*ret = TAKE_PTR(opt);
	return 0;
}

NMBL_EXPORT uint32_t nmbl_load_option_get_attributes(const struct nmbl_load_option *opt)
{
	return opt ? opt->attributes : 0;
}

NMBL_EXPORT const char *nmbl_load_option_get_description(const struct nmbl_load_option *opt)
{
	return opt ? opt->description : NULL;
}

NMBL_EXPORT const char *nmbl_load_option_get_device_path(const struct nmbl_load_option *opt)
{
	return opt ? opt->device_path : NULL;
}

NMBL_EXPORT const char *nmbl_load_option_get_partuuid(const struct nmbl_load_option *opt)
{
	return opt && opt->partuuid[0] ? opt->partuuid : NULL;
}

NMBL_EXPORT const char *nmbl_load_option_get_file(const struct nmbl_load_option *opt)
{
	return opt ? opt->file : NULL;
}

NMBL_EXPORT bool nmbl_load_option_get_mac(const struct nmbl_load_option *opt,
					  unsigned char ret[6])
{
	if (!opt || !opt->has_mac)
		return false;
	memcpy(ret, opt->mac, 6);
	return true;
}

NMBL_EXPORT unsigned nmbl_load_option_get_ip_version(const struct nmbl_load_option *opt)
{
	return opt ? opt->ip_version : 0;
}

NMBL_EXPORT int nmbl_load_option_get_vlan(const struct nmbl_load_option *opt)
{
	return opt ? opt->vlan : -1;
}

NMBL_EXPORT const char *nmbl_load_option_get_uri(const struct nmbl_load_option *opt)
{
	return opt ? opt->uri : NULL;
}

NMBL_EXPORT size_t nmbl_load_option_get_optional_data(const struct nmbl_load_option *opt,
						     const void **ret)
{
	if (!opt)
		return 0;
	if (ret)
		*ret = opt->optional;
	return opt->optional_len;
}

NMBL_EXPORT int nmbl_load_option_build(const char *description, const char *partuuid,
				       uint32_t partition, uint64_t start, uint64_t size,
				       const char *file, void **ret, size_t *ret_len)
{
	return nmbl_load_option_build_data(description, partuuid, partition, start, size, file,
					   NULL, 0, ret, ret_len);
}

int nmbl_load_option_build_data(const char *description, const char *partuuid,
				uint32_t partition, uint64_t start, uint64_t size,
				const char *file, const void *data, size_t data_len,
				void **ret, size_t *ret_len)
{
	_cleanup_free_ void *desc16 = NULL, *file16 = NULL;
	_cleanup_free_ char *normal = NULL;
	unsigned char guid[16], *out, *p;
	size_t desc_len, file_len, path_len, total;
	int r;

	if (!description || !partuuid || !file || !ret || !ret_len || partition == 0)
		return -EINVAL;
	r = nmbl_parse_guid(partuuid, guid);
	if (r < 0)
		return r;
	/* One spelling per file, the firmware's: every option nmbl writes for
	 * it is then the same bytes. */
	r = nmbl_efi_path_normalize(file, &normal);
	if (r < 0)
		return r;
	r = nmbl_utf8_to_utf16(description, &desc16, &desc_len);
	if (r < 0)
		return r;
	r = nmbl_utf8_to_utf16(normal, &file16, &file_len);
	if (r < 0)
		return r;
	path_len = HD_SIZE + 4 + file_len + 4;
	if (path_len > UINT16_MAX || file_len + 4 > UINT16_MAX)
		return -E2BIG;
	if (data_len > NMBL_LOAD_OPTION_DATA_MAX || (data_len && !data))
		return -E2BIG;
	total = 6 + desc_len + path_len + data_len;

	out = calloc(1, total);
	if (!out)
		return -ENOMEM;
	nmbl_put_le32(out, 1); /* LOAD_OPTION_ACTIVE */
	nmbl_put_le16(out + 4, (uint16_t)path_len);
	memcpy(out + 6, desc16, desc_len);
	p = out + 6 + desc_len;
	p[0] = DP_MEDIA, p[1] = DP_MEDIA_HD;
	nmbl_put_le16(p + 2, HD_SIZE);
	nmbl_put_le32(p + 4, partition);
	nmbl_put_le64(p + 8, start);
	nmbl_put_le64(p + 16, size);
	memcpy(p + 24, guid, 16);
	p[40] = HD_FORMAT_GPT, p[41] = HD_SIGNATURE_GUID;
	p += HD_SIZE;
	p[0] = DP_MEDIA, p[1] = DP_MEDIA_FILE;
	nmbl_put_le16(p + 2, (uint16_t)(file_len + 4));
	memcpy(p + 4, file16, file_len);
	p += file_len + 4;
	p[0] = DP_END, p[1] = DP_END_ENTIRE;
	nmbl_put_le16(p + 2, 4);
	if (data_len)
		memcpy(p + 4, data, data_len);
	*ret = out;
	*ret_len = total;
	return 0;
}

NMBL_EXPORT int nmbl_get_boot_current(struct nmbl_ctx *ctx, unsigned *ret)
{
	_cleanup_free_ char *raw = NULL;
	size_t len;
	int r;

	if (!ctx || !ret)
		return -EINVAL;
	r = nmbl_efivar_read(ctx, NMBL_EFI_GLOBAL_GUID, "BootCurrent", 2, &raw, &len);
	if (r < 0)
		return r;
	if (len != 2)
		return -EBADMSG;
	*ret = nmbl_le16((const unsigned char *)raw);
	return 0;
}

NMBL_EXPORT int nmbl_read_boot_option(struct nmbl_ctx *ctx, unsigned number,
				      struct nmbl_load_option **ret)
{
	_cleanup_free_ char *raw = NULL;
	char name[16];
	size_t len;
	int r;

	if (!ctx || !ret || number > 0xffff)
		return -EINVAL;
	snprintf(name, sizeof(name), "Boot%04X", number);
	r = nmbl_efivar_read(ctx, NMBL_EFI_GLOBAL_GUID, name, NMBL_LOAD_OPTION_MAX, &raw, &len);
	if (r < 0)
		return r;
	return nmbl_load_option_parse(raw, len, ret);
}
