/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * Who signed a kernel (its Authenticode signatures, read with OpenSSL from
 * the security directory the PE parser bounded), whether the keys the
 * running kernel trusts for kexec trust it, and, when a kernel was
 * refused, why and what to do.
 */
#include <limits.h>
#include <openssl/pkcs7.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
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

char *nmbl_x509_name(const X509_NAME *name)
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

DEFINE_TRIVIAL_CLEANUP_FUNC(PKCS7 *, PKCS7_free)
#define _cleanup_pkcs7_ _cleanup_(PKCS7_freep)

/* The certificates a signature carries, and its signers; NULL when it
 * has none or is no SignedData. */
static STACK_OF(X509) *pkcs7_certs(PKCS7 *p7)
{
	return PKCS7_type_is_signed(p7) && p7->d.sign ? p7->d.sign->cert : NULL;
}

static STACK_OF(PKCS7_SIGNER_INFO) *pkcs7_signer_infos(PKCS7 *p7)
{
	return PKCS7_type_is_signed(p7) ? PKCS7_get_signer_info(p7) : NULL;
}

/* The certificate of signer SI among the signature's, by issuer and
 * serial, as Authenticode names it; NULL when it is not included. */
static X509 *signer_cert(PKCS7 *p7, PKCS7_SIGNER_INFO *si)
{
	STACK_OF(X509) *certs = pkcs7_certs(p7);

	if (!certs || !si->issuer_and_serial)
		return NULL;
	return X509_find_by_issuer_and_serial(certs, si->issuer_and_serial->issuer,
					      si->issuer_and_serial->serial);
}

/*
 * Hand each signature of PE's security directory, parsed, to FN in
 * order, until FN returns non-zero (which is returned).  Each
 * WIN_CERTIFICATE starts on an 8-byte boundary and is checked against the
 * directory's bounds; -EBADMSG for one that breaks them or holds no
 * PKCS#7.
 */
static int for_each_signature(const struct nmbl_pe *pe,
			      int (*fn)(PKCS7 *p7, void *data), void *data)
{
	const unsigned char *dir = pe->buf + pe->cert_offset;
	size_t size = pe->cert_size, off = 0;

	if (pe->truncated && pe->cert_size)
		return -EBADMSG;
	/* Entries are 8-byte aligned: the last one's padding may reach past
	 * the directory's end, so OFF can exceed SIZE. */
	while (off <= size && size - off >= WIN_CERT_HEADER) {
		const unsigned char *c = dir + off;
		uint32_t length = nmbl_le32(c);
		uint16_t revision = nmbl_le16(c + 4);
		uint16_t type = nmbl_le16(c + 6);

		if (length < WIN_CERT_HEADER || length > size - off)
			return -EBADMSG;
		if (revision == WIN_CERT_REVISION_2 &&
		    type == WIN_CERT_TYPE_PKCS_SIGNED_DATA) {
			_cleanup_pkcs7_ PKCS7 *p7 = NULL;
			const unsigned char *p = c + WIN_CERT_HEADER;
			int r;

			p7 = d2i_PKCS7(NULL, &p, (long)(length - WIN_CERT_HEADER));
			if (!p7)
				return -EBADMSG;
			r = fn(p7, data);
			if (r != 0)
				return r;
		}
		off += ((size_t)length + 7) & ~(size_t)7;
	}
	return 0;
}

/* Append "SUBJECT (issued by ISSUER)" for each signer of one PKCS#7. */
struct signer_line {
	FILE *out;
	size_t count;
};

static int add_signers(PKCS7 *p7, void *data)
{
	struct signer_line *l = data;
	STACK_OF(X509) *signers = PKCS7_get0_signers(p7, NULL, 0);

	for (int i = 0; signers && i < sk_X509_num(signers); i++) {
		X509 *x = sk_X509_value(signers, i);
		char *subject = nmbl_x509_name(X509_get_subject_name(x));
		char *issuer = nmbl_x509_name(X509_get_issuer_name(x));

		fprintf(l->out, "%s'%s' (issued by '%s')", l->count++ ? ", " : "",
			subject ? subject : "?", issuer ? issuer : "?");
		free(subject);
		free(issuer);
	}
	sk_X509_free(signers);
	return 0;
}

