/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * The check UEFI firmware makes before it starts an image under Secure
 * Boot, made beforehand in user space: nmbl offers a new UKI through
 * BootNext only when the firmware will start it.  The rules are EDK2's
 * (DxeImageVerificationLib, the firmware of OVMF and of most PCs): the
 * Authenticode hash of the PE file, then each signature of its security
 * directory against the forbidden database dbx and the allowed one db,
 * both lists of EFI_SIGNATURE_LISTs.  OpenSSL checks each PKCS#7 with the
 * settings EDK2 gives it (Pkcs7Verify), so that the verdicts agree: a db
 * entry need not be a root (partial chains), validity times and key usage
 * are not checked.
 */
#include <limits.h>
#include <openssl/asn1.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pkcs7.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <string.h>

#include "nmbl-private.h"

/* EFI_IMAGE_SECURITY_DATABASE_GUID: db and dbx. */
#define SECURITY_DB_GUID "d719b2cb-3d3a-4596-a3bc-dad00e67656f"
/* A dbx with every revocation so far is some 30 KiB; db far less. */
#define SIGDB_MAX (1024 * 1024)
/* shim's variables: MokListRT (its own certificate and the Machine Owner
 * Keys, as it hands them to the OS), MokListXRT, MokNew (keys waiting for
 * MokManager's confirmation). */
#define SHIM_LOCK_GUID "605dab50-e046-4300-abb6-3dd810dd8b23"
/* How many variables shim spreads one list over, at most, as read here. */
#define SHIM_MIRRORS 16

/* EFI_SIGNATURE_LIST: type GUID, list size, header size, signature size;
 * each EFI_SIGNATURE_DATA starts with its owner's GUID. */
#define SIGLIST_HEADER 28
#define SIG_OWNER 16
/* EFI_TIME, after the TBS hash of an EFI_CERT_X509_SHA* entry. */
#define EFI_TIME_SIZE 16

static const struct {
	const char *guid;
	enum nmbl_sig_type type;
	size_t size; /* of the data after the owner; 0 when it varies */
} sig_types[] = {
	{ "a5c059a1-94e4-4aa7-87b5-ab155c2bf072", NMBL_SIG_X509, 0 },
	{ "826ca512-cf10-4ac9-b187-be01496631bd", NMBL_SIG_SHA1, 20 },
	{ "c1c41626-504c-4092-aca9-41f936934328", NMBL_SIG_SHA256, 32 },
	{ "ff3e5307-9fd0-48c9-85f1-8ad56c701e01", NMBL_SIG_SHA384, 48 },
	{ "093e0fae-a6c4-4f50-9f1b-d41e2b89c19a", NMBL_SIG_SHA512, 64 },
	{ "3bd2a492-96c0-4079-b420-fcf98ef103ed", NMBL_SIG_X509_SHA256, 32 + EFI_TIME_SIZE },
	{ "7076876e-80c2-4ee6-aad2-28b349a6865b", NMBL_SIG_X509_SHA384, 48 + EFI_TIME_SIZE },
	{ "446dbf63-2502-4cda-bcfa-2465d2b0fe9d", NMBL_SIG_X509_SHA512, 64 + EFI_TIME_SIZE },
};

/* WIN_CERTIFICATE (PE/COFF 4.7): length, revision, type; the UEFI GUID
 * form adds the type of what follows. */
#define WIN_CERT_HEADER 8
#define WIN_CERT_TYPE_PKCS_SIGNED_DATA 0x0002
#define WIN_CERT_TYPE_EFI_GUID 0x0EF1
#define WIN_CERT_GUID_HEADER (WIN_CERT_HEADER + 16)
#define EFI_CERT_TYPE_PKCS7_GUID "4aafd29d-68df-49ee-8aa9-347d375665a7"

/* Authenticode's content type, SPC_INDIRECT_DATA_OBJID. */
#define SPC_INDIRECT_DATA "1.3.6.1.4.1.311.2.1.4"

/* PE/COFF optional header fields, the same in PE32 and PE32+. */
#define OPT_CHECKSUM 64
#define OPT_SIZE_OF_HEADERS 60
#define OPT_MAGIC_PE32 0x10b
#define OPT_MAGIC_PE32PLUS 0x20b
#define DIRECTORY_SECURITY 4
#define DIRECTORIES_MAX 16
#define SECTION_SIZE 40

/* --- EFI_SIGNATURE_LIST ----------------------------------------------------- */

static enum nmbl_sig_type sig_type_of(const unsigned char *guid, size_t *ret_size)
{
	char text[37];

	nmbl_format_guid(guid, false, text);
	for (size_t i = 0; i < ELEMENTSOF(sig_types); i++)
		if (strcmp(text, sig_types[i].guid) == 0) {
			*ret_size = sig_types[i].size;
			return sig_types[i].type;
		}
	return NMBL_SIG_OTHER;
}

