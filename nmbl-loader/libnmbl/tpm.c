/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * Measured boot: the PCR extensions GRUB makes on EFI, made here through
 * the kernel's TPM 2.0 resource manager, and logged for the booted system.
 *
 * GRUB asks the firmware (TCG2 HashLogExtendEvent) to hash a buffer into
 * every active bank of a PCR and to log an EV_IPL event whose data is a
 * description and its NUL.  Linux offers no way to append to the firmware's
 * log, so nmbl keeps logs of its own and appends to them under one lock,
 * extension by extension: systemd's userspace measurement log (JSON-SEQ, as
 * systemd-pcrextend writes it) and a binary TCG event log that starts as a
 * copy of the firmware's, so that tpm2_eventlog replays it to the PCRs.
 */
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "nmbl-private.h"

#define TPM_ST_NO_SESSIONS 0x8001
#define TPM_ST_SESSIONS 0x8002
#define TPM_CC_PCR_EXTEND 0x00000182
#define TPM_CC_GET_CAPABILITY 0x0000017a
#define TPM_CAP_PCRS 0x00000005
#define TPM_RS_PW 0x40000009
#define TPM_HEADER_SIZE 10
/* Far more than a command nmbl sends or a response it reads. */
#define TPM_BUFFER_SIZE 4096

/* The event type GRUB logs, and TCG's for the log's header. */
#define EV_NO_ACTION 0x03
#define EV_IPL 0x0d

/* A PC's TPM has 24 PCRs. */
#define TPM_PCRS 24

static const struct tpm_alg {
	uint16_t id;
	const char *name; /* TCG's and systemd's name */
	const char *md;   /* OpenSSL's */
	size_t size;
} tpm_algs[] = {
	{ 0x0004, "sha1", "SHA1", 20 },
	{ 0x000b, "sha256", "SHA256", 32 },
	{ 0x000c, "sha384", "SHA384", 48 },
	{ 0x000d, "sha512", "SHA512", 64 },
	{ 0x0012, "sm3_256", "SM3", 32 },
};

enum tpm_state {
	TPM_UNKNOWN,
	TPM_ABSENT,
	TPM_PRESENT,
};

struct nmbl_tpm {
	enum tpm_state state;
	int fd;
	/* A measurement failed: the logs no longer tell what the PCRs
	 * hold, or an event is missing from both, so no later one is made
	 * and nothing boots. */
	bool failed;
	/* The banks the TPM has allocated, each extended every time. */
	size_t n_banks;
	const struct tpm_alg *banks[ELEMENTSOF(tpm_algs)];
};

/* One event's digests, a bank each, in the TPM's order. */
struct digests {
	size_t n;
	struct {
		const struct tpm_alg *alg;
		unsigned char d[NMBL_DIGEST_MAX];
	} v[ELEMENTSOF(tpm_algs)];
};

static void put_be16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

static void put_be32(unsigned char *p, uint32_t v)
{
	put_be16(p, (uint16_t)(v >> 16));
	put_be16(p + 2, (uint16_t)v);
}

static const struct tpm_alg *tpm_alg(uint16_t id)
{
	for (size_t i = 0; i < ELEMENTSOF(tpm_algs); i++)
		if (tpm_algs[i].id == id)
			return &tpm_algs[i];
	return NULL;
}

/* Send CMD (its size already in its header), check the response's size
 * and code: -EBADE for anything but success, the device's own error too
 * (a TPM that went away). */
static int tpm_transmit(const struct nmbl_ctx *ctx, int fd, unsigned char *cmd,
			size_t len, unsigned char resp[TPM_BUFFER_SIZE], size_t *ret_len)
{
	ssize_t n = nmbl_sys_tpm_transmit(fd, cmd, len, resp, TPM_BUFFER_SIZE);
	uint32_t rc;

	if (n < 0) {
		nmbl_dbg(ctx, "TPM command 0x%x: %s", nmbl_be32(cmd + 6), strerror((int)-n));
		return -EBADE;
	}
	if (n < TPM_HEADER_SIZE || nmbl_be32(resp + 2) != (uint32_t)n)
		return -EBADE;
	rc = nmbl_be32(resp + 6);
	if (rc != 0) {
		nmbl_dbg(ctx, "TPM command 0x%x: response code 0x%x", nmbl_be32(cmd + 6), rc);
		return -EBADE;
	}
	*ret_len = (size_t)n;
	return 0;
}