/*
 * The signers of every signature in the security directory, as one line;
 * an empty string when there is none.
 */
int nmbl_pe_signers(const struct nmbl_pe *pe, char **ret)
{
	struct signer_line l = { 0 };
	char *text = NULL;
	size_t text_len = 0;
	int r;

	l.out = open_memstream(&text, &text_len);
	if (!l.out)
		return -ENOMEM;
	r = for_each_signature(pe, add_signers, &l);
	if (fclose(l.out) != 0 && r == 0)
		r = -ENOMEM;
	if (r < 0) {
		free(text);
		return r;
	}
	*ret = text;
	return 0;
}

/* The signers' names of each signature, in order, for
 * nmbl_image_get_signers(). */
struct signer_names {
	char **names;
	size_t n;
};

static int add_signer_names(PKCS7 *p7, void *data)
{
	struct signer_names *s = data;
	STACK_OF(PKCS7_SIGNER_INFO) *infos = pkcs7_signer_infos(p7);

	for (int i = 0; infos && i < sk_PKCS7_SIGNER_INFO_num(infos); i++) {
		PKCS7_SIGNER_INFO *si = sk_PKCS7_SIGNER_INFO_value(infos, i);
		X509 *x = signer_cert(p7, si);
		char *name, **names;

		/* Without its certificate a signer is known only by its
		 * issuer: name that, and say so. */
		name = NULL;
		if (x) {
			name = nmbl_x509_name(X509_get_subject_name(x));
		} else if (si->issuer_and_serial) {
			_cleanup_free_ char *issuer = nmbl_x509_name(si->issuer_and_serial->issuer);

			if (issuer && asprintf(&name, "a key certified by %s", issuer) < 0)
				return -ENOMEM;
		}
		/* A name that is no text (nmbl_x509_name() fails on it too). */
		if (!name)
			name = strdup("?");
		if (!name)
			return -ENOMEM;
		names = realloc(s->names, (s->n + 1) * sizeof(*names));
		if (!names) {
			free(name);
			return -ENOMEM;
		}
		s->names = names;
		s->names[s->n++] = name;
	}
	return 0;
}

NMBL_EXPORT int nmbl_image_get_signers(const struct nmbl_image *img, char ***ret_signers)
{
	struct signer_names s = { 0 };
	size_t size = 0;
	char **strv, *p;
	int r;

	if (!img || !ret_signers)
		return -EINVAL;
	r = for_each_signature(nmbl_image_signing_pe(img), add_signer_names, &s);
	if (r < 0)
		goto free_names;
	if (s.n > INT_MAX) {
		r = -E2BIG;
		goto free_names;
	}
	/* One allocation, the array then its strings: one free() for all. */
	for (size_t i = 0; i < s.n; i++)
		size += strlen(s.names[i]) + 1;
	strv = malloc((s.n + 1) * sizeof(*strv) + size);
	if (!strv) {
		r = -ENOMEM;
		goto free_names;
	}
	p = (char *)(strv + s.n + 1);
	for (size_t i = 0; i < s.n; i++) {
		strv[i] = strcpy(p, s.names[i]);
		p += strlen(p) + 1;
	}
	strv[s.n] = NULL;
	*ret_signers = strv;
	r = (int)s.n;
free_names:
	for (size_t i = 0; i < s.n; i++)
		free(s.names[i]);
	free(s.names);
	return r;
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
	for (size_t i = 0; i < ELEMENTSOF(kexec_keyrings); i++) {
		int32_t id;

		if (find_keyring(keys, kexec_keyrings[i], &id) < 0)
			continue;
		fprintf(out, "  %s:", kexec_keyrings[i]);
		list_keyring(id, out);
		fputc('\n', out);
	}
}