struct nmbl_sigdb *nmbl_sigdb_free(struct nmbl_sigdb *db)
{
	if (db) {
		free(db->sigs);
		free(db);
	}
	return NULL;
}

/*
 * Every list must fit what holds it and be a whole number of signatures
 * of at least an owner each; a type UEFI defines must have its size.  A
 * firmware stores no db that breaks these rules (its SetVariable checks
 * them), so one that does is not the firmware's: -EBADMSG.
 */
int nmbl_sigdb_parse(const void *buf, size_t len, struct nmbl_sigdb **ret)
{
	const unsigned char *b = buf;
	struct nmbl_sigdb *db;
	size_t off = 0;

	db = calloc(1, sizeof(*db));
	if (!db)
		return -ENOMEM;
	while (off < len) {
		const unsigned char *l = b + off;
		uint32_t list_size, header_size, sig_size;
		enum nmbl_sig_type type;
		size_t want = 0, n;
		struct nmbl_sig *sigs;

		if (len - off < SIGLIST_HEADER)
			goto bad;
		list_size = nmbl_le32(l + 16);
		header_size = nmbl_le32(l + 20);
		sig_size = nmbl_le32(l + 24);
		if (list_size > len - off || list_size < SIGLIST_HEADER ||
		    header_size > list_size - SIGLIST_HEADER || sig_size <= SIG_OWNER ||
		    (list_size - SIGLIST_HEADER - header_size) % sig_size != 0)
			goto bad;
		type = sig_type_of(l, &want);
		if (want && sig_size != SIG_OWNER + want)
			goto bad;
		n = (list_size - SIGLIST_HEADER - header_size) / sig_size;
		if (type != NMBL_SIG_OTHER && n > 0) {
			sigs = reallocarray(db->sigs, db->n + n, sizeof(*sigs));
			if (!sigs) {
				nmbl_sigdb_free(db);
				return -ENOMEM;
			}
			db->sigs = sigs;
			for (size_t i = 0; i < n; i++) {
				const unsigned char *s = l + SIGLIST_HEADER + header_size +
							 i * (size_t)sig_size;

				db->sigs[db->n++] = (struct nmbl_sig){
					.type = type,
					.data = s + SIG_OWNER,
					.len = sig_size - SIG_OWNER,
				};
			}
		}
		off += list_size;
	}
	*ret = db;
	return 0;
bad:
	nmbl_sigdb_free(db);
	return -EBADMSG;
}

/* Whether DB lists DIGEST (LEN bytes) as type TYPE: an image's hash, or
 * the TBS hash of a certificate (then followed by a revocation time). */
static bool sigdb_has(const struct nmbl_sigdb *db, enum nmbl_sig_type type,
		      const unsigned char *digest, size_t len)
{
	for (size_t i = 0; i < db->n; i++)
		if (db->sigs[i].type == type && db->sigs[i].len >= len &&
		    memcmp(db->sigs[i].data, digest, len) == 0)
			return true;
	return false;
}

static bool sigdb_has_type(const struct nmbl_sigdb *db, enum nmbl_sig_type type)
{
	for (size_t i = 0; i < db->n; i++)
		if (db->sigs[i].type == type)
			return true;
	return false;
}

/* --- the Authenticode image hash --------------------------------------------- */

struct range {
	size_t off, len;
};

/* What the hash covers: three pieces of the headers, the sections, what
 * follows them. */
struct hash_layout {
	size_t n;
	struct range r[3 + NMBL_PE_MAX_SECTIONS + 1];
};

static void layout_add(struct hash_layout *h, size_t off, size_t len)
{
	if (len)
		h->r[h->n++] = (struct range){ off, len };
}

/*
 * The parts of the file the Authenticode hash covers, in order (PE/COFF
 * Authenticode, "Calculating the PE Image Hash", as EDK2's HashPeImage
 * reads it): the headers up to SizeOfHeaders without the checksum and
 * the security directory entry; the sections with raw data, sorted by
 * PointerToRawData; then, from the sum of the sizes hashed so far, the
 * rest of the file but for the certificate table's size at its end.  The
 * header checks are those of EDK2's PE loader, which refuses an image
 * that fails them.  -EBADMSG for anything outside the file.
 */
