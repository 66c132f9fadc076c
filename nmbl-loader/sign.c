/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * Why a kernel was refused: who signed it (its Authenticode signatures,
 * read with OpenSSL from the security directory the PE parser bounded),
 * which keys the running kernel trusts for kexec, and what to do.
 */
#include <openssl/pkcs7.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>

#include "nmbl-private.h"

#define WIN_CERT_HEADER 8
#define WIN_CERT_REVISION_2 0x0200
#define WIN_CERT_TYPE_PKCS_SIGNED_DATA 0x0002

/* The keyrings kexec_file_load checks a kernel's signature against. */
static const char *const kexec_keyrings[] = {
	".builtin_trusted_keys",
	".secondary_trusted_keys",
	".machine",
	".platform",
};

/* A certificate's name as people call it: its CN, else its O. */
static char *x509_cn(const X509_NAME *name)
{
	char buf[256];
	int i = X509_NAME_get_index_by_NID(name, NID_commonName, -1);

	if (i < 0)
		i = X509_NAME_get_index_by_NID(name, NID_organizationName, -1);
	if (i >= 0) {
		const ASN1_STRING *s =
			X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i));
		unsigned char *utf8 = NULL;
		int n = ASN1_STRING_to_UTF8(&utf8, s);
		char *r;

		if (n < 0)
			return NULL;
		r = strndup((const char *)utf8, (size_t)n);
		OPENSSL_free(utf8);
		return r;
	}
	X509_NAME_oneline(name, buf, sizeof(buf));
	return strdup(buf);
}

/* Append "SUBJECT (issued by ISSUER)" for each signer of one PKCS#7. */
static int add_signers(const unsigned char *der, size_t len, FILE *out,
		       size_t *count)
{
	const unsigned char *p = der;
	STACK_OF(X509) *signers;
	PKCS7 *p7;

	p7 = d2i_PKCS7(NULL, &p, (long)len);
	if (!p7)
		return -EBADMSG;
	signers = PKCS7_get0_signers(p7, NULL, 0);
	for (int i = 0; signers && i < sk_X509_num(signers); i++) {
		X509 *x = sk_X509_value(signers, i);
		char *subject = x509_cn(X509_get_subject_name(x));
		char *issuer = x509_cn(X509_get_issuer_name(x));

		fprintf(out, "%s'%s' (issued by '%s')", (*count)++ ? ", " : "",
			subject ? subject : "?", issuer ? issuer : "?");
		free(subject);
		free(issuer);
	}
	sk_X509_free(signers);
	PKCS7_free(p7);
	return 0;
}

/*
 * The signers of every signature in the security directory, as one line;
 * an empty string when there is none.  Each WIN_CERTIFICATE starts on an
 * 8-byte boundary and is checked against the directory's bounds.
 */
int nmbl_pe_signers(const struct nmbl_pe *pe, char **ret)
{
	const unsigned char *dir = pe->buf + pe->cert_offset;
	size_t size = pe->cert_size, off = 0, count = 0;
	char *text = NULL;
	size_t text_len = 0;
	FILE *out;
	int r = 0;

	if (pe->truncated && pe->cert_size)
		return -EBADMSG;
	out = open_memstream(&text, &text_len);
	if (!out)
		return -ENOMEM;
	/* Entries are 8-byte aligned: the last one's padding may reach past
	 * the directory's end, so OFF can exceed SIZE. */
	while (off <= size && size - off >= WIN_CERT_HEADER) {
		const unsigned char *c = dir + off;
		uint32_t length = nmbl_le32(c);
		uint16_t revision = (uint16_t)(c[4] | c[5] << 8);
		uint16_t type = (uint16_t)(c[6] | c[7] << 8);

		if (length < WIN_CERT_HEADER || length > size - off) {
			r = -EBADMSG;
			break;
		}
		if (revision == WIN_CERT_REVISION_2 &&
		    type == WIN_CERT_TYPE_PKCS_SIGNED_DATA) {
			r = add_signers(c + WIN_CERT_HEADER,
					length - WIN_CERT_HEADER, out, &count);
			if (r < 0)
				break;
		}
		off += ((size_t)length + 7) & ~(size_t)7;
	}
	if (fclose(out) != 0 && r == 0)
		r = -ENOMEM;
	if (r < 0) {
		free(text);
		return r;
	}
	*ret = text;
	return 0;
}

/* "ID ... TYPE DESCRIPTION: SUMMARY" lines of /proc/keys; the serial of
 * the keyring called NAME. */
static int find_keyring(const char *keys, const char *name, int32_t *ret)
{
	size_t n = strlen(name);

	for (const char *line = keys; line && *line;
	     line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		unsigned int id;
		char type[16];
		int desc;

		if (sscanf(line, "%x %*s %*s %*s %*s %*s %*s %15s %n", &id,
			   type, &desc) != 2)
			continue;
		if (strcmp(type, "keyring") == 0 &&
		    strncmp(line + desc, name, n) == 0 && line[desc + n] == ':') {
			*ret = (int32_t)id;
			return 0;
		}
	}
	return -ENOENT;
}