/*
 * Whether the keys kexec checks against trust an image, as the kernel's
 * PKCS#7 trust validation decides it (crypto/asymmetric_keys/pkcs7_trust.c),
 * from what userspace sees of those keys: their descriptions, which the
 * kernel makes "SUBJECT: ID" from an X.509 certificate, ID being its
 * subject key identifier (else its serial number) in hex.
 */

/* More keys than any keyring of a real machine holds. */
#define KEYRING_MAX_KEYS 65536
/* KEYCTL_DESCRIBE's "type;uid;gid;perm;description". */
#define KEY_DESCRIBE_MAX 4096

struct trusted_keys {
	char **desc;
	size_t n;
	/* The error of a keyring that could not be read, whose keys might
	 * have been the ones that trust. */
	int err;
};

static void trusted_keys_clear(struct trusted_keys *k)
{
	for (size_t i = 0; i < k->n; i++)
		free(k->desc[i]);
	free(k->desc);
	*k = (struct trusted_keys){ 0 };
}

/* The members of KEYRING (keys and keyrings), malloc'ed. */
static int read_keyring(int32_t keyring, int32_t **ret, size_t *ret_n)
{
	_cleanup_free_ int32_t *ids = NULL;
	long size = nmbl_sys_keyring_read(keyring, NULL, 0);

	/* A key added between the two reads makes the second one longer:
	 * read again with room for it. */
	for (int tries = 0; tries < 3; tries++) {
		long n;

		if (size < 0)
			return (int)size;
		if ((size_t)size > KEYRING_MAX_KEYS * sizeof(*ids))
			return -EFBIG;
		free(ids);
		ids = malloc((size_t)size + sizeof(*ids));
		if (!ids)
			return -ENOMEM;
		n = nmbl_sys_keyring_read(keyring, ids, (size_t)size);
		if (n < 0)
			return (int)n;
		if (n <= size) {
			*ret_n = (size_t)n / sizeof(*ids);
			*ret = TAKE_PTR(ids);
			return 0;
		}
		size = n;
	}
	return -EAGAIN;
}

/* The description of an asymmetric key from KEYCTL_DESCRIBE's answer;
 * NULL for another type (a keyring linked in, a blacklist hash). */
static const char *asymmetric_description(const char *described)
{
	const char *d = described;

	if (strncmp(d, "asymmetric;", 11) != 0)
		return NULL;
	for (int i = 0; i < 4 && d; i++) {
		d = strchr(d, ';');
		if (d)
			d++;
	}
	return d;
}

static int add_keyring_keys(int32_t keyring, struct trusted_keys *k)
{
	_cleanup_free_ int32_t *ids = NULL;
	size_t n = 0;
	int r;

	r = read_keyring(keyring, &ids, &n);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		char described[KEY_DESCRIBE_MAX];
		const char *d;
		char **desc;

		/* Revoked since the keyring was read, or no key to trust. */
		if (nmbl_sys_key_describe(ids[i], described, sizeof(described)) < 0)
			continue;
		d = asymmetric_description(described);
		if (!d)
			continue;
		desc = realloc(k->desc, (k->n + 1) * sizeof(*desc));
		if (!desc)
			return -ENOMEM;
		k->desc = desc;
		k->desc[k->n] = strdup(d);
		if (!k->desc[k->n])
			return -ENOMEM;
		k->n++;
	}
	return 0;
}

/* The keys of the keyrings kexec_file_load checks a signature against.
 * -ENOENT when /proc/keys shows none of them (a user who may not see
 * them); a keyring that cannot be read is left in RET->err. */
