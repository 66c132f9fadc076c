/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * The firmware's Secure Boot check of an image, against db and dbx in a
 * fake efivarfs: UKIs made by nmbl's own mkuki and signed by sbsign with
 * keys made here, and binaries signed by Microsoft and Debian checked
 * against the db of OVMF's Microsoft variables and shim's Debian CA.
 */
#include <errno.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>

#include "nmbl-private.h"
#include "unit.h"

/* The tree's top, for dracut/mkuki and what it takes. */
#define TOP CORPUS "/../../../.."
#define STUB "/usr/lib/systemd/boot/efi/linuxx64.efi.stub"
#define HELLO "/usr/lib/efitools/x86_64-linux-gnu/HelloWorld.efi"
#define OVMF "/usr/share/OVMF"
#define SNAKEOIL_KEY "/usr/share/ovmf/PkKek-1-snakeoil.key"
#define SNAKEOIL_CERT "/usr/share/ovmf/PkKek-1-snakeoil.pem"
/* Unpacked from Debian's shim-signed and grub-efi-amd64-signed. */
#define SHIM SIGNED_TREE "/usr/lib/shim/shimx64.efi.signed"
#define GRUB SIGNED_TREE "/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed"

#define SECURITY_DB_GUID "d719b2cb-3d3a-4596-a3bc-dad00e67656f"
#define SHIM_LOCK_GUID "605dab50-e046-4300-abb6-3dd810dd8b23"
#define CERT_X509 "a5c059a1-94e4-4aa7-87b5-ab155c2bf072"
#define CERT_SHA256 "c1c41626-504c-4092-aca9-41f936934328"
#define CERT_X509_SHA256 "3bd2a492-96c0-4079-b420-fcf98ef103ed"

static struct nmbl_ctx *ctx;

static unsigned char *slurp(const char *path, size_t *ret_len)
{
	unsigned char *buf;
	long len;
	FILE *f = fopen(path, "rb");

	if (!f || fseek(f, 0, SEEK_END) < 0 || (len = ftell(f)) < 0) {
		perror(path);
		exit(2);
	}
	rewind(f);
	buf = malloc((size_t)len + 1);
	if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
		perror(path);
		exit(2);
	}
	fclose(f);
	*ret_len = (size_t)len;
	return buf;
}

/* --- signature databases, as efivarfs shows them ------------------------------ */

struct sigdb {
	size_t len;
	unsigned char buf[64 * 1024];
};

/* One EFI_SIGNATURE_LIST of one signature, owned by nobody in particular. */
static void sigdb_add(struct sigdb *db, const char *type, const void *data, size_t len)
{
	unsigned char *l = db->buf + db->len;

	if (db->len + 28 + 16 + len > sizeof(db->buf))
		abort();
	CHECK_INT(nmbl_parse_guid(type, l), 0);
	nmbl_put_le32(l + 16, (uint32_t)(28 + 16 + len));
	nmbl_put_le32(l + 20, 0);
	nmbl_put_le32(l + 24, (uint32_t)(16 + len));
	CHECK_INT(nmbl_parse_guid(NMBL_VENDOR_GUID, l + 28), 0);
	memcpy(l + 44, data, len);
	db->len += 28 + 16 + len;
}

static X509 *load_cert(const char *pem)
{
	FILE *f = fopen(pem, "r");
	X509 *x = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;

	if (f)
		fclose(f);
	if (!x) {
		fprintf(stderr, "%s: no certificate\n", pem);
		exit(2);
	}
	return x;
}

static void sigdb_add_cert(struct sigdb *db, const char *pem)
{
	X509 *x = load_cert(pem);
	unsigned char *der = NULL;
	int len = i2d_X509(x, &der);

	sigdb_add(db, CERT_X509, der, (size_t)len);
	OPENSSL_free(der);
	X509_free(x);
}

/* EFI_CERT_X509_SHA256: the TBSCertificate's hash, a revocation time. */
static void sigdb_add_tbs(struct sigdb *db, const char *pem)
{
	X509 *x = load_cert(pem);
	unsigned char *der = NULL, entry[48] = { 0 };
	int len = i2d_re_X509_tbs(x, &der);

	SHA256(der, (size_t)len, entry);
	sigdb_add(db, CERT_X509_SHA256, entry, sizeof(entry));
	OPENSSL_free(der);
	X509_free(x);
}

/* Variable NAME of GUID with attributes ATTRS holding DB, or none when DB
 * is NULL. */