static int hash_layout(const struct nmbl_pe *pe, struct hash_layout *ret)
{
	const unsigned char *b = pe->buf;
	size_t len = pe->len;
	struct hash_layout h = { 0 };
	uint32_t sorted[NMBL_PE_MAX_SECTIONS][2];
	uint64_t lfanew, opt, dirs, sections, headers, sum, cert_size = 0;
	uint32_t n_dirs;
	uint16_t n_sections, opt_size, magic;
	size_t n = 0;

	/* The COFF header and the optional header's magic, which
	 * nmbl_pe_parse() found; checked again, cheaply. */
	if (len < 0x40)
		return -EBADMSG;
	lfanew = nmbl_le32(b + 0x3c);
	if (lfanew > len || len - lfanew < 24 + 2)
		return -EBADMSG;
	n_sections = nmbl_le16(b + lfanew + 6);
	opt_size = nmbl_le16(b + lfanew + 20);
	opt = lfanew + 24;
	magic = nmbl_le16(b + opt);
	if (magic == OPT_MAGIC_PE32)
		dirs = 96;
	else if (magic == OPT_MAGIC_PE32PLUS)
		dirs = 112;
	else
		return -EBADMSG;
	if (opt_size < dirs || opt + opt_size > len)
		return -EBADMSG;
	n_dirs = nmbl_le32(b + opt + dirs - 4);
	if (n_dirs > DIRECTORIES_MAX || opt_size != dirs + 8 * (uint64_t)n_dirs)
		return -EBADMSG;
	dirs += opt;
	sections = opt + opt_size;
	headers = nmbl_le32(b + opt + OPT_SIZE_OF_HEADERS);
	if (n_sections > NMBL_PE_MAX_SECTIONS ||
	    headers < sections + (uint64_t)n_sections * SECTION_SIZE || headers > len)
		return -EBADMSG;

	layout_add(&h, 0, opt + OPT_CHECKSUM);
	if (n_dirs > DIRECTORY_SECURITY) {
		uint64_t security = dirs + 8 * DIRECTORY_SECURITY;

		layout_add(&h, opt + OPT_CHECKSUM + 4, security - (opt + OPT_CHECKSUM + 4));
		layout_add(&h, security + 8, headers - (security + 8));
		cert_size = nmbl_le32(b + security + 4);
	} else {
		layout_add(&h, opt + OPT_CHECKSUM + 4, headers - (opt + OPT_CHECKSUM + 4));
	}
	sum = headers;

	/* Insertion sort, stable as EDK2's: equal offsets keep table order. */
	for (uint16_t i = 0; i < n_sections; i++) {
		const unsigned char *s = b + sections + (uint64_t)i * SECTION_SIZE;
		uint32_t raw = nmbl_le32(s + 16), ptr = nmbl_le32(s + 20);
		size_t pos = n;

		if (raw == 0)
			continue;
		if ((uint64_t)ptr + raw > len)
			return -EBADMSG;
		for (; pos > 0 && ptr < sorted[pos - 1][0]; pos--)
			memcpy(sorted[pos], sorted[pos - 1], sizeof(sorted[pos]));
		sorted[pos][0] = ptr;
		sorted[pos][1] = raw;
		n++;
	}
	for (size_t i = 0; i < n; i++) {
		layout_add(&h, sorted[i][0], sorted[i][1]);
		sum += sorted[i][1];
	}

	if (len > sum) {
		if (len > sum + cert_size)
			layout_add(&h, sum, len - sum - cert_size);
		else if (len < sum + cert_size)
			return -EBADMSG;
	}
	*ret = h;
	return 0;
}

static int layout_digest(const struct nmbl_pe *pe, const struct hash_layout *h,
			 const EVP_MD *md, unsigned char *ret, unsigned *ret_len)
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	bool ok;

	if (!c)
		return -ENOMEM;
	ok = EVP_DigestInit_ex(c, md, NULL) == 1;
	for (size_t i = 0; ok && i < h->n; i++)
		ok = EVP_DigestUpdate(c, pe->buf + h->r[i].off, h->r[i].len) == 1;
	ok = ok && EVP_DigestFinal_ex(c, ret, ret_len) == 1;
	EVP_MD_CTX_free(c);
	return ok ? 0 : -ENOMEM;
}

int nmbl_pe_authenticode_digest(const struct nmbl_pe *pe, const char *md_name,
				unsigned char ret[NMBL_DIGEST_MAX], size_t *ret_len)
{
	const EVP_MD *md = EVP_get_digestbyname(md_name);
	struct hash_layout h;
	unsigned n;
	int r;

	if (!md)
		return -EOPNOTSUPP;
	r = hash_layout(pe, &h);
	if (r < 0)
		return r;
	r = layout_digest(pe, &h, md, ret, &n);
	if (r < 0)
		return r;
	*ret_len = n;
	return 0;
}

/* --- one Authenticode signature ---------------------------------------------- */

/* The digest algorithms EDK2 hashes images with, by their OIDs' DER
 * contents; an image signed with another is not verified (SHA-224 has an
 * OID there but no code). */