int nmbl_tpm_parse_banks(const void *buf, size_t len, uint16_t *ret_algs, size_t max,
			 size_t *ret_n)
{
	const unsigned char *resp = buf;
	size_t off = TPM_HEADER_SIZE + 1, count, n = 0;

	/* The header, moreData, capability, then a TPML_PCR_SELECTION. */
	if (len < off + 8 || nmbl_be32(resp + TPM_HEADER_SIZE + 1) != TPM_CAP_PCRS)
		return -EBADMSG;
	count = nmbl_be32(resp + off + 4);
	off += 8;
	for (size_t i = 0; i < count; i++) {
		bool allocated = false;
		uint16_t id;
		size_t size;

		if (len - off < 3)
			return -EBADMSG;
		id = nmbl_be16(resp + off);
		size = resp[off + 2];
		off += 3;
		if (len - off < size)
			return -EBADMSG;
		for (size_t j = 0; j < size; j++)
			allocated |= resp[off + j] != 0;
		off += size;
		if (!allocated)
			continue;
		if (n == max)
			return -EBADMSG;
		ret_algs[n++] = id;
	}
	*ret_n = n;
	return 0;
}

/*
 * The banks with at least one PCR allocated (TPM2_GetCapability of
 * TPM_CAP_PCRS).  A bank nmbl cannot hash is one an attacker could extend
 * to any value: -EPROTONOSUPPORT, and nothing boots.
 */
static int tpm_get_banks(const struct nmbl_ctx *ctx, struct nmbl_tpm *t)
{
	unsigned char cmd[22], resp[TPM_BUFFER_SIZE];
	uint16_t algs[ELEMENTSOF(t->banks)];
	size_t len, n;
	int r;

	put_be16(cmd, TPM_ST_NO_SESSIONS);
	put_be32(cmd + 2, sizeof(cmd));
	put_be32(cmd + 6, TPM_CC_GET_CAPABILITY);
	put_be32(cmd + 10, TPM_CAP_PCRS);
	put_be32(cmd + 14, 0);
	put_be32(cmd + 18, 1);
	r = tpm_transmit(ctx, t->fd, cmd, sizeof(cmd), resp, &len);
	if (r < 0)
		return r;
	if (nmbl_tpm_parse_banks(resp, len, algs, ELEMENTSOF(algs), &n) < 0 || n == 0)
		return -EBADE;
	t->n_banks = 0;
	for (size_t i = 0; i < n; i++) {
		const struct tpm_alg *alg = tpm_alg(algs[i]);

		if (!alg || !EVP_get_digestbyname(alg->md)) {
			nmbl_dbg(ctx, "the TPM has a PCR bank of algorithm 0x%04x", algs[i]);
			return -EPROTONOSUPPORT;
		}
		t->banks[t->n_banks++] = alg;
	}
	return 0;
}

/*
 * The TPM nmbl measures into, opened on first use.  Linux shows a TPM as
 * /sys/class/tpm/tpm0 once its driver is bound; the firmware announces a
 * TPM 2.0 in ACPI's TPM2 table whether a driver is bound or not, so a TPM
 * that the firmware has and Linux cannot reach is an error, not an absent
 * TPM.  A TPM 1.2 gets nothing (nmbl speaks TPM 2.0 only).
 */
