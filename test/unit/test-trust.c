/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * Who signed a kernel, and whether the keys kexec checks trust it: images
 * signed here with sbsign by a small PKI made with openssl (a root, an
 * intermediate, a signer, and strangers), against keyrings faked at the
 * seam with the descriptions the kernel gives those certificates (seen on
 * a real kernel: "SUBJECT: SKID", or the serial when there is no SKID).
 */
#include <errno.h>
#include <string.h>

#include "fake-sys.h"
#include "nmbl-private.h"
#include "unit.h"

static struct nmbl_ctx *ctx;

/* Fixed subject key identifiers, so that the keys' descriptions are
 * known here; the certificates' authority key identifiers follow them. */
#define ROOT_SKID "1111111111111111111111111111111111111111"
#define INT_SKID "2222222222222222222222222222222222222222"
#define SIGNER_SKID "3333333333333333333333333333333333333333"
#define STRANGER_SKID "4444444444444444444444444444444444444444"
#define ROOT_KEY "Test Root: " ROOT_SKID
#define INT_KEY "Test Intermediate: " INT_SKID
#define SIGNER_KEY "Test Signer: " SIGNER_SKID
#define STRANGER_KEY "Stranger: " STRANGER_SKID
/* Without a SKID the kernel describes a key by its serial as DER has it:
 * 0xc1 needs a leading zero byte. */
#define NO_SKID_KEY "No Skid: 00c1"

#define BUILTIN 0x0b5b2dc2
#define SECONDARY 0x1a2b3c4d
#define MACHINE 0x2e000001
#define PLATFORM 0x2f000001

static const char proc_keys[] =
	"0b5b2dc2 I------     1 perm 1f0b0000     0     0 keyring   .builtin_trusted_keys: 1\n"
	"1a2b3c4d I------     1 perm 1f0b0000     0     0 keyring   .secondary_trusted_keys: 1\n"
	"2e000001 I------     1 perm 1f0f0000     0     0 keyring   .machine: 1\n"
	"2f000001 I------     1 perm 1f0f0000     0     0 keyring   .platform: 1\n"
	"3a000001 I------     1 perm 1f0f0000     0     0 keyring   .ima: 1\n";