static const struct {
	unsigned char oid[9];
	size_t oid_len;
	const char *md;
	enum nmbl_sig_type image_type, cert_type;
} digests[] = {
	{ { 0x2b, 0x0e, 0x03, 0x02, 0x1a }, 5, "SHA1", NMBL_SIG_SHA1, NMBL_SIG_OTHER },
	{ { 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01 }, 9, "SHA256",
	  NMBL_SIG_SHA256, NMBL_SIG_X509_SHA256 },
	{ { 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02 }, 9, "SHA384",
	  NMBL_SIG_SHA384, NMBL_SIG_X509_SHA384 },
	{ { 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x03 }, 9, "SHA512",
	  NMBL_SIG_SHA512, NMBL_SIG_X509_SHA512 },
};
#define N_DIGESTS ELEMENTSOF(digests)
#define DIGEST_SHA256 1
_Static_assert(NMBL_DIGEST_MAX >= EVP_MAX_MD_SIZE, "digest buffers too small");

struct signature {
	PKCS7 *p7;
	/* What the signature signs: the SpcIndirectDataContent without its
	 * SEQUENCE tag and length, inside P7. */
	const unsigned char *content;
	size_t content_len;
	/* Its digest of the image, and which of digests[] made it; -1: one
	 * the firmware does not know. */
	const unsigned char *digest;
	size_t digest_len;
	int alg;
};

static void signature_clear(struct signature *sig)
{
	PKCS7_free(sig->p7);
	*sig = (struct signature){ .alg = -1 };
}

/* The next DER element of [*P, END), of universal tag TAG: its contents
 * in *RET (RET_LEN bytes) unless RET is NULL; *P moves past it. */
static int der_next(const unsigned char **p, const unsigned char *end, int tag,
		    const unsigned char **ret, size_t *ret_len)
{
	const unsigned char *q = *p;
	long len;
	int t, class, flags;

	if (q >= end || end - q > LONG_MAX)
		return -EBADMSG;
	flags = ASN1_get_object(&q, &len, &t, &class, end - q);
	/* 0x80: an error; 0x21: an indefinite length, which DER has not. */
	if ((flags & 0x80) || flags == 0x21 || class != V_ASN1_UNIVERSAL || t != tag ||
	    len < 0 || (size_t)len > (size_t)(end - q))
		return -EBADMSG;
	if (ret) {
		*ret = q;
		*ret_len = (size_t)len;
	}
	*p = q + len;
	return 0;
}

/*
 * SpcIndirectDataContent ::= SEQUENCE {
 *     data           SpcAttributeTypeAndOptionalValue,  -- a SEQUENCE
 *     messageDigest  DigestInfo }
 * DigestInfo ::= SEQUENCE { digestAlgorithm AlgorithmIdentifier, digest OCTET STRING }
 */
static int parse_indirect_data(const unsigned char *der, size_t len, struct signature *sig)
{
	const unsigned char *p = der, *end = der + len, *content, *info, *alg, *oid;
	size_t content_len, info_len, alg_len, oid_len;
	const unsigned char *info_end, *alg_end;
	int r;

	r = der_next(&p, end, V_ASN1_SEQUENCE, &content, &content_len);
	if (r < 0)
		return r;
	sig->content = content;
	sig->content_len = content_len;
	p = content;
	end = content + content_len;
	r = der_next(&p, end, V_ASN1_SEQUENCE, NULL, NULL);
	if (r < 0)
		return r;
	r = der_next(&p, end, V_ASN1_SEQUENCE, &info, &info_len);
	if (r < 0)
		return r;
	info_end = info + info_len;
	r = der_next(&info, info_end, V_ASN1_SEQUENCE, &alg, &alg_len);
	if (r < 0)
		return r;
	alg_end = alg + alg_len;
	r = der_next(&alg, alg_end, V_ASN1_OBJECT, &oid, &oid_len);
	if (r < 0)
		return r;
	r = der_next(&info, info_end, V_ASN1_OCTET_STRING, &sig->digest, &sig->digest_len);
	if (r < 0)
		return r;
	for (size_t i = 0; i < N_DIGESTS; i++)
		if (oid_len == digests[i].oid_len && memcmp(oid, digests[i].oid, oid_len) == 0)
			sig->alg = (int)i;
	return 0;
}

/* One WIN_CERTIFICATE's PKCS#7 SignedData of Authenticode: -EBADMSG when
 * it is none. */