static int tpm_open(struct nmbl_ctx *ctx, struct nmbl_tpm **ret)
{
	_cleanup_free_ char *dev = NULL, *acpi = NULL;
	struct nmbl_tpm *t = ctx->tpm;
	char major[8];
	bool announced;
	int r;

	if (!t) {
		t = calloc(1, sizeof(*t));
		if (!t)
			return -ENOMEM;
		t->fd = -1;
		ctx->tpm = t;
	}
	if (t->state != TPM_UNKNOWN) {
		*ret = t;
		return 0;
	}
	acpi = nmbl_path(ctx, "/sys/firmware/acpi/tables/TPM2");
	dev = nmbl_path(ctx, "/dev/tpmrm0");
	if (!acpi || !dev)
		return -ENOMEM;
	announced = access(acpi, F_OK) == 0;
	r = nmbl_read_small(ctx, "/sys/class/tpm/tpm0/tpm_version_major", major, sizeof(major));
	if (r >= 0 && strcmp(major, "2") != 0) {
		nmbl_notice(ctx, "a TPM %s.x is present: nmbl measures into a TPM 2.0 only", major);
		t->state = TPM_ABSENT;
		*ret = t;
		return 0;
	}
	if (r == -ENOENT && !announced) {
		t->state = TPM_ABSENT;
		*ret = t;
		return 0;
	}
	if (r < 0 && r != -ENOENT)
		return r;
	r = nmbl_sys_tpm_open(dev);
	if (r < 0) {
		nmbl_dbg(ctx, "the firmware has a TPM 2.0, but '%s' cannot be opened", dev);
		return -EUNATCH;
	}
	t->fd = r;
	r = tpm_get_banks(ctx, t);
	if (r < 0) {
		close(t->fd);
		t->fd = -1;
		return r;
	}
	t->state = TPM_PRESENT;
	*ret = t;
	return 0;
}

void nmbl_tpm_release(struct nmbl_ctx *ctx)
{
	if (!ctx->tpm)
		return;
	if (ctx->tpm->fd >= 0)
		close(ctx->tpm->fd);
	free(ctx->tpm);
	ctx->tpm = NULL;
}

NMBL_EXPORT int nmbl_tpm_present(struct nmbl_ctx *ctx)
{
	struct nmbl_tpm *t;
	int r;

	if (!ctx)
		return -EINVAL;
	r = tpm_open(ctx, &t);
	if (r < 0)
		return r;
	return t->state == TPM_PRESENT;
}

NMBL_EXPORT void nmbl_set_measure(struct nmbl_ctx *ctx, bool measure)
{
	if (ctx)
		ctx->measure = measure;
}

/* The TPM to measure into: 1 and *RET when the caller measures and there
 * is one, 0 when not. */
static int measuring_tpm(struct nmbl_ctx *ctx, struct nmbl_tpm **ret)
{
	int r;

	if (!ctx->measure)
		return 0;
	r = tpm_open(ctx, ret);
	if (r < 0)
		return r;
	return (*ret)->state == TPM_PRESENT;
}

int nmbl_tpm_measuring(struct nmbl_ctx *ctx)
{
	struct nmbl_tpm *t;

	return measuring_tpm(ctx, &t);
}

/* Hashing contexts, one for each of the TPM's banks. */
struct hashing {
	size_t n;
	EVP_MD_CTX *c[ELEMENTSOF(tpm_algs)];
};

static void hashing_done(struct hashing *h)
{
	for (size_t i = 0; i < h->n; i++)
		EVP_MD_CTX_free(h->c[i]);
	h->n = 0;
}

static int hashing_start(const struct nmbl_tpm *t, struct hashing *h)
{
	*h = (struct hashing){ 0 };
	for (size_t i = 0; i < t->n_banks; i++) {
		h->c[i] = EVP_MD_CTX_new();
		if (!h->c[i])
			return -ENOMEM;
		h->n++;
		if (EVP_DigestInit_ex(h->c[i], EVP_get_digestbyname(t->banks[i]->md), NULL) != 1)
			return -EIO;
	}
	return 0;
}

static int hashing_update(struct hashing *h, const void *data, size_t len)
{
	for (size_t i = 0; i < h->n; i++)
		if (EVP_DigestUpdate(h->c[i], data, len) != 1)
			return -EIO;
	return 0;
}