/* The PKI and the images, in the fixture's /pki. */
static void make_images(void)
{
	const char *dir = fixture_path("/pki");

	fixture_text("/pki/ext.cnf",
		     "[req]\ndistinguished_name = dn\n[dn]\n"
		     "[root]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = keyCertSign\n"
		     "subjectKeyIdentifier = " ROOT_SKID "\n"
		     "[int]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = keyCertSign\n"
		     "subjectKeyIdentifier = " INT_SKID "\nauthorityKeyIdentifier = keyid\n"
		     "[signer]\nbasicConstraints = CA:FALSE\nkeyUsage = digitalSignature\n"
		     "subjectKeyIdentifier = " SIGNER_SKID "\nauthorityKeyIdentifier = keyid\n"
		     "[stranger]\nsubjectKeyIdentifier = " STRANGER_SKID "\n"
		     "[impostor]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = keyCertSign\n"
		     "subjectKeyIdentifier = " INT_SKID "\n"
		     "[by-issuer]\nbasicConstraints = CA:FALSE\n"
		     "subjectKeyIdentifier = 6666666666666666666666666666666666666666\n"
		     "authorityKeyIdentifier = issuer:always\n"
		     "[forged]\nbasicConstraints = CA:FALSE\n"
		     "subjectKeyIdentifier = 5555555555555555555555555555555555555555\n"
		     "authorityKeyIdentifier = keyid\n");
	fixture_run(
		"set -e; cd '%s'; exec 2>/dev/null\n"
		"key() { openssl genrsa -out $1.key 2048; }\n"
		"csr() { openssl req -new -config ext.cnf -key $1.key -subj \"$2\" -out $1.csr; }\n"
		"for k in root int signer stranger noskid forged by-issuer; do key $k; done\n"
		"openssl req -x509 -new -config ext.cnf -extensions root -key root.key"
		" -subj '/CN=Test Root' -days 3650 -out root.crt\n"
		"csr int '/O=Test/CN=Test Intermediate'\n"
		"openssl x509 -req -in int.csr -CA root.crt -CAkey root.key -set_serial 2"
		" -days 3650 -extfile ext.cnf -extensions int -out int.crt\n"
		"csr signer '/CN=Test Signer'\n"
		"openssl x509 -req -in signer.csr -CA int.crt -CAkey int.key -set_serial 3"
		" -days 3650 -extfile ext.cnf -extensions signer -out signer.crt\n"
		"openssl req -x509 -new -config ext.cnf -extensions stranger -key stranger.key"
		" -subj '/CN=Stranger' -days 3650 -out stranger.crt\n"
		"csr noskid '/CN=No Skid'\n"
		"openssl x509 -req -in noskid.csr -signkey noskid.key -set_serial 0xc1"
		" -days 3650 -out noskid.crt\n"
		/* Names its issuer by the issuer's issuer and serial. */
		"csr by-issuer '/CN=By Issuer'\n"
		"openssl x509 -req -in by-issuer.csr -CA int.crt -CAkey int.key -set_serial 6"
		" -days 3650 -extfile ext.cnf -extensions by-issuer -out by-issuer.crt\n"
		/* Names the intermediate as its issuer, by name and key
		 * identifier, but is signed by another key. */
		"openssl req -x509 -new -config ext.cnf -extensions impostor -key stranger.key"
		" -subj '/O=Test/CN=Test Intermediate' -days 3650 -out impostor.crt\n"
		"csr forged '/CN=Forged'\n"
		"openssl x509 -req -in forged.csr -CA impostor.crt -CAkey stranger.key -set_serial 5"
		" -days 3650 -extfile ext.cnf -extensions forged -out forged.crt\n"
		"cp '%s/kernel.efi' kernel.efi; cp '%s/uki.efi' uki.efi\n"
		"sign() { sbsign --key $2.key --cert $2.crt $4 --output $3 $1 >/dev/null; }\n"
		"sign kernel.efi signer signer.efi\n"
		"sign kernel.efi signer chain.efi '--addcert int.crt'\n"
		"sign kernel.efi stranger stranger.efi\n"
		"sign kernel.efi noskid noskid.efi\n"
		"sign stranger.efi signer stranger-then-signer.efi\n"
		"sign signer.efi stranger signer-then-stranger.efi\n"
		"sign kernel.efi forged forged.efi '--addcert int.crt'\n"
		"sign kernel.efi by-issuer by-issuer.efi '--addcert int.crt'\n"
		"sign uki.efi signer uki-signed.efi\n",
		dir, CORPUS, CORPUS);
}

static const char *image(const char *name)
{
	static char path[4096];

	snprintf(path, sizeof(path), "%s/%s", fixture_path("/pki"), name);
	return path;
}

/* The keyrings hold these keys, in this order of keyrings. */
static void keys(const char *builtin, const char *machine, const char *platform)
{
	const char *desc[] = { builtin, machine, platform };
	const int32_t rings[] = { BUILTIN, MACHINE, PLATFORM };

	memset(fake.keys, 0, sizeof(fake.keys));
	fake.keyring_errno = 0;
	for (size_t i = 0; i < 3; i++) {
		fake.keys[i].keyring = rings[i];
		fake.keys[i].id = 0x30000001 + (int32_t)i;
		fake.keys[i].description = desc[i];
	}
	/* The secondary keyring links the builtin one, as the kernel's does. */
	fake.keys[3].keyring = SECONDARY;
	fake.keys[3].id = BUILTIN;
	fake.keys[3].description = ".builtin_trusted_keys";
	fake.keys[3].type = "keyring";
}

/* nmbl_image_is_trusted() of image NAME; *RET_KEY the key it names when
 * it trusts (may be NULL), checked to be NULL when it does not, and
 * untouched when it cannot tell. */