static void set_guid_var(const char *guid, const char *name, uint32_t attrs,
			 const struct sigdb *db)
{
	char path[256];
	unsigned char *value = malloc(4 + (db ? db->len : 0));

	snprintf(path, sizeof(path), NMBL_EFIVARS "%s-%s", name, guid);
	if (!db) {
		remove(fixture_path(path));
		free(value);
		return;
	}
	nmbl_put_le32(value, attrs);
	memcpy(value + 4, db->buf, db->len);
	fixture_write(path, value, 4 + db->len);
	free(value);
}

static void set_var(const char *name, const struct sigdb *db)
{
	set_guid_var(SECURITY_DB_GUID, name, 0x27, db);
}

/* shim's variable NAME (boot-service and runtime access, as shim sets its
 * MokListRT). */
static void set_shim_var(const char *name, const struct sigdb *db)
{
	set_guid_var(SHIM_LOCK_GUID, name, 0x06, db);
}

static void set_dbs(const struct sigdb *db, const struct sigdb *dbx)
{
	set_var("db", db);
	set_var("dbx", dbx);
}

/* A variable of the security database in an OVMF variable store, as the
 * firmware keeps it: authenticated variable headers (EDK2's
 * AUTHENTICATED_VARIABLE_HEADER, 60 bytes), name and data after each. */
static void ovmf_var(const char *fd, const char *name, struct sigdb *ret)
{
	unsigned char want_guid[16], want_name[16] = { 0 };
	size_t len, name_len = 2 * (strlen(name) + 1);
	unsigned char *b = slurp(fd, &len);

	CHECK_INT(nmbl_parse_guid(SECURITY_DB_GUID, want_guid), 0);
	for (size_t i = 0; name[i]; i++)
		want_name[2 * i] = (unsigned char)name[i];
	for (size_t off = 0; off + 60 <= len; off += 4) {
		const unsigned char *h = b + off;
		uint32_t nlen = nmbl_le32(h + 36), dlen = nmbl_le32(h + 40);

		/* StartId 0x55aa, State VAR_ADDED. */
		if (h[0] != 0xaa || h[1] != 0x55 || h[2] != 0x3f || nlen != name_len ||
		    memcmp(h + 44, want_guid, 16) != 0 || off + 60 + nlen + dlen > len ||
		    memcmp(h + 60, want_name, nlen) != 0 || dlen > sizeof(ret->buf))
			continue;
		memcpy(ret->buf, h + 60 + nlen, dlen);
		ret->len = dlen;
		free(b);
		return;
	}
	fprintf(stderr, "%s: no variable %s\n", fd, name);
	exit(2);
}

/* --- images ------------------------------------------------------------------- */

static const char *keys; /* the fixture's directory of keys and images */

static const char *file(const char *name)
{
	static char buf[8][4096];
	static int i;

	i = (i + 1) % 8;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", keys, name);
	return buf[i];
}

static int check(const char *path, char **ret_signer)
{
	struct nmbl_image *img = NULL;
	int r;

	r = nmbl_image_new_from_file(ctx, path, &img);
	if (r < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(-r));
		exit(2);
	}
	r = nmbl_image_check_firmware(ctx, img, ret_signer);
	nmbl_image_unref(img);
	return r;
}

/* check(), where a verdict without a signer is enough. */
static int verdict(const char *path)
{
	char *signer = NULL;
	int r = check(path, &signer);

	free(signer);
	return r;
}

static void digest_of(const char *path, const char *md, unsigned char ret[NMBL_DIGEST_MAX],
		      size_t *ret_len)
{
	size_t len;
	unsigned char *b = slurp(path, &len);
	struct nmbl_pe pe;

	CHECK_INT(nmbl_pe_parse(b, len, &pe), 0);
	CHECK_INT(nmbl_pe_authenticode_digest(&pe, md, ret, ret_len), 0);
	free(b);
}

static void sha256_of(const char *path, unsigned char ret[32])
{
	unsigned char d[NMBL_DIGEST_MAX];
	size_t n = 0;

	digest_of(path, "SHA256", d, &n);
	CHECK_INT(n, 32);
	memcpy(ret, d, 32);
}

/* PATH with one byte of section NAME changed (where it holds data). */
static void change_section(const char *path, const char *name, const char *out)
{
	size_t len;
	unsigned char *b = slurp(path, &len);
	const struct nmbl_pe_section *s;
	struct nmbl_pe pe;

	CHECK_INT(nmbl_pe_parse(b, len, &pe), 0);
	s = nmbl_pe_section(&pe, name);
	CHECK(s && s->size > 16);
	if (s && s->size > 16)
		b[s->offset + 16] ^= 0x01;
	fixture_write(out + strlen(fixture_root()), b, len);
	free(b);
}