static int hashing_finish(const struct nmbl_tpm *t, struct hashing *h, struct digests *ret)
{
	ret->n = 0;
	for (size_t i = 0; i < h->n; i++) {
		unsigned n;

		if (EVP_DigestFinal_ex(h->c[i], ret->v[i].d, &n) != 1 || n != t->banks[i]->size)
			return -EIO;
		ret->v[i].alg = t->banks[i];
		ret->n++;
	}
	return 0;
}

static int digest_buffer(const struct nmbl_tpm *t, const void *data, size_t len,
			 struct digests *ret)
{
	_cleanup_(hashing_done) struct hashing h = { 0 };
	int r;

	r = hashing_start(t, &h);
	if (r < 0)
		return r;
	r = hashing_update(&h, data, len);
	if (r < 0)
		return r;
	return hashing_finish(t, &h, ret);
}

/* TPM2_PCR_Extend of PCR with every bank's digest, under the empty
 * password the PCRs of a PC take (TPM_RS_PW). */
static int tpm_extend(const struct nmbl_ctx *ctx, const struct nmbl_tpm *t, unsigned pcr,
		      const struct digests *d)
{
	unsigned char cmd[TPM_BUFFER_SIZE], resp[TPM_BUFFER_SIZE];
	size_t off, len;

	put_be16(cmd, TPM_ST_SESSIONS);
	put_be32(cmd + 6, TPM_CC_PCR_EXTEND);
	put_be32(cmd + 10, pcr);
	/* The authorization area: a password session with no password. */
	put_be32(cmd + 14, 9);
	put_be32(cmd + 18, TPM_RS_PW);
	put_be16(cmd + 22, 0); /* nonce */
	cmd[24] = 0;           /* session attributes */
	put_be16(cmd + 25, 0); /* password */
	put_be32(cmd + 27, (uint32_t)d->n);
	off = 31;
	for (size_t i = 0; i < d->n; i++) {
		put_be16(cmd + off, d->v[i].alg->id);
		memcpy(cmd + off + 2, d->v[i].d, d->v[i].alg->size);
		off += 2 + d->v[i].alg->size;
	}
	put_be32(cmd + 2, (uint32_t)off);
	return tpm_transmit(ctx, t->fd, cmd, off, resp, &len);
}

/*
 * The logs.  NMBL_TPM_LOG is systemd's: each record RFC 7464's record
 * separator, a CEL-JSON object, a newline; flock(2) on it orders the
 * writers, as systemd does.  NMBL_TPM_EVENT_LOG is the firmware's log
 * (securityfs) with nmbl's TCG_PCR_EVENT2 records after it.
 */
#define FIRMWARE_LOG "/sys/kernel/security/tpm0/binary_bios_measurements"
/* A firmware's log is tens of KiB; its final-events part is bounded too. */
#define FIRMWARE_LOG_MAX (1024 * 1024)

static int open_log(const struct nmbl_ctx *ctx, const char *path, bool *ret_new)
{
	_cleanup_free_ char *full = nmbl_path(ctx, path);
	_cleanup_close_ int fd = -1;
	struct stat st;
	char *slash;

	if (!full)
		return -ENOMEM;
	/* The directories, as systemd makes /run/log/systemd. */
	for (slash = strchr(full + strlen(ctx->root) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		if (mkdir(full, 0755) < 0 && errno != EEXIST)
			return -errno;
		*slash = '/';
	}
	fd = open(full, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	*ret_new = st.st_size == 0;
	return TAKE_FD(fd);
}

static void hex(const unsigned char *d, size_t len, char *ret)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		ret[2 * i] = digits[d[i] >> 4];
		ret[2 * i + 1] = digits[d[i] & 15];
	}
	ret[2 * len] = '\0';
}

/* S as a JSON string's contents: quotes, backslashes and control
 * characters escaped; other bytes as they are (GRUB's strings are UTF-8
 * or bytes; a consumer that wants to compare takes the digest). */
static int json_escape(FILE *f, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	return ferror(f) ? -EIO : 0;
}

struct event {
	unsigned pcr;
	uint32_t type;
	/* What the event log holds as the event's data. */
	const void *data;
	size_t len;
	/* systemd's content for NMBL_TPM_LOG: a phase string, or (NULL)
	 * the event's type and data as TCG's PC client events are. */
	const char *phase;
};