static int signature_parse(const unsigned char *der, size_t len, struct signature *ret)
{
	struct signature sig = { .alg = -1 };
	const unsigned char *p = der;
	const ASN1_TYPE *content;
	char type[64];
	int r;

	if (len > LONG_MAX)
		return -EBADMSG;
	/* Windows pads the DER to 8 bytes inside the entry: trailing bytes. */
	sig.p7 = d2i_PKCS7(NULL, &p, (long)len);
	if (!sig.p7)
		goto bad;
	if (!PKCS7_type_is_signed(sig.p7) || !sig.p7->d.sign || !sig.p7->d.sign->contents)
		goto bad;
	if (OBJ_obj2txt(type, sizeof(type), sig.p7->d.sign->contents->type, 1) <= 0 ||
	    strcmp(type, SPC_INDIRECT_DATA) != 0)
		goto bad;
	content = sig.p7->d.sign->contents->d.other;
	if (!content || content->type != V_ASN1_SEQUENCE || !content->value.sequence)
		goto bad;
	r = parse_indirect_data(content->value.sequence->data,
				(size_t)content->value.sequence->length, &sig);
	if (r < 0)
		goto bad;
	if (sig.alg >= 0 &&
	    sig.digest_len != (size_t)EVP_MD_get_size(EVP_get_digestbyname(digests[sig.alg].md)))
		goto bad;
	*ret = sig;
	return 0;
bad:
	ERR_clear_error();
	signature_clear(&sig);
	return -EBADMSG;
}

/*
 * Whether SIG's signature over its content is good and its signer chains,
 * through the certificates SIG carries, to ANCHOR: EDK2's Pkcs7Verify.
 * 1, 0, or -ENOMEM.
 */
static int verifies_to(const struct signature *sig, X509 *anchor)
{
	X509_STORE *store = X509_STORE_new();
	BIO *content = NULL;
	int r = -ENOMEM;

	/* An image is smaller than 2 GiB (nmbl_image_new_from_fd()). */
	if (sig->content_len > INT_MAX) {
		X509_STORE_free(store);
		return 0;
	}
	content = BIO_new_mem_buf(sig->content, (int)sig->content_len);
	if (!store || !content || X509_STORE_add_cert(store, anchor) != 1)
		goto out;
	X509_STORE_set_flags(store, X509_V_FLAG_PARTIAL_CHAIN | X509_V_FLAG_NO_CHECK_TIME);
	/* PKCS7_verify checks for S/MIME signing, which a code signing
	 * certificate need not allow; the firmware allows any purpose. */
	X509_STORE_set_purpose(store, X509_PURPOSE_ANY);
	r = PKCS7_verify(sig->p7, NULL, store, content, NULL, PKCS7_BINARY) == 1;
out:
	ERR_clear_error();
	BIO_free(content);
	X509_STORE_free(store);
	return r;
}

/* The hash of X's TBSCertificate (with MD), what a dbx EFI_CERT_X509_SHA*
 * entry lists; the bytes as they are in the certificate. */
static int tbs_digest(X509 *x, const EVP_MD *md, unsigned char *ret, unsigned *ret_len)
{
	unsigned char *der = NULL;
	const unsigned char *p, *cert;
	size_t cert_len;
	int len = i2d_X509(x, &der), r = -EBADMSG;

	if (len <= 0)
		return -ENOMEM;
	p = der;
	if (der_next(&p, der + len, V_ASN1_SEQUENCE, &cert, &cert_len) < 0)
		goto out;
	/* The TBSCertificate, tag and length included, opens the contents. */
	p = cert;
	if (der_next(&p, cert + cert_len, V_ASN1_SEQUENCE, NULL, NULL) < 0)
		goto out;
	r = EVP_Digest(cert, (size_t)(p - cert), ret, ret_len, md, NULL) == 1 ? 0 : -ENOMEM;
out:
	OPENSSL_free(der);
	return r;
}

/* Whether dbx revokes X by the hash of its TBSCertificate.  Whatever the
 * revocation time: nmbl does not read timestamps, and a certificate
 * revoked from some time on is revoked for a new image. */
static int cert_revoked(X509 *x, const struct nmbl_sigdb *dbx)
{
	for (size_t i = 0; i < N_DIGESTS; i++) {
		unsigned char d[NMBL_DIGEST_MAX];
		unsigned n;
		int r;

		if (digests[i].cert_type == NMBL_SIG_OTHER ||
		    !sigdb_has_type(dbx, digests[i].cert_type))
			continue;
		r = tbs_digest(x, EVP_get_digestbyname(digests[i].md), d, &n);
		if (r < 0)
			return r;
		if (sigdb_has(dbx, digests[i].cert_type, d, n))
			return 1;
	}
	return 0;
}

static char *cert_name(X509 *x)
{
	char *name = nmbl_x509_name(X509_get_subject_name(x));

	return name ? name : strdup("?");
}

/* --- the firmware's verdict --------------------------------------------------- */

struct check {
	const struct nmbl_pe *pe;
	struct hash_layout layout;
	const struct nmbl_sigdb *db, *dbx;
	/* The X509 entries of db and dbx, parsed; one that does not parse
	 * verifies nothing, in the firmware too. */
	STACK_OF(X509) *db_certs, *dbx_certs;
	/* The image's digest with each of digests[], made when first asked. */
	unsigned char digest[N_DIGESTS][NMBL_DIGEST_MAX];
	unsigned digest_len[N_DIGESTS];
	/* Who signed what db allows; NULL when db lists the image's hash. */
	char *signer;
};