static int trusted(const char *name, char **ret_key)
{
	static char untouched[] = "untouched";
	struct nmbl_image *img = NULL;
	char *key = untouched;
	int r;

	CHECK_INT(nmbl_image_new_from_file(ctx, image(name), &img), 0);
	if (!img)
		return -EIO;
	r = nmbl_image_is_trusted(ctx, img, &key);
	nmbl_image_unref(img);
	if (r == 0)
		CHECK(key == NULL);
	if (r < 0)
		CHECK(key == untouched);
	if (r != 1)
		key = NULL;
	if (ret_key)
		*ret_key = key;
	else
		free(key);
	return r;
}

/* The signers of image NAME, joined with '|'. */
static char *signers(const char *name, int *ret_count)
{
	struct nmbl_image *img = NULL;
	char **names = NULL, *joined;
	size_t len = 0;
	FILE *out = open_memstream(&joined, &len);

	CHECK_INT(nmbl_image_new_from_file(ctx, image(name), &img), 0);
	*ret_count = img ? nmbl_image_get_signers(img, &names) : -EIO;
	for (int i = 0; i < *ret_count; i++)
		fprintf(out, "%s%s", i ? "|" : "", names[i]);
	if (*ret_count >= 0)
		CHECK(names && names[*ret_count] == NULL);
	fclose(out);
	free(names);
	nmbl_image_unref(img);
	return joined;
}

static void check_trusted_by(const char *name, const char *expected_key)
{
	char *key = NULL;

	CHECK_INT(trusted(name, &key), 1);
	CHECK_STR(key, expected_key);
	free(key);
}

static void test_signers(void)
{
	char *s;
	int n;

	s = signers("signer.efi", &n);
	CHECK_INT(n, 1);
	CHECK_STR(s, "Test Signer");
	free(s);
	/* The certificates carried along are no signers. */
	s = signers("chain.efi", &n);
	CHECK_INT(n, 1);
	CHECK_STR(s, "Test Signer");
	free(s);
	s = signers("stranger-then-signer.efi", &n);
	CHECK_INT(n, 2);
	CHECK_STR(s, "Stranger|Test Signer");
	free(s);
	s = signers("kernel.efi", &n);
	CHECK_INT(n, 0);
	CHECK_STR(s, "");
	free(s);
	/* A UKI's own signature is the firmware's: kexec checks its .linux,
	 * which nobody signed. */
	s = signers("uki-signed.efi", &n);
	CHECK_INT(n, 0);
	free(s);
}

static void test_trusted_through_the_chain(void)
{
	/* The signer's own key. */
	keys(NULL, SIGNER_KEY, NULL);
	check_trusted_by("signer.efi", SIGNER_KEY);
	/* The key that issued the signer, by its authority key identifier. */
	keys(INT_KEY, NULL, NULL);
	check_trusted_by("signer.efi", INT_KEY);
	/* Two levels up, through the intermediate the signature carries. */
	keys(NULL, NULL, ROOT_KEY);
	check_trusted_by("chain.efi", ROOT_KEY);
	/* ... which it needs: without it the chain stops at the signer. */
	CHECK_INT(trusted("signer.efi", NULL), 0);
	/* An issuer named by its own issuer and serial number. */
	check_trusted_by("by-issuer.efi", ROOT_KEY);
	/* Any of the keyrings will do. */
	keys(STRANGER_KEY, NULL, INT_KEY);
	check_trusted_by("chain.efi", INT_KEY);
	/* A self-signed certificate without SKID, described by its serial. */
	keys(NULL, NO_SKID_KEY, NULL);
	check_trusted_by("noskid.efi", NO_SKID_KEY);
	/* ... and by its name: another's serial number may be the same. */
	keys(NULL, "Someone Else: 00c1", NULL);
	CHECK_INT(trusted("noskid.efi", NULL), 0);
}