static int json_record(const struct event *e, const struct digests *d, char **ret,
		       size_t *ret_len)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int r = 0;

	f = open_memstream(&buf, &len);
	if (!f)
		return -ENOMEM;
	fprintf(f, "\x1e{\"pcr\":%u,\"digests\":[", e->pcr);
	for (size_t i = 0; i < d->n; i++) {
		char h[2 * NMBL_DIGEST_MAX + 1];

		hex(d->v[i].d, d->v[i].alg->size, h);
		fprintf(f, "%s{\"hashAlg\":\"%s\",\"digest\":\"%s\"}", i ? "," : "",
			d->v[i].alg->name, h);
	}
	if (e->phase) {
		fputs("],\"content_type\":\"systemd\",\"content\":{\"string\":\"", f);
		r = json_escape(f, e->phase, strlen(e->phase));
		fputs("\",\"eventType\":\"phase\"}}\n", f);
	} else {
		/* CEL's pcclient_std content: the event data as a string
		 * here, without the NUL GRUB logs after it. */
		size_t n = strnlen(e->data, e->len);

		fprintf(f, "],\"content_type\":\"pcclient_std\",\"content\":{\"event_type\":%u,"
			   "\"event_data\":\"", e->type);
		r = json_escape(f, e->data, n);
		fputs("\"}}\n", f);
	}
	if (fclose(f) != 0 || r < 0)
		return -ENOMEM;
	*ret_len = len;
	*ret = TAKE_PTR(buf);
	return 0;
}

/* A TCG_PCR_EVENT2, little-endian as the firmware's. */
static int binary_record(const struct event *e, const struct digests *d, unsigned char **ret,
			 size_t *ret_len)
{
	size_t len = 12 + 4 + e->len, off;
	unsigned char *p;

	for (size_t i = 0; i < d->n; i++)
		len += 2 + d->v[i].alg->size;
	p = malloc(len);
	if (!p)
		return -ENOMEM;
	nmbl_put_le32(p, e->pcr);
	nmbl_put_le32(p + 4, e->type);
	nmbl_put_le32(p + 8, (uint32_t)d->n);
	off = 12;
	for (size_t i = 0; i < d->n; i++) {
		nmbl_put_le16(p + off, d->v[i].alg->id);
		memcpy(p + off + 2, d->v[i].d, d->v[i].alg->size);
		off += 2 + d->v[i].alg->size;
	}
	nmbl_put_le32(p + off, (uint32_t)e->len);
	memcpy(p + off + 4, e->data, e->len);
	*ret = p;
	*ret_len = len;
	return 0;
}

/*
 * The header of a crypto-agile log, for a machine whose firmware left none
 * in securityfs: a TCG_PCR_EVENT (SHA-1 format) of type EV_NO_ACTION
 * holding TCG_EfiSpecIdEvent ("Spec ID Event03", the banks' digest sizes).
 */
static int spec_id_event(const struct nmbl_tpm *t, unsigned char **ret, size_t *ret_len)
{
	size_t body = 16 + 4 + 4 + 4 + 4 * t->n_banks + 1, len = 32 + body;
	unsigned char *p = calloc(1, len), *b;

	if (!p)
		return -ENOMEM;
	nmbl_put_le32(p, 0);
	nmbl_put_le32(p + 4, EV_NO_ACTION);
	/* 20 bytes of zero digest */
	nmbl_put_le32(p + 28, (uint32_t)body);
	b = p + 32;
	memcpy(b, "Spec ID Event03", 16);
	nmbl_put_le32(b + 16, 0); /* platform class: client */
	b[20] = 0;                /* version 2.0, errata 2 */
	b[21] = 2;
	b[22] = 2;
	b[23] = 2; /* UINTN of 8 bytes */
	nmbl_put_le32(b + 24, (uint32_t)t->n_banks);
	for (size_t i = 0; i < t->n_banks; i++) {
		nmbl_put_le16(b + 28 + 4 * i, t->banks[i]->id);
		nmbl_put_le16(b + 30 + 4 * i, (uint16_t)t->banks[i]->size);
	}
	/* no vendor data: the last byte, its size, stays 0 */
	*ret = p;
	*ret_len = len;
	return 0;
}