static int load_certs(const struct nmbl_sigdb *db, STACK_OF(X509) **ret)
{
	STACK_OF(X509) *certs = sk_X509_new_null();

	if (!certs)
		return -ENOMEM;
	for (size_t i = 0; i < db->n; i++) {
		const unsigned char *p = db->sigs[i].data;
		X509 *x;

		if (db->sigs[i].type != NMBL_SIG_X509 || db->sigs[i].len > LONG_MAX)
			continue;
		x = d2i_X509(NULL, &p, (long)db->sigs[i].len);
		if (!x) {
			ERR_clear_error();
			continue;
		}
		if (!sk_X509_push(certs, x)) {
			X509_free(x);
			sk_X509_pop_free(certs, X509_free);
			return -ENOMEM;
		}
	}
	*ret = certs;
	return 0;
}

static int image_digest(struct check *c, int alg, const unsigned char **ret, size_t *ret_len)
{
	int r;

	if (!c->digest_len[alg]) {
		r = layout_digest(c->pe, &c->layout, EVP_get_digestbyname(digests[alg].md),
				  c->digest[alg], &c->digest_len[alg]);
		if (r < 0)
			return r;
	}
	*ret = c->digest[alg];
	*ret_len = c->digest_len[alg];
	return 0;
}

/*
 * Whether dbx forbids SIG (EDK2's IsForbiddenByDbx): its signer chains to
 * a certificate of dbx (only a signature that matches the image counts,
 * as the firmware checks the digest first), or a certificate it carries
 * is revoked by its TBS hash.  1, 0, or -errno.
 */
static int forbidden_by_dbx(struct check *c, const struct signature *sig, bool match)
{
	STACK_OF(X509) *carried = sig->p7->d.sign->cert;
	int r;

	for (int i = 0; match && i < sk_X509_num(c->dbx_certs); i++) {
		r = verifies_to(sig, sk_X509_value(c->dbx_certs, i));
		if (r != 0)
			return r;
	}
	for (int i = 0; i < sk_X509_num(carried); i++) {
		r = cert_revoked(sk_X509_value(carried, i), c->dbx);
		if (r != 0)
			return r;
	}
	return 0;
}

/*
 * Whether db allows SIG (EDK2's IsAllowedByDb): its signer chains to a
 * certificate of db, one by one, which dbx does not revoke by its TBS
 * hash.  Then c->signer names the signer.  1, 0, or -errno.
 */
static int allowed_by_db(struct check *c, const struct signature *sig)
{
	for (int i = 0; i < sk_X509_num(c->db_certs); i++) {
		X509 *anchor = sk_X509_value(c->db_certs, i);
		STACK_OF(X509) *signers;
		int r = verifies_to(sig, anchor);

		if (r <= 0) {
			if (r < 0)
				return r;
			continue;
		}
		/* EDK2 stops at the first certificate that verifies. */
		r = cert_revoked(anchor, c->dbx);
		if (r != 0)
			return r < 0 ? r : 0;
		signers = PKCS7_get0_signers(sig->p7, NULL, 0);
		c->signer = signers && sk_X509_num(signers) > 0 ?
				    cert_name(sk_X509_value(signers, 0)) : strdup("?");
		sk_X509_free(signers);
		ERR_clear_error();
		return c->signer ? 1 : -ENOMEM;
	}
	return 0;
}

/*
 * One signature, as the firmware weighs it (the body of EDK2's loop):
 * -EKEYREJECTED when dbx forbids it or lists the image's hash; else 1 when
 * the image is allowed by now (VERIFIED: an earlier signature allowed
 * it), through this signature's signer or its hash in db, 0 when not.
 */
static int check_signature(struct check *c, const struct signature *sig, bool verified)
{
	enum nmbl_sig_type type = digests[sig->alg].image_type;
	const unsigned char *digest;
	size_t n;
	bool match;
	int r;

	r = image_digest(c, sig->alg, &digest, &n);
	if (r < 0)
		return r;
	match = n == sig->digest_len && memcmp(digest, sig->digest, n) == 0;
	r = forbidden_by_dbx(c, sig, match);
	if (r != 0)
		return r < 0 ? r : -EKEYREJECTED;
	if (!verified && match) {
		r = allowed_by_db(c, sig);
		if (r < 0)
			return r;
		verified = r;
	}
	if (sigdb_has(c->dbx, type, digest, n))
		return -EKEYREJECTED;
	return verified || sigdb_has(c->db, type, digest, n);
}

