/* SPDX-License-Identifier: GPL-3.0-or-later */
/* libFuzzer entry for the firmware's Secure Boot check of a PE image (the
 * Authenticode hash, the WIN_CERTIFICATE walk, each PKCS#7): the bytes are
 * the image file.  So that the fuzzer reaches the signature checks, db
 * holds the first certificate the image's first signature carries, and
 * dbx that certificate's TBS hash as well, in turn. */
#include <openssl/pkcs7.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <stdint.h>
#include <string.h>

#include "nmbl-private.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The DER of the first certificate in the first WIN_CERTIFICATE's PKCS#7,
 * read without nmbl's own walk; 0 when there is none. */
static int first_cert(const struct nmbl_pe *pe, unsigned char **ret)
{
	const unsigned char *p = pe->buf + pe->cert_offset + 8;
	STACK_OF(X509) *certs;
	PKCS7 *p7;
	uint32_t len;
	int n = 0;

	if (pe->cert_size < 8 || (uint64_t)pe->cert_offset + pe->cert_size > pe->len)
		return 0;
	len = nmbl_le32(pe->buf + pe->cert_offset);
	if (len < 8 || len > pe->cert_size)
		return 0;
	p7 = d2i_PKCS7(NULL, &p, len - 8);
	if (p7 && PKCS7_type_is_signed(p7) && p7->d.sign) {
		certs = p7->d.sign->cert;
		if (sk_X509_num(certs) > 0)
			n = i2d_X509(sk_X509_value(certs, 0), ret);
	}
	PKCS7_free(p7);
	return n > 0 ? n : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct nmbl_sigdb empty;
	unsigned char *der = NULL, tbs_hash[SHA256_DIGEST_LENGTH + 16] = { 0 };
	struct nmbl_sig cert, tbs;
	struct nmbl_sigdb db = { 0 }, dbx = { 0 };
	struct nmbl_pe pe;
	char *signer = NULL;
	int n;

	if (nmbl_pe_parse(data, size, &pe) < 0)
		return 0;
	n = first_cert(&pe, &der);
	if (n > 0) {
		const unsigned char *p = der;
		X509 *x = d2i_X509(NULL, &p, n);
		unsigned char *t = NULL;
		int tlen = x ? i2d_re_X509_tbs(x, &t) : 0;

		if (tlen > 0)
			SHA256(t, (size_t)tlen, tbs_hash);
		OPENSSL_free(t);
		X509_free(x);
		cert = (struct nmbl_sig){ NMBL_SIG_X509, der, (size_t)n };
		tbs = (struct nmbl_sig){ NMBL_SIG_X509_SHA256, tbs_hash, sizeof(tbs_hash) };
		db = (struct nmbl_sigdb){ 1, &cert };
		dbx = (struct nmbl_sigdb){ 1, &tbs };
	}
	if (nmbl_pe_check_firmware(&pe, &db, &empty, &signer) == 0)
		free(signer);
	signer = NULL;
	/* Revoked, that signature must never pass. */
	if (n > 0 && nmbl_pe_check_firmware(&pe, &db, &dbx, &signer) == 0 && signer)
		__builtin_trap();
	OPENSSL_free(der);
	return 0;
}