/* A new binary log starts as the firmware's. */
static int start_binary_log(const struct nmbl_ctx *ctx, const struct nmbl_tpm *t, int fd)
{
	_cleanup_free_ char *fw = NULL;
	_cleanup_free_ unsigned char *hdr = NULL;
	size_t len;
	int r;

	r = nmbl_read_file(ctx, FIRMWARE_LOG, FIRMWARE_LOG_MAX, &fw, &len);
	if (r >= 0 && len > 0)
		return nmbl_write_full(fd, fw, len);
	nmbl_notice(ctx, "no firmware event log in securityfs (%s): nmbl's own log starts without it",
		    strerror(r < 0 ? -r : ENODATA));
	r = spec_id_event(t, &hdr, &len);
	if (r < 0)
		return r;
	return nmbl_write_full(fd, hdr, len);
}

/*
 * Extend E->PCR with D and append E to both logs, the JSON log locked
 * throughout so that the logs' order is the TPM's.  An extension that
 * happened but could not be logged is an error too: the logs no longer
 * replay to the PCRs.
 */
static int extend_and_log(struct nmbl_ctx *ctx, const struct nmbl_tpm *t, const struct event *e,
			  const struct digests *d)
{
	_cleanup_close_ int json = -1, bin = -1;
	_cleanup_free_ char *jrec = NULL;
	_cleanup_free_ unsigned char *brec = NULL;
	size_t jlen, blen;
	bool json_new, bin_new;
	int r;

	r = json_record(e, d, &jrec, &jlen);
	if (r < 0)
		return r;
	r = binary_record(e, d, &brec, &blen);
	if (r < 0)
		return r;
	json = open_log(ctx, NMBL_TPM_LOG, &json_new);
	if (json < 0)
		return json;
	if (flock(json, LOCK_EX) < 0)
		return -errno;
	bin = open_log(ctx, NMBL_TPM_EVENT_LOG, &bin_new);
	if (bin < 0)
		return bin;
	if (bin_new) {
		r = start_binary_log(ctx, t, bin);
		if (r < 0)
			return r;
	}
	/* systemd's mark of a log being written: set while the PCR and its
	 * log disagree, left set when they end up disagreeing. */
	if (fchmod(json, 01600) < 0)
		return -errno;
	r = tpm_extend(ctx, t, e->pcr, d);
	if (r < 0) {
		(void)fchmod(json, 0600);
		return r;
	}
	r = nmbl_write_full(json, jrec, jlen);
	if (r >= 0)
		r = nmbl_write_full(bin, brec, blen);
	if (r >= 0 && fchmod(json, 0600) < 0)
		r = -errno;
	return r;
}

static int measure_event(struct nmbl_ctx *ctx, struct nmbl_tpm *t, const struct event *e,
			 const struct digests *d)
{
	int r;

	if (t->failed)
		return -EBADE;
	r = extend_and_log(ctx, t, e, d);
	if (r < 0)
		t->failed = true;
	return r;
}

static bool valid_pcr(unsigned pcr)
{
	return pcr < TPM_PCRS;
}

/* GRUB's event for DESCRIPTION: the text and its NUL. */
static struct event grub_event(unsigned pcr, const char *description)
{
	return (struct event){ .pcr = pcr, .type = EV_IPL, .data = description,
			       .len = strlen(description) + 1 };
}

NMBL_EXPORT int nmbl_measure(struct nmbl_ctx *ctx, unsigned pcr, const void *data, size_t len,
			     const char *description)
{
	struct nmbl_tpm *t;
	struct digests d;
	struct event e;
	int r;

	if (!ctx || (!data && len) || !description || !valid_pcr(pcr))
		return -EINVAL;
	r = measuring_tpm(ctx, &t);
	if (r <= 0)
		return r;
	r = digest_buffer(t, data ? data : "", len, &d);
	if (r < 0)
		return r;
	e = grub_event(pcr, description);
	return measure_event(ctx, t, &e, &d);
}