/* ---------------------------------------------------------------------------- */

static void test_signed_uki_accepted(void)
{
	struct sigdb db = { 0 }, dbx = { 0 };
	char *signer = NULL;

	/* The firmware the VM tests boot: Debian's OVMF with the test key. */
	ovmf_var(OVMF "/OVMF_VARS_4M.snakeoil.fd", "db", &db);
	ovmf_var(OVMF "/OVMF_VARS_4M.snakeoil.fd", "dbx", &dbx);
	set_dbs(&db, &dbx);
	CHECK_INT(check(file("uki-snakeoil.efi"), &signer), 0);
	CHECK_STR(signer, "SnakeOil");
	free(signer);
	signer = NULL;
	/* ret_signer may be NULL. */
	CHECK_INT(check(file("uki-snakeoil.efi"), NULL), 0);
	/* The same db from a certificate file; no dbx at all. */
	db.len = 0;
	sigdb_add_cert(&db, SNAKEOIL_CERT);
	set_dbs(&db, NULL);
	CHECK_INT(check(file("uki-snakeoil.efi"), &signer), 0);
	CHECK_STR(signer, "SnakeOil");
	free(signer);
	/* An EFI program signed the same way. */
	CHECK_INT(verdict(file("hello-snakeoil.efi")), 0);
}

static void test_other_signer_rejected(void)
{
	struct sigdb db = { 0 };
	char *signer = (char *)"untouched";

	sigdb_add_cert(&db, file("other.crt"));
	set_dbs(&db, NULL);
	CHECK_INT(check(file("uki-snakeoil.efi"), &signer), -EKEYREJECTED);
	CHECK_STR(signer, "untouched");
	/* A db of hashes only trusts no signer. */
	db.len = 0;
	sigdb_add(&db, CERT_SHA256, "0123456789abcdef0123456789abcdef", 32);
	set_dbs(&db, NULL);
	CHECK_INT(verdict(file("uki-snakeoil.efi")), -EKEYREJECTED);
	/* An empty db trusts nobody. */
	db.len = 0;
	set_dbs(&db, NULL);
	CHECK_INT(verdict(file("uki-snakeoil.efi")), -EKEYREJECTED);
}

static void test_hash_in_dbx_refused(void)
{
	struct sigdb db = { 0 }, dbx = { 0 };
	unsigned char h[32];

	sha256_of(file("uki-snakeoil.efi"), h);
	sigdb_add_cert(&db, SNAKEOIL_CERT);
	sigdb_add(&dbx, CERT_SHA256, "0123456789abcdef0123456789abcdef", 32);
	sigdb_add(&dbx, CERT_SHA256, h, sizeof(h));
	set_dbs(&db, &dbx);
	CHECK_INT(verdict(file("uki-snakeoil.efi")), -EKEYREJECTED);
	/* The signing certificate in dbx, and its TBS hash. */
	dbx.len = 0;
	sigdb_add_cert(&dbx, SNAKEOIL_CERT);
	set_dbs(&db, &dbx);
	CHECK_INT(verdict(file("uki-snakeoil.efi")), -EKEYREJECTED);
	dbx.len = 0;
	sigdb_add_tbs(&dbx, SNAKEOIL_CERT);
	set_dbs(&db, &dbx);
	CHECK_INT(verdict(file("uki-snakeoil.efi")), -EKEYREJECTED);
	/* Another certificate in dbx changes nothing. */
	dbx.len = 0;
	sigdb_add_cert(&dbx, file("other.crt"));
	sigdb_add_tbs(&dbx, file("other.crt"));
	set_dbs(&db, &dbx);
	CHECK_INT(verdict(file("uki-snakeoil.efi")), 0);
}

static void test_hash_in_db_accepted(void)
{
	struct sigdb db = { 0 }, dbx = { 0 };
	unsigned char h[32];
	char *signer = (char *)"untouched";

	sha256_of(file("uki-snakeoil.efi"), h);
	sigdb_add_cert(&db, file("other.crt"));
	sigdb_add(&db, CERT_SHA256, h, sizeof(h));
	set_dbs(&db, NULL);
	CHECK_INT(check(file("uki-snakeoil.efi"), &signer), 0);
	CHECK(signer == NULL);
	/* An unsigned image too, by its hash alone; unless dbx has it. */
	db.len = 0;
	sha256_of(file("uki.efi"), h);
	sigdb_add(&db, CERT_SHA256, h, sizeof(h));
	set_dbs(&db, NULL);
	signer = (char *)"untouched";
	CHECK_INT(check(file("uki.efi"), &signer), 0);
	CHECK(signer == NULL);
	sigdb_add(&dbx, CERT_SHA256, h, sizeof(h));
	set_dbs(&db, &dbx);
	CHECK_INT(verdict(file("uki.efi")), -EKEYREJECTED);
}