/*
 * The signatures of the security directory, each a WIN_CERTIFICATE on an
 * 8-byte boundary, which together must fill it exactly (-EBADMSG when
 * not, whatever else they say, as EDK2 rules).  An entry that is no
 * Authenticode signature is passed over, and so are a PKCS#7 that does
 * not parse and a signature with a digest the firmware does not know: they
 * count only when nothing else does (-EBADMSG, -ENODATA).
 */
static int check_signatures(struct check *c)
{
	const unsigned char *b = c->pe->buf;
	uint64_t off = c->pe->cert_offset, end = off + c->pe->cert_size;
	bool verified = false, weighed = false, malformed = false;
	int r;

	while (off < end) {
		const unsigned char *e = b + off;
		uint64_t left = end - off;
		uint32_t length, pad;
		uint16_t type;
		struct signature sig;

		if (left <= WIN_CERT_HEADER)
			break;
		length = nmbl_le32(e);
		pad = (8 - length % 8) % 8;
		if (length < WIN_CERT_HEADER || left < length || left - length < pad)
			break;
		type = nmbl_le16(e + 6);
		off += (uint64_t)length + pad;
		if (type == WIN_CERT_TYPE_PKCS_SIGNED_DATA) {
			/* An empty one ends EDK2's walk short of the end. */
			if (length == WIN_CERT_HEADER)
				return -EBADMSG;
			r = signature_parse(e + WIN_CERT_HEADER, length - WIN_CERT_HEADER, &sig);
		} else if (type == WIN_CERT_TYPE_EFI_GUID) {
			char guid[37];

			if (length <= WIN_CERT_GUID_HEADER)
				return -EBADMSG;
			nmbl_format_guid(e + WIN_CERT_HEADER, false, guid);
			if (strcmp(guid, EFI_CERT_TYPE_PKCS7_GUID) != 0)
				continue;
			r = signature_parse(e + WIN_CERT_GUID_HEADER,
					    length - WIN_CERT_GUID_HEADER, &sig);
		} else {
			continue;
		}
		if (r < 0) {
			malformed = true;
			continue;
		}
		if (sig.alg >= 0) {
			weighed = true;
			r = check_signature(c, &sig, verified);
		}
		signature_clear(&sig);
		if (r < 0)
			return r;
		verified = verified || r > 0;
	}
	if (off != end)
		return -EBADMSG;
	if (verified)
		return 0;
	if (weighed)
		return -EKEYREJECTED;
	return malformed ? -EBADMSG : -ENODATA;
}

int nmbl_pe_check_firmware(const struct nmbl_pe *pe, const struct nmbl_sigdb *db,
			   const struct nmbl_sigdb *dbx, char **ret_signer)
{
	struct check c = { .pe = pe, .db = db, .dbx = dbx };
	int r;

	if ((uint64_t)pe->cert_offset + pe->cert_size > pe->len)
		return -EBADMSG;
	r = hash_layout(pe, &c.layout);
	if (r < 0)
		return r;
	r = load_certs(db, &c.db_certs);
	if (r < 0)
		return r;
	r = load_certs(dbx, &c.dbx_certs);
	if (r < 0)
		goto free_db;

	if (pe->cert_size == 0) {
		/* Not signed: only its SHA-256 hash in db lets it start. */
		const unsigned char *digest;
		size_t n;

		r = image_digest(&c, DIGEST_SHA256, &digest, &n);
		if (r == 0 && sigdb_has(dbx, NMBL_SIG_SHA256, digest, n))
			r = -EKEYREJECTED;
		else if (r == 0 && !sigdb_has(db, NMBL_SIG_SHA256, digest, n))
			r = -ENODATA;
	} else {
		r = check_signatures(&c);
	}
	if (r == 0 && ret_signer)
		*ret_signer = TAKE_PTR(c.signer);
	free(c.signer);
	sk_X509_pop_free(c.dbx_certs, X509_free);
free_db:
	sk_X509_pop_free(c.db_certs, X509_free);
	return r;
}

/* IMG against DB and DBX (both freed here), as WHO checks it. */
static int check_with(struct nmbl_ctx *ctx, const struct nmbl_image *img, struct nmbl_sigdb *db,
		      struct nmbl_sigdb *dbx, const char *who, char **ret_signer)
{
	_cleanup_free_ char *signer = NULL;
	int r;

	r = nmbl_pe_check_firmware(nmbl_image_pe(img), db, dbx, &signer);
	nmbl_sigdb_free(db);
	nmbl_sigdb_free(dbx);
	if (r < 0) {
		nmbl_dbg(ctx, "%s would not start the image: %s", who, strerror(-r));
		return r;
	}
	nmbl_dbg(ctx, "%s allows the image: %s", who, signer ? signer : "by its hash");
	if (ret_signer)
		*ret_signer = TAKE_PTR(signer);
	return 0;
}