int nmbl_measure_phase(struct nmbl_ctx *ctx, const char *phase)
{
	struct nmbl_tpm *t;
	struct digests d;
	struct event e = { .pcr = NMBL_PCR_KERNEL_BOOT, .type = EV_IPL, .data = phase,
			   .len = strlen(phase), .phase = phase };
	int r;

	r = measuring_tpm(ctx, &t);
	if (r <= 0)
		return r;
	/* systemd-pcrphase's digest: the string without its NUL. */
	r = digest_buffer(t, phase, strlen(phase), &d);
	if (r < 0)
		return r;
	return measure_event(ctx, t, &e, &d);
}

/*
 * FD's whole contents measured into PCR under NAME, as GRUB measures a
 * file it reads; with COPY_TO >= 0, copied there as they are hashed, so
 * that what is loaded is what was measured.  Returns 0 without a TPM
 * (nothing copied).  A file that grows past MAX while it is read is
 * -EFBIG: the copy is in memory.
 */
int nmbl_measure_fd(struct nmbl_ctx *ctx, unsigned pcr, int fd, const char *name, int copy_to,
		    size_t max)
{
	_cleanup_(hashing_done) struct hashing h = { 0 };
	char buf[64 * 1024];
	struct nmbl_tpm *t;
	struct digests d;
	struct event e;
	size_t total = 0;
	int r;

	r = measuring_tpm(ctx, &t);
	if (r <= 0)
		return r;
	r = hashing_start(t, &h);
	if (r < 0)
		return r;
	if (lseek(fd, 0, SEEK_SET) < 0)
		return -errno;
	for (;;) {
		ssize_t n = nmbl_read_full(fd, buf, sizeof(buf));

		if (n <= 0) {
			if (n < 0)
				return (int)n;
			break;
		}
		total += (size_t)n;
		if (total > max)
			return -EFBIG;
		r = hashing_update(&h, buf, (size_t)n);
		if (r >= 0 && copy_to >= 0)
			r = nmbl_write_full(copy_to, buf, (size_t)n);
		if (r < 0)
			return r;
	}
	r = hashing_finish(t, &h, &d);
	if (r < 0)
		return r;
	e = grub_event(pcr, name);
	return measure_event(ctx, t, &e, &d);
}

/* The IMA measurement list, which explains PCR 10, as the kernel keeps
 * it; a few hundred entries in an initramfs. */
#define IMA_LOG "/sys/kernel/security/ima/binary_runtime_measurements"
#define IMA_LOG_MAX (16 * 1024 * 1024)
/* What the kexec'd system finds in its initramfs. */
#define HANDOVER_DIR ".extra/nmbl"

/* One "newc" member: header, name, data, each padded to 4 bytes. */
static int cpio_member(FILE *f, unsigned ino, const char *name, unsigned mode, const void *data,
		       size_t len)
{
	static const char zeros[4];
	size_t namesize = strlen(name) + 1;

	fprintf(f, "070701%08X%08X%08X%08X%08X%08X%08zX%08X%08X%08X%08X%08zX%08X", ino, mode,
		0, 0, 1, 0, len, 0, 0, 0, 0, namesize, 0);
	fwrite(name, 1, namesize, f);
	fwrite(zeros, 1, (4 - (110 + namesize) % 4) % 4, f);
	if (len) {
		fwrite(data, 1, len, f);
		fwrite(zeros, 1, (4 - len % 4) % 4, f);
	}
	return ferror(f) ? -EIO : 0;
}