static void test_unsigned(void)
{
	struct sigdb db = { 0 };

	sigdb_add_cert(&db, SNAKEOIL_CERT);
	set_dbs(&db, NULL);
	CHECK_INT(verdict(file("uki.efi")), -ENODATA);
	/* The firmware checks the UKI, not the kernel inside: a UKI around
	 * a kernel signed by a key of db is not signed itself. */
	CHECK_INT(verdict(file("uki-signed-kernel.efi")), -ENODATA);
	CHECK_INT(verdict(HELLO), -ENODATA);
}

static void test_changed_after_signing(void)
{
	struct sigdb db = { 0 };

	sigdb_add_cert(&db, SNAKEOIL_CERT);
	set_dbs(&db, NULL);
	change_section(file("uki-snakeoil.efi"), ".linux", file("uki-changed.efi"));
	CHECK_INT(verdict(file("uki-changed.efi")), -EKEYREJECTED);
	change_section(file("uki-snakeoil.efi"), ".cmdline", file("uki-changed.efi"));
	CHECK_INT(verdict(file("uki-changed.efi")), -EKEYREJECTED);
}

/* The security directory of a signed UKI, broken one way at a time. */
static void test_malformed(void)
{
	struct sigdb db = { 0 };
	size_t len;
	unsigned char *b = slurp(file("uki-snakeoil.efi"), &len);
	const char *out = file("uki-broken.efi");
	const char *rel = out + strlen(fixture_root());
	struct nmbl_pe pe;
	unsigned char *entry;

	sigdb_add_cert(&db, SNAKEOIL_CERT);
	set_dbs(&db, NULL);
	CHECK_INT(nmbl_pe_parse(b, len, &pe), 0);
	CHECK(pe.cert_size > 0 && pe.cert_offset + pe.cert_size == len);
	entry = b + pe.cert_offset;

	/* Cut short: the directory reaches past the end. */
	fixture_write(rel, b, len - 100);
	CHECK_INT(verdict(out), -EBADMSG);
	/* An entry longer than the directory. */
	nmbl_put_le32(entry, pe.cert_size + 8);
	fixture_write(rel, b, len);
	CHECK_INT(verdict(out), -EBADMSG);
	/* An entry shorter than its header. */
	nmbl_put_le32(entry, 4);
	fixture_write(rel, b, len);
	CHECK_INT(verdict(out), -EBADMSG);
	/* An entry that leaves the rest of the directory unused. */
	nmbl_put_le32(entry, pe.cert_size - 16);
	fixture_write(rel, b, len);
	CHECK_INT(verdict(out), -EBADMSG);
	nmbl_put_le32(entry, pe.cert_size);
	/* A PKCS#7 that is none. */
	entry[8] ^= 0xff;
	fixture_write(rel, b, len);
	CHECK_INT(verdict(out), -EBADMSG);
	entry[8] ^= 0xff;
	fixture_write(rel, b, len);
	CHECK_INT(verdict(out), 0);
	/* A section's raw data past the end of the file (its size grown). */
	{
		uint64_t sec = nmbl_le32(b + 0x3c) + 24 + nmbl_le16(b + nmbl_le32(b + 0x3c) + 20);

		nmbl_put_le32(b + sec + 16, (uint32_t)len);
		fixture_write(rel, b, len);
		CHECK_INT(verdict(out), -EBADMSG);
	}
	free(b);

	/* db itself malformed: a list longer than the variable. */
	db.buf[16] = 0xff;
	set_dbs(&db, NULL);
	CHECK_INT(verdict(file("uki-snakeoil.efi")), -EBADMSG);
}

/* FILE with a WIN_CERTIFICATE of TYPE and 16 bytes of BYTE appended to
 * its security directory (made one when it has none), written to OUT. */