static int read_trusted_keys(const struct nmbl_ctx *ctx, struct trusted_keys *ret)
{
	_cleanup_free_ char *proc_keys = NULL;
	struct trusted_keys k = { 0 };
	size_t len, found = 0;
	int r;

	r = nmbl_read_file(ctx, "/proc/keys", NMBL_PROC_KEYS_MAX, &proc_keys, &len);
	if (r < 0)
		return r;
	for (size_t i = 0; i < ELEMENTSOF(kexec_keyrings); i++) {
		int32_t id;

		if (find_keyring(proc_keys, kexec_keyrings[i], &id) < 0)
			continue;
		found++;
		r = add_keyring_keys(id, &k);
		if (r == -ENOMEM) {
			trusted_keys_clear(&k);
			return r;
		}
		if (r < 0)
			k.err = r;
	}
	if (!found)
		return -ENOENT;
	*ret = k;
	return 0;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Whether key description DESC ("SUBJECT: HEX") has the identifier ID of
 * LEN bytes; an INTEGER (a serial number) compares by value, whatever
 * leading zero bytes either side has.  The subject may hold ": " itself
 * ("O: CN"): the identifier follows the last one.
 */
static bool description_has_id(const char *desc, const unsigned char *id,
			       size_t len, bool integer)
{
	const char *hex = NULL;
	size_t n;

	for (const char *p = strstr(desc, ": "); p; p = strstr(p + 1, ": "))
		hex = p + 2;
	if (!hex)
		return false;
	n = strlen(hex);
	if (integer) {
		while (len && id[0] == 0)
			id++, len--;
		while (n >= 2 && hex[0] == '0' && hex[1] == '0')
			hex += 2, n -= 2;
	}
	if (len == 0 || n != 2 * len)
		return false;
	for (size_t i = 0; i < len; i++) {
		int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);

		if (hi < 0 || lo < 0 || (unsigned)(hi << 4 | lo) != id[i])
			return false;
	}
	return true;
}

/* The key that is certificate X: the one described by X's subject key
 * identifier, else by its serial number and a subject holding X's name. */
static const char *key_of_cert(const struct trusted_keys *k, X509 *x)
{
	const ASN1_OCTET_STRING *skid = X509_get0_subject_key_id(x);
	const ASN1_INTEGER *serial = X509_get0_serialNumber(x);
	_cleanup_free_ char *name = NULL;

	if (!skid)
		name = nmbl_x509_name(X509_get_subject_name(x));
	for (size_t i = 0; i < k->n; i++) {
		const char *d = k->desc[i];

		if (skid ? description_has_id(d, ASN1_STRING_get0_data(skid),
					      (size_t)ASN1_STRING_length(skid), false)
			 : name && strstr(d, name) &&
				   description_has_id(d, ASN1_STRING_get0_data(serial),
						      (size_t)ASN1_STRING_length(serial), true))
			return d;
	}
	return NULL;
}

/* The key that issued X, by X's authority key identifier. */
static const char *key_of_issuer(const struct trusted_keys *k, X509 *x)
{
	const ASN1_OCTET_STRING *akid = X509_get0_authority_key_id(x);

	for (size_t i = 0; akid && i < k->n; i++)
		if (description_has_id(k->desc[i], ASN1_STRING_get0_data(akid),
				       (size_t)ASN1_STRING_length(akid), false))
			return k->desc[i];
	return NULL;
}

/* Self-signed as the kernel decides it: issuer and subject the same, and
 * an authority key identifier, if any, that names the certificate's own. */
static bool self_signed(X509 *x)
{
	const ASN1_OCTET_STRING *akid = X509_get0_authority_key_id(x);
	const ASN1_OCTET_STRING *skid = X509_get0_subject_key_id(x);

	if (X509_NAME_cmp(X509_get_subject_name(x), X509_get_issuer_name(x)) != 0)
		return false;
	return !akid || (skid && ASN1_OCTET_STRING_cmp(akid, skid) == 0);
}

static bool names_hold(const GENERAL_NAMES *names, const X509_NAME *name)
{
	for (int i = 0; i < sk_GENERAL_NAME_num(names); i++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);

		if (g->type == GEN_DIRNAME && X509_NAME_cmp(g->d.directoryName, name) == 0)
			return true;
	}
	return false;
}

/* X's issuer among the signature's certificates, found as the kernel
 * finds it: by the issuer and serial number X's authority key identifier
 * names, else by its key identifier; NULL when it is not there. */