/* A log's contents so far with RECORD after them. */
static int log_with(const struct nmbl_ctx *ctx, const char *path, const void *start,
		    size_t start_len, const void *record, size_t len, char **ret,
		    size_t *ret_len)
{
	_cleanup_free_ char *buf = NULL;
	size_t n = 0;
	char *b;
	int r;

	r = nmbl_read_file(ctx, path, FIRMWARE_LOG_MAX * 4, &buf, &n);
	if (r == -ENOENT || (r >= 0 && n == 0)) {
		free(buf);
		buf = malloc(start_len + 1);
		if (!buf)
			return -ENOMEM;
		memcpy(buf, start, start_len);
		n = start_len;
	} else if (r < 0) {
		return r;
	}
	b = realloc(buf, n + len);
	if (!b)
		return -ENOMEM;
	buf = b;
	memcpy(buf + n, record, len);
	*ret_len = n + len;
	*ret = TAKE_PTR(buf);
	return 0;
}

int nmbl_tpm_handover_cpio(struct nmbl_ctx *ctx, const char *phase, void **ret, size_t *ret_len)
{
	_cleanup_free_ char *jrec = NULL, *json = NULL, *bin = NULL, *fw = NULL, *ima = NULL,
			    *cpio = NULL;
	_cleanup_free_ unsigned char *brec = NULL, *hdr = NULL;
	size_t jlen, blen, json_len, bin_len, fw_len = 0, ima_len = 0, hdr_len = 0, cpio_len = 0;
	struct event e = { .pcr = NMBL_PCR_KERNEL_BOOT, .type = EV_IPL, .data = phase,
			   .len = strlen(phase), .phase = phase };
	struct nmbl_tpm *t;
	struct digests d;
	bool started;
	FILE *f;
	int r;

	r = measuring_tpm(ctx, &t);
	if (r < 0)
		return r;
	if (r == 0) {
		*ret = NULL;
		*ret_len = 0;
		return 0;
	}
	r = digest_buffer(t, phase, strlen(phase), &d);
	if (r >= 0)
		r = json_record(&e, &d, &jrec, &jlen);
	if (r >= 0)
		r = binary_record(&e, &d, &brec, &blen);
	if (r < 0)
		return r;
	/* A binary log not started yet starts as start_binary_log() would;
	 * one started (the kernel was measured) is not read twice. */
	{
		_cleanup_free_ char *path = nmbl_path(ctx, NMBL_TPM_EVENT_LOG);
		struct stat st;

		if (!path)
			return -ENOMEM;
		started = stat(path, &st) == 0 && st.st_size > 0;
	}
	if (!started && (nmbl_read_file(ctx, FIRMWARE_LOG, FIRMWARE_LOG_MAX, &fw, &fw_len) < 0 ||
			 fw_len == 0)) {
		r = spec_id_event(t, &hdr, &hdr_len);
		if (r < 0)
			return r;
	}
	r = log_with(ctx, NMBL_TPM_LOG, "", 0, jrec, jlen, &json, &json_len);
	if (r >= 0)
		r = log_with(ctx, NMBL_TPM_EVENT_LOG, hdr ? (void *)hdr : fw, hdr ? hdr_len : fw_len,
			     brec, blen, &bin, &bin_len);
	if (r < 0)
		return r;
	if (nmbl_read_file(ctx, IMA_LOG, IMA_LOG_MAX, &ima, &ima_len) < 0)
		ima_len = 0;

	f = open_memstream(&cpio, &cpio_len);
	if (!f)
		return -ENOMEM;
	r = cpio_member(f, 1, ".extra", 040755, NULL, 0);
	if (r >= 0)
		r = cpio_member(f, 2, HANDOVER_DIR, 040755, NULL, 0);
	if (r >= 0)
		r = cpio_member(f, 3, HANDOVER_DIR "/tpm2-measure.log", 0100644, json, json_len);
	if (r >= 0)
		r = cpio_member(f, 4, HANDOVER_DIR "/tpm2-event-log.bin", 0100644, bin, bin_len);
	if (r >= 0 && ima_len)
		r = cpio_member(f, 5, HANDOVER_DIR "/ima-binary-runtime-measurements", 0100644,
				ima, ima_len);
	if (r >= 0)
		r = cpio_member(f, 0, NMBL_CPIO_TRAILER, 0, NULL, 0);
	if (fclose(f) != 0 || r < 0)
		return -ENOMEM;
	*ret_len = cpio_len;
	*ret = TAKE_PTR(cpio);
	return 0;
}