static void append_entry(const char *path, uint16_t type, unsigned char byte, const char *out)
{
	size_t len;
	unsigned char *b = slurp(path, &len);
	uint32_t lfanew = nmbl_le32(b + 0x3c), opt = lfanew + 24;
	uint32_t dir = opt + (nmbl_le16(b + opt) == 0x20b ? 112 : 96) + 4 * 8;
	unsigned char *n = malloc(len + 24);

	memcpy(n, b, len);
	nmbl_put_le32(n + len, 24);
	n[len + 4] = 0x00;
	n[len + 5] = 0x02;
	n[len + 6] = (unsigned char)type;
	n[len + 7] = (unsigned char)(type >> 8);
	memset(n + len + 8, byte, 16);
	if (nmbl_le32(n + dir + 4) == 0)
		nmbl_put_le32(n + dir, (uint32_t)len);
	nmbl_put_le32(n + dir + 4, nmbl_le32(n + dir + 4) + 24);
	fixture_write(out + strlen(fixture_root()), n, len + 24);
	free(n);
	free(b);
}

/* Entries beside the signatures: the firmware passes over what is no
 * signature, or no PKCS#7, when a signature it reads says yes. */
static void test_other_entries(void)
{
	struct sigdb db = { 0 };
	const char *out = file("uki-entries.efi");

	sigdb_add_cert(&db, SNAKEOIL_CERT);
	set_dbs(&db, NULL);
	/* WIN_CERT_TYPE_X509, which UEFI does not read. */
	append_entry(file("uki-snakeoil.efi"), 0x0001, 0x30, out);
	CHECK_INT(verdict(out), 0);
	append_entry(file("uki.efi"), 0x0001, 0x30, out);
	CHECK_INT(verdict(out), -ENODATA);
	/* A PKCS#7 that is none. */
	append_entry(file("uki-snakeoil.efi"), 0x0002, 0xff, out);
	CHECK_INT(verdict(out), 0);
	append_entry(file("uki.efi"), 0x0002, 0xff, out);
	CHECK_INT(verdict(out), -EBADMSG);
}

static void test_no_db(void)
{
	struct sigdb dbx = { 0 };

	set_dbs(NULL, NULL);
	CHECK_INT(verdict(file("uki-snakeoil.efi")), -ENOENT);
	CHECK_INT(verdict(file("uki.efi")), -ENOENT);
	sigdb_add_cert(&dbx, file("other.crt"));
	set_dbs(NULL, &dbx);
	CHECK_INT(verdict(file("uki-snakeoil.efi")), -ENOENT);
}

static int check_shim(const char *path, char **ret_signer)
{
	struct nmbl_image *img = NULL;
	int r;

	CHECK_INT(nmbl_image_new_from_file(ctx, path, &img), 0);
	r = nmbl_image_check_shim(ctx, img, ret_signer);
	nmbl_image_unref(img);
	return r;
}

/* shim trusts db and what it hands the OS in MokListRT (its own
 * certificate, the Machine Owner Keys), spread over MokListRT1... when
 * long; it refuses what dbx or MokListXRT revoke. */
static void test_shim_keys(void)
{
	struct sigdb db = { 0 }, mok = { 0 }, mokx = { 0 }, other = { 0 };
	char *signer = NULL;

	sigdb_add_cert(&db, file("other.crt"));
	set_dbs(&db, NULL);
	set_shim_var("MokListRT", NULL);
	/* Not started by shim: nothing to tell by. */
	CHECK_INT(check_shim(file("uki-snakeoil.efi"), NULL), -ENOENT);
	/* The key a MOK, not in db: shim starts it, the firmware would not. */
	sigdb_add_cert(&mok, SNAKEOIL_CERT);
	set_shim_var("MokListRT", &mok);
	CHECK_INT(check_shim(file("uki-snakeoil.efi"), &signer), 0);
	CHECK_STR(signer, "SnakeOil");
	free(signer);
	CHECK_INT(verdict(file("uki-snakeoil.efi")), -EKEYREJECTED);
	/* In db, with a MokListRT that does not hold it. */
	CHECK_INT(check_shim(file("uki-other.efi"), NULL), 0);
	/* Revoked by shim's own list. */
	sigdb_add_cert(&mokx, SNAKEOIL_CERT);
	set_shim_var("MokListXRT", &mokx);
	CHECK_INT(check_shim(file("uki-snakeoil.efi"), NULL), -EKEYREJECTED);
	set_shim_var("MokListXRT", NULL);
	/* The second of shim's mirrors of a long list. */
	sigdb_add_cert(&other, file("root.crt"));
	set_shim_var("MokListRT", &other);
	set_shim_var("MokListRT1", &mok);
	CHECK_INT(check_shim(file("uki-snakeoil.efi"), NULL), 0);
	set_shim_var("MokListRT1", NULL);
	CHECK_INT(check_shim(file("uki-snakeoil.efi"), NULL), -EKEYREJECTED);
	/* The unsigned one, whoever shim trusts. */
	CHECK_INT(check_shim(file("uki.efi"), NULL), -ENODATA);
	set_shim_var("MokListRT", NULL);
	set_dbs(NULL, NULL);
}