static void test_not_trusted(void)
{
	keys(ROOT_KEY, INT_KEY, SIGNER_KEY);
	/* An unknown self-signed certificate ends the chain. */
	CHECK_INT(trusted("stranger.efi", NULL), 0);
	/* Unsigned, and a UKI signed around an unsigned kernel. */
	CHECK_INT(trusted("kernel.efi", NULL), 0);
	CHECK_INT(trusted("uki-signed.efi", NULL), 0);
	/* A certificate that names the intermediate as issuer but is not
	 * signed by it: the kernel rejects the signature. */
	CHECK_INT(trusted("forged.efi", NULL), 0);
	/* Only the first signature counts: kexec reads no other. */
	CHECK_INT(trusted("stranger-then-signer.efi", NULL), 0);
	check_trusted_by("signer-then-stranger.efi", SIGNER_KEY);
	/* Only a key with the same identifier, not the same name. */
	keys("Test Signer: 3333", "Test Root: " INT_SKID "00", NULL);
	CHECK_INT(trusted("chain.efi", NULL), 0);
	/* No key in the keyrings at all; the signer's key in a keyring
	 * kexec does not check (IMA's). */
	keys(NULL, NULL, NULL);
	CHECK_INT(trusted("signer.efi", NULL), 0);
	fake.keys[0].keyring = 0x3a000001;
	fake.keys[0].description = SIGNER_KEY;
	CHECK_INT(trusted("signer.efi", NULL), 0);
	/* What is no asymmetric key is no key to trust, whatever its name. */
	fake.keys[0].keyring = MACHINE;
	fake.keys[0].type = "keyring";
	CHECK_INT(trusted("signer.efi", NULL), 0);
	fake.keys[0].type = NULL;
	CHECK_INT(trusted("signer.efi", NULL), 1);
}

static void test_cannot_tell(void)
{
	/* Keyrings that cannot be read might hold the key. */
	keys(NULL, NULL, SIGNER_KEY);
	fake.keyring_errno = -EACCES;
	CHECK_INT(trusted("signer.efi", NULL), -EACCES);
	/* An unsigned kernel is trusted by no key, readable or not. */
	CHECK_INT(trusted("kernel.efi", NULL), 0);
	fake.keyring_errno = 0;
	/* No keyring to be seen: a user other than root. */
	fixture_text("/proc/keys",
		     "3a000001 I------     1 perm 1f0f0000     0     0 keyring   .ima: 1\n");
	CHECK_INT(trusted("signer.efi", NULL), -ENOENT);
	fixture_text("/proc/keys", proc_keys);
}

static void test_malformed(void)
{
	static char *untouched[] = { NULL };
	struct nmbl_image *img = NULL;
	char **names = untouched;
	unsigned char buf[16384];
	struct nmbl_pe pe;
	size_t n;
	FILE *f;

	/* The PKCS#7's outer SEQUENCE (after the 8-byte WIN_CERTIFICATE
	 * header) made a SET. */
	f = fopen(image("signer.efi"), "rb");
	n = f ? fread(buf, 1, sizeof(buf), f) : 0;
	if (f)
		fclose(f);
	CHECK(n > 0 && n < sizeof(buf));
	CHECK_INT(nmbl_pe_parse(buf, n, &pe), 0);
	CHECK(pe.cert_size > 8);
	if (pe.cert_size <= 8)
		return;
	CHECK_INT(buf[pe.cert_offset + 8], 0x30);
	buf[pe.cert_offset + 8] = 0x31;
	fixture_write("/pki/malformed.efi", buf, n);
	keys(NULL, SIGNER_KEY, NULL);
	CHECK_INT(nmbl_image_new_from_file(ctx, image("malformed.efi"), &img), 0);
	if (!img)
		return;
	CHECK_INT(nmbl_image_get_signers(img, &names), -EBADMSG);
	CHECK(names == untouched);
	CHECK_INT(nmbl_image_is_trusted(ctx, img, NULL), 0);
	nmbl_image_unref(img);
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_signers,
		test_trusted_through_the_chain,
		test_not_trusted,
		test_cannot_tell,
		test_malformed,
		NULL,
	};

	fixture_text("/proc/keys", proc_keys);
	make_images();
	return unit_main_ctx(tests, &ctx);
}