static X509 *issuer_in(STACK_OF(X509) *certs, X509 *x)
{
	const ASN1_OCTET_STRING *akid = X509_get0_authority_key_id(x);
	const GENERAL_NAMES *issuer = X509_get0_authority_issuer(x);
	const ASN1_INTEGER *serial = X509_get0_authority_serial(x);

	for (int i = 0; i < sk_X509_num(certs); i++) {
		X509 *p = sk_X509_value(certs, i);
		const ASN1_OCTET_STRING *skid = X509_get0_subject_key_id(p);

		if (issuer && serial) {
			if (ASN1_INTEGER_cmp(X509_get0_serialNumber(p), serial) == 0 &&
			    names_hold(issuer, X509_get_issuer_name(p)))
				return p;
		} else if (akid && skid && ASN1_OCTET_STRING_cmp(akid, skid) == 0) {
			return p;
		}
	}
	return NULL;
}

/*
 * The key signer SI of P7 chains to (pkcs7_validate_trust_one()): the
 * first certificate of its chain inside the signature that is a trusted
 * key, else the key that issued the chain's last certificate; an unknown
 * self-signed certificate ends the chain untrusted.  NULL when none;
 * -EKEYREJECTED when a certificate is not signed by the issuer the chain
 * names, for which the kernel rejects the whole signature.
 */
static int signer_key(PKCS7 *p7, PKCS7_SIGNER_INFO *si, const struct trusted_keys *k,
		      const char **ret_key)
{
	STACK_OF(X509) *certs = pkcs7_certs(p7);
	X509 *x = signer_cert(p7, si), *last = NULL;

	*ret_key = NULL;
	/* Without the signer's certificate the kernel looks the signer up
	 * by issuer and serial, which key descriptions do not show. */
	for (int depth = 0; x && depth <= sk_X509_num(certs); depth++) {
		X509 *next;

		*ret_key = key_of_cert(k, x);
		if (*ret_key || self_signed(x))
			return 0;
		last = x;
		next = issuer_in(certs, x);
		if (next && X509_verify(x, X509_get0_pubkey(next)) != 1)
			return -EKEYREJECTED;
		x = next;
	}
	if (last)
		*ret_key = key_of_issuer(k, last);
	return 0;
}

struct trust_walk {
	const struct trusted_keys *keys;
	const char *key;
};

static int first_signature_key(PKCS7 *p7, void *data)
{
	struct trust_walk *w = data;
	STACK_OF(PKCS7_SIGNER_INFO) *infos = pkcs7_signer_infos(p7);

	for (int i = 0; infos && i < sk_PKCS7_SIGNER_INFO_num(infos); i++) {
		int r = signer_key(p7, sk_PKCS7_SIGNER_INFO_value(infos, i), w->keys, &w->key);

		if (r < 0)
			return r;
		if (w->key)
			break;
	}
	/* kexec reads the first signature only: stop. */
	return 1;
}

NMBL_EXPORT int nmbl_image_is_trusted(struct nmbl_ctx *ctx, const struct nmbl_image *img,
				      char **ret_key)
{
	const struct nmbl_pe *pe;
	struct trusted_keys k = { 0 };
	struct trust_walk w = { .keys = &k };
	char *key = NULL;
	int r;

	if (!ctx || !img)
		return -EINVAL;
	pe = nmbl_image_signing_pe(img);
	/* Unsigned: no key can trust it, whatever the keyrings hold. */
	if (pe->cert_size == 0)
		goto untrusted;
	r = read_trusted_keys(ctx, &k);
	if (r < 0)
		return r;
	r = for_each_signature(pe, first_signature_key, &w);
	if (r == -ENOMEM)
		goto clear_keys;
	if (w.key)
		r = (key = strdup(w.key)) ? 1 : -ENOMEM;
	else if (r >= 0 && k.err < 0)
		/* Not among the keys read: maybe among those that were not. */
		r = k.err;
	else
		/* No trusted signer, or a signature the kernel rejects. */
		r = 0;
clear_keys:
	trusted_keys_clear(&k);
	if (r < 0)
		return r;
	if (r == 0)
		goto untrusted;
	if (ret_key)
		*ret_key = key;
	else
		free(key);
	return 1;
untrusted:
	if (ret_key)
		*ret_key = NULL;
	return 0;
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