/* Firmware trusts a certificate of db whatever its place in the chain,
 * and whatever its dates and key usage. */
static void test_chains(void)
{
	struct sigdb db = { 0 }, dbx = { 0 };
	char *signer = NULL;

	sigdb_add_cert(&db, file("root.crt"));
	set_dbs(&db, NULL);
	CHECK_INT(check(file("uki-leaf.efi"), &signer), 0);
	CHECK_STR(signer, "nmbl test leaf");
	free(signer);
	signer = NULL;
	/* The intermediate as the only certificate in db. */
	db.len = 0;
	sigdb_add_cert(&db, file("inter.crt"));
	set_dbs(&db, NULL);
	CHECK_INT(check(file("uki-leaf.efi"), &signer), 0);
	CHECK_STR(signer, "nmbl test leaf");
	free(signer);
	/* Without the intermediate in the signature, the root is too far. */
	db.len = 0;
	sigdb_add_cert(&db, file("root.crt"));
	set_dbs(&db, NULL);
	CHECK_INT(verdict(file("uki-leaf-alone.efi")), -EKEYREJECTED);
	/* The intermediate revoked, as a certificate or by its TBS hash. */
	sigdb_add_cert(&dbx, file("inter.crt"));
	set_dbs(&db, &dbx);
	CHECK_INT(verdict(file("uki-leaf.efi")), -EKEYREJECTED);
	dbx.len = 0;
	sigdb_add_tbs(&dbx, file("inter.crt"));
	set_dbs(&db, &dbx);
	CHECK_INT(verdict(file("uki-leaf.efi")), -EKEYREJECTED);
	/* The root of db revoked by its TBS hash. */
	dbx.len = 0;
	sigdb_add_tbs(&dbx, file("root.crt"));
	set_dbs(&db, &dbx);
	CHECK_INT(verdict(file("uki-leaf.efi")), -EKEYREJECTED);

	/* Expired long ago, and for TLS servers only. */
	db.len = 0;
	sigdb_add_cert(&db, file("expired.crt"));
	sigdb_add_cert(&db, file("server.crt"));
	set_dbs(&db, NULL);
	CHECK_INT(verdict(file("uki-expired.efi")), 0);
	CHECK_INT(verdict(file("uki-server.efi")), 0);
}

/* The hash is the one sbsign signed and osslsigncode computes, for a UKI
 * and for an EFI program whose sections leave gaps in the file. */
static void test_hash_as_tools_compute(void)
{
	const char *images[] = { "uki-snakeoil.efi", "hello-snakeoil.efi" };

	for (size_t i = 0; i < ELEMENTSOF(images); i++) {
		unsigned char d[NMBL_DIGEST_MAX];
		char hex[2 * NMBL_DIGEST_MAX + 1] = "", *tool;
		size_t n = 0, tlen;

		digest_of(file(images[i]), "SHA256", d, &n);
		for (size_t j = 0; j < n; j++)
			sprintf(hex + 2 * j, "%02X", d[j]);
		fixture_run("osslsigncode verify -in %s 2>/dev/null | "
			    "sed -n 's/^Calculated message digest *: *\\([0-9A-F]*\\).*/\\1/p' >%s",
			    file(images[i]), file("digest.txt"));
		tool = (char *)slurp(file("digest.txt"), &tlen);
		tool[tlen] = '\0';
		tool[strcspn(tool, "\n")] = '\0';
		CHECK_STR(hex, tool);
		free(tool);
		fixture_run("sbverify --cert %s %s >/dev/null 2>&1", SNAKEOIL_CERT, file(images[i]));
	}
	/* Other digests than SHA-256 are there for signatures that ask. */
	{
		unsigned char d[NMBL_DIGEST_MAX];
		size_t n = 0;

		digest_of(file("uki-snakeoil.efi"), "SHA384", d, &n);
		CHECK_INT(n, 48);
		digest_of(file("uki-snakeoil.efi"), "SHA1", d, &n);
		CHECK_INT(n, 20);
	}
}