/*
 * The signature lists of shim's variable NAME (SHIM_LOCK_GUID) appended to
 * *RAW (LEN bytes so far): NAME, then NAME1, NAME2... as shim mirrors a list
 * too large for one variable.  -ENOENT when NAME is not set.
 */
static int append_shim_lists(struct nmbl_ctx *ctx, const char *name, char **raw, size_t *len)
{
	for (unsigned n = 0; n < SHIM_MIRRORS; n++) {
		_cleanup_free_ char *part = NULL;
		char var[64];
		size_t part_len;
		char *grown;
		int r;

		if (n == 0)
			snprintf(var, sizeof(var), "%s", name);
		else
			snprintf(var, sizeof(var), "%s%u", name, n);
		r = nmbl_efivar_read(ctx, SHIM_LOCK_GUID, var, SIGDB_MAX, &part, &part_len);
		if (r == -ENOENT)
			return n == 0 ? -ENOENT : 0;
		if (r < 0)
			return r;
		if (*len + part_len > SIGDB_MAX)
			return -EFBIG;
		grown = realloc(*raw, *len + part_len + 1);
		if (!grown)
			return -ENOMEM;
		memcpy(grown + *len, part, part_len);
		*raw = grown;
		*len += part_len;
	}
	return 0;
}

/* Security database NAME, followed by shim's lists SHIM_NAME when not
 * NULL, parsed into *RET (pointing into *RET_RAW).  When REQUIRED, a
 * missing SHIM_NAME (or without shim, a missing NAME) is -ENOENT; other
 * missing ones count as empty. */
static int read_lists(struct nmbl_ctx *ctx, const char *name, const char *shim_name,
		      bool required, char **ret_raw, struct nmbl_sigdb **ret)
{
	_cleanup_free_ char *raw = NULL;
	size_t len = 0;
	int r;

	r = nmbl_efivar_read(ctx, SECURITY_DB_GUID, name, SIGDB_MAX, &raw, &len);
	if (r == -ENOENT && (!required || shim_name))
		len = 0;
	else if (r < 0)
		return r;
	if (shim_name) {
		r = append_shim_lists(ctx, shim_name, &raw, &len);
		if (r < 0 && (r != -ENOENT || required))
			return r;
	}
	r = nmbl_sigdb_parse(raw, len, ret);
	if (r < 0)
		return r;
	*ret_raw = TAKE_PTR(raw);
	return 0;
}

/* IMG against db and dbx, with shim's MokListRT and MokListXRT when SHIM. */
static int check_lists(struct nmbl_ctx *ctx, const struct nmbl_image *img, bool shim,
		       char **ret_signer)
{
	_cleanup_free_ char *db_raw = NULL, *dbx_raw = NULL;
	struct nmbl_sigdb *db = NULL, *dbx = NULL;
	int r;

	if (!ctx || !img)
		return -EINVAL;
	r = read_lists(ctx, "db", shim ? "MokListRT" : NULL, true, &db_raw, &db);
	if (r < 0) {
		nmbl_dbg(ctx, "%s: %s", shim ? "db and MokListRT" : "db", strerror(-r));
		return r;
	}
	r = read_lists(ctx, "dbx", shim ? "MokListXRT" : NULL, false, &dbx_raw, &dbx);
	if (r < 0) {
		nmbl_dbg(ctx, "%s: %s", shim ? "dbx and MokListXRT" : "dbx", strerror(-r));
		nmbl_sigdb_free(db);
		return r;
	}
	return check_with(ctx, img, db, dbx, shim ? "shim" : "the firmware's db", ret_signer);
}

NMBL_EXPORT int nmbl_image_check_shim(struct nmbl_ctx *ctx, const struct nmbl_image *img,
				      char **ret_signer)
{
	return check_lists(ctx, img, true, ret_signer);
}

bool nmbl_image_mok_pending(struct nmbl_ctx *ctx, const struct nmbl_image *img)
{
	_cleanup_free_ char *raw = NULL;
	struct nmbl_sigdb *pending = NULL, *none = NULL;
	size_t len = 0;
	int r;

	if (append_shim_lists(ctx, "MokNew", &raw, &len) < 0 ||
	    nmbl_sigdb_parse(raw, len, &pending) < 0)
		return false;
	r = nmbl_sigdb_parse(NULL, 0, &none);
	if (r == 0)
		r = nmbl_pe_check_firmware(nmbl_image_pe(img), pending, none, NULL);
	nmbl_sigdb_free(pending);
	nmbl_sigdb_free(none);
	return r == 0;
}

NMBL_EXPORT int nmbl_image_check_firmware(struct nmbl_ctx *ctx, const struct nmbl_image *img,
					  char **ret_signer)
{
	return check_lists(ctx, img, false, ret_signer);
}