/* "Debian Secure Boot CA: 6cce..." for each key of a keyring. */
static void list_keyring(int32_t keyring, FILE *out)
{
	int32_t ids[64];
	long n = nmbl_sys_keyring_read(keyring, ids, sizeof(ids));
	size_t shown = 0;

	if (n < 0) {
		fputs(" (cannot read)", out);
		return;
	}
	if ((size_t)n > sizeof(ids))
		n = sizeof(ids);
	for (long i = 0; i < n / (long)sizeof(ids[0]); i++) {
		char desc[512];
		const char *d;

		if (nmbl_sys_key_describe(ids[i], desc, sizeof(desc)) < 0)
			continue;
		/* "type;uid;gid;perm;description" */
		d = strrchr(desc, ';');
		d = d ? d + 1 : desc;
		fprintf(out, "%s '%s'", shown++ ? "," : "", d);
	}
	if (!shown)
		fputs(" none", out);
}

static void list_trusted_keys(const struct nmbl_ctx *ctx, FILE *out)
{
	_cleanup_free_ char *keys = NULL;
	size_t len;

	if (nmbl_read_file(ctx, "/proc/keys", NMBL_PROC_KEYS_MAX, &keys, &len) < 0) {
		fputs("The running kernel's keyrings cannot be read (/proc/keys).\n", out);
		return;
	}
	fputs("The running kernel trusts for kexec:\n", out);
	for (size_t i = 0; i < sizeof(kexec_keyrings) / sizeof(kexec_keyrings[0]); i++) {
		int32_t id;

		if (find_keyring(keys, kexec_keyrings[i], &id) < 0)
			continue;
		fprintf(out, "  %s:", kexec_keyrings[i]);
		list_keyring(id, out);
		fputc('\n', out);
	}
}

NMBL_EXPORT int nmbl_explain_refusal(struct nmbl_ctx *ctx, const char *kernel,
				     int err, char **ret)
{
	struct nmbl_image *img = NULL;
	_cleanup_free_ char *signers = NULL;
	char *text = NULL;
	size_t len = 0;
	FILE *out;
	int r;

	if (!ctx || !kernel || !ret)
		return -EINVAL;
	/* Only a verdict on the image itself has more to say. */
	if (-err != ENOKEY && -err != EKEYREJECTED && -err != ENODATA &&
	    -err != EBADMSG && -err != ELIBBAD && -err != ENOPKG &&
	    -err != EPERM && -err != ENOEXEC) {
		text = strdup("");
		if (!text)
			return -ENOMEM;
		*ret = text;
		return 0;
	}
	r = nmbl_image_new_from_file(ctx, kernel, &img);
	if (r < 0 && r != -ENOEXEC)
		return r;
	out = open_memstream(&text, &len);
	if (!out) {
		nmbl_image_unref(img);
		return -ENOMEM;
	}
	if (!img) {
		fputs("The file is not a PE image: not a kernel nmbl can boot.\n", out);
	} else if (nmbl_image_get_truncated(img)) {
		fputs("The file is truncated: its signature or a part of the kernel lies past its end.\n",
		      out);
	} else if (nmbl_image_signing_pe(img)->cert_size == 0 &&
		   nmbl_image_get_type(img) == NMBL_IMAGE_UKI) {
		/* The UKI's own signature is for the firmware; kexec checks the
		 * kernel it is given, which is the UKI's .linux. */
		fputs("The kernel inside this UKI carries no signature of its own: under\n"
		      "lockdown it must be signed itself, not only the UKI around it.\n"
		      "Sign the kernel before building the UKI (sbsign), with a key in db\n"
		      "or enrolled as MOK.\n", out);
	} else if (nmbl_image_signing_pe(img)->cert_size == 0) {
		fputs("It carries no signature. Sign it with a key in the firmware's db\n"
		      "(sbsign), or with a key enrolled as MOK (mokutil --import).\n", out);
	} else {
		r = nmbl_pe_signers(nmbl_image_signing_pe(img), &signers);
		fprintf(out, "It is signed by %s.\n",
			r < 0 ? "a malformed signature" : *signers ? signers : "no one known");
	}
	if (img && -err != ENOEXEC) {
		list_trusted_keys(ctx, out);
		if (-err == ENOKEY)
			fputs("To boot it, enroll its signer's certificate as MOK\n"
			      "(mokutil --import CERT.der, then reboot), or sign it with a key in db.\n",
			      out);
	}
	nmbl_image_unref(img);
	if (fclose(out) != 0) {
		free(text);
		return -ENOMEM;
	}
	*ret = text;
	return 0;
}