/* Real signed binaries: shim by Microsoft (two signatures, the UEFI CA
 * 2011's and 2023's), against the db and dbx OVMF enrolls with
 * Microsoft's keys; GRUB by Debian, against the CA shim carries. */
static void test_real_signed(void)
{
	struct sigdb ms_db = { 0 }, ms_dbx = { 0 }, debian = { 0 };
	char *signer = NULL;
	unsigned char *vc;
	size_t vc_len;

	ovmf_var(OVMF "/OVMF_VARS_4M.ms.fd", "db", &ms_db);
	ovmf_var(OVMF "/OVMF_VARS_4M.ms.fd", "dbx", &ms_dbx);
	set_dbs(&ms_db, &ms_dbx);
	CHECK_INT(check(SHIM, &signer), 0);
	CHECK_STR(signer, "Microsoft Windows UEFI Driver Publisher");
	free(signer);
	signer = NULL;
	CHECK_INT(verdict(GRUB), -EKEYREJECTED);
	CHECK_INT(verdict(file("uki-snakeoil.efi")), -EKEYREJECTED);

	/* shim's own certificate (.vendor_cert, a long name objcopy finds:
	 * sizes and offsets of the allowed and denied lists, then the allowed
	 * DER certificate). */
	fixture_run("objcopy -O binary --only-section=.vendor_cert %s %s", SHIM,
		    file("vendor_cert"));
	vc = slurp(file("vendor_cert"), &vc_len);
	CHECK(vc_len >= 16 && nmbl_le32(vc + 8) + (uint64_t)nmbl_le32(vc) <= vc_len);
	if (vc_len >= 16 && nmbl_le32(vc + 8) + (uint64_t)nmbl_le32(vc) <= vc_len)
		sigdb_add(&debian, CERT_X509, vc + nmbl_le32(vc + 8), nmbl_le32(vc));
	free(vc);
	set_dbs(&debian, &ms_dbx);
	CHECK_INT(check(GRUB, &signer), 0);
	CHECK_STR(signer, "Debian Secure Boot Signer 2022 - grub2");
	free(signer);
	signer = NULL;
	CHECK_INT(verdict(SHIM), -EKEYREJECTED);
	/* The kernel the build unpacked: a bzImage's PE header, signed by
	 * Debian (KERNEL_MODULES is .../lib/modules/<release>/kernel). */
	{
		const char *mods = strstr(KERNEL_MODULES, "/lib/modules/");
		char vmlinuz[4096];

		CHECK(mods != NULL);
		if (mods) {
			mods += strlen("/lib/modules/");
			snprintf(vmlinuz, sizeof(vmlinuz), "%.*s/boot/vmlinuz-%.*s",
				 (int)(strstr(KERNEL_MODULES, "/lib/modules/") - KERNEL_MODULES),
				 KERNEL_MODULES, (int)strcspn(mods, "/"), mods);
			CHECK_INT(check(vmlinuz, &signer), 0);
			CHECK_STR(signer, "Debian Secure Boot Signer 2022 - linux");
			free(signer);
			set_dbs(&ms_db, &ms_dbx);
			CHECK_INT(verdict(vmlinuz), -EKEYREJECTED);
		}
	}
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_signed_uki_accepted,
		test_other_signer_rejected,
		test_hash_in_dbx_refused,
		test_hash_in_db_accepted,
		test_unsigned,
		test_changed_after_signing,
		test_malformed,
		test_other_entries,
		test_no_db,
		test_shim_keys,
		test_chains,
		test_hash_as_tools_compute,
		test_real_signed,
		NULL,
	};
	static char dir[4096];
	const char *req = "openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650";

	for (const char *p = SHIM ":" GRUB ":" STUB ":" HELLO ":" SNAKEOIL_KEY; *p;) {
		size_t n = strcspn(p, ":");
		char path[4096];

		snprintf(path, sizeof(path), "%.*s", (int)n, p);
		if (access(path, R_OK) != 0) {
			fprintf(stderr, "%s: missing (make deps installs it, the build unpacks it)\n",
				path);
			return 2;
		}
		p += n + (p[n] == ':');
	}
	snprintf(dir, sizeof(dir), "%s/keys", fixture_root());
	keys = dir;
	fixture_run("mkdir -p %s", keys);
	fixture_run("openssl rsa -in %s -passin pass:snakeoil -out %s 2>/dev/null", SNAKEOIL_KEY,
		    file("snakeoil.key"));
	/* Another signer; a root, an intermediate and a leaf; an expired
	 * signer and a TLS server's. */
	fixture_run("cd %s && %s -keyout other.key -out other.crt -subj '/CN=nmbl other' 2>/dev/null",
		    keys, req);
	fixture_run("cd %s && %s -keyout root.key -out root.crt -subj '/CN=nmbl test root' "
		    "-addext basicConstraints=critical,CA:TRUE 2>/dev/null", keys, req);
	fixture_run("cd %s && openssl req -new -newkey rsa:2048 -nodes -keyout inter.key "
		    "-subj '/CN=nmbl test intermediate' -out inter.csr 2>/dev/null && "
		    "printf 'basicConstraints=critical,CA:TRUE\\n' >ca.ext && "
		    "openssl x509 -req -in inter.csr -CA root.crt -CAkey root.key -set_serial 2 "
		    "-days 3650 -sha256 -extfile ca.ext -out inter.crt 2>/dev/null", keys);
	fixture_run("cd %s && openssl req -new -newkey rsa:2048 -nodes -keyout leaf.key "
		    "-subj '/CN=nmbl test leaf' -out leaf.csr 2>/dev/null && "
		    "printf 'extendedKeyUsage=codeSigning\\n' >leaf.ext && "
		    "openssl x509 -req -in leaf.csr -CA inter.crt -CAkey inter.key -set_serial 3 "
		    "-days 3650 -sha256 -extfile leaf.ext -out leaf.crt 2>/dev/null", keys);
	fixture_run("cd %s && %s -keyout server.key -out server.crt -subj '/CN=nmbl server' "
		    "-addext extendedKeyUsage=serverAuth -addext keyUsage=keyEncipherment "
		    "2>/dev/null", keys, req);
	/* openssl ca sets any dates: 2000 to 2001. */
	fixture_run("cd %s && mkdir -p ca && : >ca/index.txt && echo 01 >ca/serial && "
		    "printf '[ca]\\ndefault_ca=d\\n[d]\\ndir=ca\\ndatabase=ca/index.txt\\n"
		    "new_certs_dir=ca\\nserial=ca/serial\\ndefault_md=sha256\\npolicy=p\\n"
		    "[p]\\ncommonName=supplied\\n' >ca.cnf && "
		    "openssl req -new -newkey rsa:2048 -nodes -keyout expired.key "
		    "-subj '/CN=nmbl expired' -out expired.csr 2>/dev/null && "
		    "openssl ca -batch -config ca.cnf -selfsign -keyfile expired.key -in expired.csr "
		    "-startdate 20000101000000Z -enddate 20010101000000Z -notext "
		    "-out expired.crt 2>/dev/null", keys);

	/* A UKI as nmbl makes it, around the corpus kernel, and signed. */
	fixture_run("cd %s && printf 'initrd' >initrd && "
		    "%s/dracut/mkuki %s %s/kernel.efi initrd 'quiet nmbl.test=authenticode' "
		    "%s/dracut/os-release %s/dracut/sbat.csv uki.efi && "
		    "%s/dracut/mkuki %s %s/kernel-signed.efi initrd 'quiet' %s/dracut/os-release "
		    "%s/dracut/sbat.csv uki-signed-kernel.efi",
		    keys, TOP, STUB, CORPUS, TOP, TOP, TOP, STUB, CORPUS, TOP, TOP);
	fixture_run("cd %s && sbsign --key snakeoil.key --cert %s --output uki-snakeoil.efi uki.efi "
		    ">/dev/null 2>&1 && "
		    "sbsign --key snakeoil.key --cert %s --output hello-snakeoil.efi %s >/dev/null 2>&1 && "
		    "sbsign --key leaf.key --cert leaf.crt --addcert inter.crt "
		    "--output uki-leaf.efi uki.efi >/dev/null 2>&1 && "
		    "sbsign --key leaf.key --cert leaf.crt --output uki-leaf-alone.efi uki.efi "
		    ">/dev/null 2>&1 && "
		    "sbsign --key expired.key --cert expired.crt --output uki-expired.efi uki.efi "
		    ">/dev/null 2>&1 && "
		    "sbsign --key server.key --cert server.crt --output uki-server.efi uki.efi "
		    ">/dev/null 2>&1 && "
		    "sbsign --key other.key --cert other.crt --output uki-other.efi uki.efi "
		    ">/dev/null 2>&1",
		    keys, SNAKEOIL_CERT, SNAKEOIL_CERT, HELLO);
	return unit_main_ctx(tests, &ctx);
}
