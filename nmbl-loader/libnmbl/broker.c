/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * The broker protocol's messages (libnmbl.h names the requests): what the
 * unprivileged menu sends, read and checked here before the privileged
 * side acts on any of it.  A message is one SOCK_SEQPACKET datagram: a
 * header of two 32-bit words in the machine's byte order (the request, or
 * the result of a reply, and the number of fields), then that many
 * NUL-terminated fields and nothing after them.  Each request has a fixed
 * number of fields, each field a shape; whatever breaks them is -EBADMSG,
 * and the request is refused whole.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "nmbl-private.h"

enum field {
	F_PCR,     /* GRUB's: 8 (strings) or 9 (files), no other */
	F_DISK,    /* "/dev/NAME", a block device's name */
	F_SECTOR,  /* a decimal number of 512-byte sectors */
	F_PATH,    /* an absolute path inside a file system, no ".." */
	F_TEXT,    /* any text (a GRUB name, a description, an entry's id) */
	F_CMDLINE, /* a kernel command line as GRUB's linux makes it: BOOT_IMAGE=
		      first, within NMBL_CMDLINE_MAX */
	F_URL,     /* tftp://, http:// or https://, printable ASCII, no space */
};

static const struct {
	bool known;
	unsigned n;
	enum field fields[5];
} requests[] = {
	[NMBL_BROKER_MEASURE] = { true, 2, { F_PCR, F_TEXT } },
	[NMBL_BROKER_KERNEL] = { true, 5, { F_DISK, F_SECTOR, F_PATH, F_TEXT, F_CMDLINE } },
	[NMBL_BROKER_INITRD] = { true, 5, { F_DISK, F_SECTOR, F_PATH, F_TEXT, F_SECTOR } },
	[NMBL_BROKER_BOOT] = { true, 1, { F_TEXT } },
	[NMBL_BROKER_CHAINLOAD] = { true, 3, { F_DISK, F_SECTOR, F_PATH } },
	[NMBL_BROKER_FIRMWARE_SETUP] = { true, 0, { 0 } },
	[NMBL_BROKER_ENTRY_REQUESTS] = { true, 0, { 0 } },
	[NMBL_BROKER_MENU_SHOWN] = { true, 0, { 0 } },
	[NMBL_BROKER_GRUBENV_WRITE] = { true, 3, { F_DISK, F_SECTOR, F_PATH } },
	[NMBL_BROKER_FETCH] = { true, 1, { F_URL } },
	[NMBL_BROKER_KERNEL_URL] = { true, 3, { F_URL, F_TEXT, F_CMDLINE } },
	[NMBL_BROKER_INITRD_URL] = { true, 3, { F_URL, F_TEXT, F_SECTOR } },
	[NMBL_BROKER_CANCEL] = { true, 0, { 0 } },
};
_Static_assert(ELEMENTSOF(requests[0].fields) <= NMBL_BROKER_FIELDS_MAX, "fields");

#define HEADER_SIZE 8
/* How GRUB's linux starts every command line it makes: what follows is
 * what GRUB measures, as "kernel_cmdline: " and that. */
#define BOOT_IMAGE "BOOT_IMAGE="
#define CMDLINE_EVENT "kernel_cmdline: "

static bool valid_number(const char *s, uint64_t *ret)
{
	uint64_t v = 0;

	if (!*s || (s[0] == '0' && s[1]))
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*ret = v;
	return true;
}

static bool valid_path(const char *s)
{
	if (s[0] != '/')
		return false;
	for (const char *p = s; (p = strstr(p, "/..")); p += 3)
		if (p[3] == '/' || p[3] == '\0')
			return false;
	return true;
}

/* What nmbl-fetch reads, and nothing a shell or a URL parser could take
 * another way: a scheme it knows, a host, visible ASCII only. */
static bool valid_url(const char *s, size_t len)
{
	static const char *const schemes[] = { "tftp://", "http://", "https://" };
	bool known = false;

	if (len > NMBL_URL_MAX)
		return false;
	for (size_t i = 0; i < ELEMENTSOF(schemes); i++)
		if (strncmp(s, schemes[i], strlen(schemes[i])) == 0 && s[strlen(schemes[i])] &&
		    s[strlen(schemes[i])] != '/')
			known = true;
	if (!known)
		return false;
	for (; *s; s++)
		if (*s < 0x21 || *s > 0x7e)
			return false;
	return true;
}

static bool valid_field(enum field f, const char *s, size_t len)
{
	uint64_t v;

	switch (f) {
	case F_PCR:
		return valid_number(s, &v) &&
		       (v == NMBL_PCR_GRUB_STRINGS || v == NMBL_PCR_GRUB_FILES);
	case F_DISK:
		return strncmp(s, "/dev/", 5) == 0 && nmbl_valid_block_name(s + 5);
	case F_SECTOR:
		return valid_number(s, &v) && v <= UINT64_MAX / 512;
	case F_PATH:
		return valid_path(s);
	case F_TEXT:
		return true;
	case F_CMDLINE:
		return len < NMBL_CMDLINE_MAX && strncmp(s, BOOT_IMAGE, strlen(BOOT_IMAGE)) == 0;
	case F_URL:
		return valid_url(s, len);
	}
	return false;
}

int nmbl_broker_parse(const void *buf, size_t len, struct nmbl_broker_message *ret)
{
	const char *p = (const char *)buf + HEADER_SIZE, *end = (const char *)buf + len;
	uint32_t type, n;

	if (len < HEADER_SIZE || len > NMBL_BROKER_MESSAGE_MAX)
		return -EBADMSG;
	memcpy(&type, buf, 4);
	memcpy(&n, (const char *)buf + 4, 4);
	if (type >= ELEMENTSOF(requests) || !requests[type].known || requests[type].n != n)
		return -EBADMSG;
	for (uint32_t i = 0; i < n; i++) {
		size_t flen = strnlen(p, (size_t)(end - p));

		if (p + flen == end || !valid_field(requests[type].fields[i], p, flen))
			return -EBADMSG;
		ret->fields[i] = p;
		p += flen + 1;
	}
	if (p != end)
		return -EBADMSG;
	ret->request = (enum nmbl_broker_request)type;
	ret->n_fields = n;
	return 0;
}

int nmbl_broker_build(uint32_t word, const char *const *fields, size_t n, void *buf,
		      size_t size, size_t *ret_len)
{
	char *p = (char *)buf + HEADER_SIZE;
	uint32_t count = (uint32_t)n;

	if (size < HEADER_SIZE || n > NMBL_BROKER_FIELDS_MAX)
		return -EINVAL;
	memcpy(buf, &word, 4);
	memcpy((char *)buf + 4, &count, 4);
	for (size_t i = 0; i < n; i++) {
		size_t flen = strlen(fields[i]) + 1;

		if ((size_t)((char *)buf + size - p) < flen)
			return -E2BIG;
		memcpy(p, fields[i], flen);
		p += flen;
	}
	*ret_len = (size_t)(p - (char *)buf);
	return 0;
}

/* The reply's strings, at most. */
#define REPLY_FIELDS_MAX 2
/* What a request may send along: sealed, so that what the broker reads
 * cannot change or vanish under it. */
#define DATA_SEALS (F_SEAL_SHRINK | F_SEAL_WRITE)
/* GRUB's environment block: its first line, and its size (one KiB as
 * grub-editenv makes it; GRUB writes back whatever size it found). */
#define ENVBLK_SIGNATURE "# GRUB Environment Block\n"
#define ENVBLK_MAX (64 * 1024)
#define FIEMAP_EXTENTS_MAX 16

static int send_message(int fd, uint32_t word, const char *const *fields, size_t n,
			int data_fd)
{
	_cleanup_free_ char *buf = malloc(NMBL_BROKER_MESSAGE_MAX);
	char control[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	size_t len;
	int r;

	if (!buf)
		return -ENOMEM;
	r = nmbl_broker_build(word, fields, n, buf, NMBL_BROKER_MESSAGE_MAX, &len);
	if (r < 0)
		return r;
	iov = (struct iovec){ .iov_base = buf, .iov_len = len };
	if (data_fd >= 0) {
		struct cmsghdr *c;

		msg.msg_control = control;
		msg.msg_controllen = sizeof(control);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &data_fd, sizeof(int));
	}
	for (;;) {
		ssize_t k = sendmsg(fd, &msg, MSG_NOSIGNAL);

		if (k >= 0)
			return 0;
		if (errno != EINTR)
			return errno == EPIPE ? -ECONNRESET : -errno;
	}
}

/* One datagram into BUF (NMBL_BROKER_MESSAGE_MAX), and the descriptor
 * sent with it, if one was (*RET_FD, else -1; any more are closed). 0 at
 * the end of the conversation, -EBADMSG for a datagram cut short. */
static ssize_t receive_message(int fd, void *buf, int *ret_fd)
{
	char control[CMSG_SPACE(4 * sizeof(int))];
	struct iovec iov = { .iov_base = buf, .iov_len = NMBL_BROKER_MESSAGE_MAX };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			      .msg_controllen = sizeof(control) };
	ssize_t n;

	*ret_fd = -1;
	do
		n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int got;

			memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*ret_fd < 0)
				*ret_fd = got;
			else
				close(got);
		}
	}
	if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		return -EBADMSG;
	return n;
}

NMBL_EXPORT int nmbl_broker_call(int fd, enum nmbl_broker_request request,
				 const char *const *fields, size_t n_fields, int data_fd,
				 char **ret_reply, size_t n_reply)
{
	return nmbl_broker_call_full(fd, request, fields, n_fields, data_fd, NULL, NULL, NULL,
				     ret_reply, n_reply);
}

/* A PROGRESS message's two numbers, into PROGRESS; what it returns. */
static int heard_progress(const char *buf, size_t len,
			  int (*progress)(void *data, uint64_t done, uint64_t total), void *data)
{
	const char *p = buf + 8, *end = buf + len;
	uint64_t v[2] = { 0, 0 };
	uint32_t n;

	memcpy(&n, buf + 4, 4);
	for (uint32_t i = 0; i < n && i < 2 && p < end; i++) {
		size_t flen = strnlen(p, (size_t)(end - p));

		if (p + flen == end || !valid_number(p, &v[i]))
			return 0;
		p += flen + 1;
	}
	return progress ? progress(data, v[0], v[1]) : 0;
}

NMBL_EXPORT int nmbl_broker_call_full(int fd, enum nmbl_broker_request request,
				      const char *const *fields, size_t n_fields, int data_fd,
				      int (*progress)(void *data, uint64_t done, uint64_t total),
				      void *progress_data, int *ret_fd, char **ret_reply,
				      size_t n_reply)
{
	_cleanup_free_ char *buf = malloc(NMBL_BROKER_MESSAGE_MAX);
	const char *p, *end;
	char *got[REPLY_FIELDS_MAX] = { NULL };
	uint32_t n;
	int32_t result;
	int extra = -1;
	ssize_t len;
	int r;

	if (fd < 0 || n_reply > REPLY_FIELDS_MAX || (n_reply && !ret_reply))
		return -EINVAL;
	if (!buf)
		return -ENOMEM;
	r = send_message(fd, (uint32_t)request, fields, n_fields, data_fd);
	if (r < 0)
		return r;
	for (bool cancelled = false;;) {
		uint32_t word;

		len = receive_message(fd, buf, &extra);
		if (len == 0)
			return -ECONNRESET;
		if (len < 0)
			return (int)len;
		if (len < 8) {
			if (extra >= 0)
				close(extra);
			return -EBADMSG;
		}
		memcpy(&word, buf, 4);
		if (word != NMBL_BROKER_PROGRESS)
			break;
		if (extra >= 0)
			close(TAKE_FD(extra));
		if (!cancelled && heard_progress(buf, (size_t)len, progress, progress_data) < 0) {
			cancelled = true;
			r = send_message(fd, NMBL_BROKER_CANCEL, NULL, 0, -1);
			if (r < 0)
				return r;
		}
	}
	memcpy(&result, buf, 4);
	memcpy(&n, buf + 4, 4);
	p = buf + 8;
	end = buf + len;
	for (uint32_t i = 0; i < n; i++) {
		size_t flen = strnlen(p, (size_t)(end - p));

		if (p + flen == end)
			goto bad;
		if (i < n_reply && !(got[i] = strdup(p)))
			goto nomem;
		p += flen + 1;
	}
	if (p != end || result > 0x10000 || result < -4095)
		goto bad;
	for (size_t i = 0; i < n_reply; i++)
		ret_reply[i] = got[i];
	for (size_t i = n_reply; i < REPLY_FIELDS_MAX; i++)
		free(got[i]);
	if (ret_fd)
		*ret_fd = TAKE_FD(extra);
	else if (extra >= 0)
		close(TAKE_FD(extra));
	return result;
bad:
	r = -EBADMSG;
	goto fail;
nomem:
	r = -ENOMEM;
fail:
	for (size_t i = 0; i < REPLY_FIELDS_MAX; i++)
		free(got[i]);
	if (extra >= 0)
		close(extra);
	return r;
}

struct nmbl_broker {
	struct nmbl_ctx *ctx;
	int fd;
	/* The kernel KERNEL held, on nmbl's mount, GRUB's name for it and
	 * the command line measured with it, which is the one booted. */
	char *kernel;
	char *kernel_name;
	char *cmdline;
	char **initrds;
	size_t n_initrds;
	/* The files the network gave for the kernel and initrds above
	 * (/proc/self/fd/N), held open: what was measured is what loads. */
	int *held;
	size_t n_held;
	bool from_network;
	/* Set when nmbl was started from the network: how to fetch. */
	struct nmbl_fetch_options *net;
	/* The entry BOOT prepared, recorded for the booted system once the
	 * hand-over is kept. */
	char *entry;
	enum nmbl_broker_outcome outcome;
	bool keep;
};

NMBL_EXPORT int nmbl_broker_new(struct nmbl_ctx *ctx, int fd, struct nmbl_broker **ret)
{
	struct nmbl_broker *b;

	if (!ctx || fd < 0 || !ret)
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->ctx = nmbl_ref(ctx);
	b->fd = fd;
	*ret = b;
	return 0;
}

static void forget_initrds(struct nmbl_broker *b)
{
	for (size_t i = 0; i < b->n_initrds; i++)
		free(b->initrds[i]);
	free(b->initrds);
	b->initrds = NULL;
	b->n_initrds = 0;
}

static void forget_kernel(struct nmbl_broker *b)
{
	free(b->kernel);
	free(b->kernel_name);
	free(b->cmdline);
	b->kernel = b->kernel_name = b->cmdline = NULL;
	forget_initrds(b);
	for (size_t i = 0; i < b->n_held; i++)
		close(b->held[i]);
	free(b->held);
	b->held = NULL;
	b->n_held = 0;
	b->from_network = false;
}

NMBL_EXPORT struct nmbl_broker *nmbl_broker_free(struct nmbl_broker *b)
{
	if (!b)
		return NULL;
	if (!b->keep) {
		if (b->outcome == NMBL_BROKER_KEXEC)
			(void)nmbl_unload(b->ctx);
		if (b->outcome == NMBL_BROKER_DIRECT)
			(void)nmbl_switch_root_undo(b->ctx);
		(void)nmbl_umount_all(b->ctx);
	}
	forget_kernel(b);
	free(b->entry);
	if (b->net)
		free((char *)b->net->ca_file);
	free(b->net);
	nmbl_unref(b->ctx);
	free(b);
	return NULL;
}

NMBL_EXPORT int nmbl_broker_set_network(struct nmbl_broker *b,
					const struct nmbl_fetch_options *options)
{
	struct nmbl_fetch_options *o;

	if (!b || !options)
		return -EINVAL;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	*o = *options;
	o->progress = NULL;
	o->data = NULL;
	if (options->ca_file && !(o->ca_file = strdup(options->ca_file))) {
		free(o);
		return -ENOMEM;
	}
	if (b->net)
		free((char *)b->net->ca_file);
	free(b->net);
	b->net = o;
	return 0;
}

NMBL_EXPORT enum nmbl_broker_outcome nmbl_broker_get_outcome(const struct nmbl_broker *b)
{
	return b ? b->outcome : NMBL_BROKER_NOTHING;
}

NMBL_EXPORT int nmbl_broker_keep(struct nmbl_broker *b)
{
	if (!b)
		return -EINVAL;
	b->keep = true;
	/* The booted system learns which entry booted it: once a boot, now
	 * that nothing but the hand-over itself can fail. */
	if (b->outcome != NMBL_BROKER_KEXEC && b->outcome != NMBL_BROKER_DIRECT)
		return 0;
	return nmbl_set_loader_entry(b->ctx, b->entry && *b->entry ? b->entry : NULL);
}

static uint64_t number_of(const char *s)
{
	/* Checked by nmbl_broker_parse(). */
	return strtoull(s, NULL, 10);
}

/* TEXT into OUT (SIZE bytes, NUL-terminated, cut short to fit), each
 * control character as "\xNN" and a backslash as "\\", as systemd's
 * cescape() writes them: a kernel's name or a server's answer, which the
 * menu or the network chose, stays one line of the log, and can forge
 * neither another line nor a terminal's escape sequence. */
static void escape_line(const char *text, char *out, size_t size)
{
	size_t n = 0;

	for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
		char esc[5];
		size_t k;

		if (*p < 0x20 || *p == 0x7f)
			k = (size_t)snprintf(esc, sizeof(esc), "\\x%02x", *p);
		else if (*p == '\\')
			k = (size_t)snprintf(esc, sizeof(esc), "\\\\");
		else
			k = (size_t)snprintf(esc, sizeof(esc), "%c", *p);
		if (n + k >= size)
			break;
		memcpy(out + n, esc, k);
		n += k;
	}
	out[n] = '\0';
}

/* A line in the kernel's log, which a direct boot hands on to the booted
 * system's journal: how the system was booted. */
static void kmsg(const struct nmbl_ctx *ctx, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void kmsg(const struct nmbl_ctx *ctx, const char *fmt, ...)
{
	_cleanup_free_ char *path = nmbl_path(ctx, "/dev/kmsg");
	char text[1024], line[1024];
	va_list ap;
	size_t n;
	int k, fd;

	va_start(ap, fmt);
	k = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (k < 0 || !path)
		return;
	escape_line(text, line, sizeof(line) - 1);
	n = strlen(line);
	line[n++] = '\n';
	fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return;
	if (write(fd, line, n) < 0)
		nmbl_dbg(ctx, "cannot write to the kernel log");
	close(fd);
}

/* The data a request sent along: a sealed file of at most MAX bytes, read
 * into a malloc'ed *RET (NUL-terminated) of *RET_LEN bytes. */
static int read_data(int fd, size_t max, char **ret, size_t *ret_len)
{
	struct stat st;
	int seals;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return -EBADMSG;
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & DATA_SEALS) != DATA_SEALS)
		return -EBADMSG;
	return nmbl_read_fd(fd, max, ret, ret_len);
}

static int do_measure(struct nmbl_broker *b, const struct nmbl_broker_message *m, int data)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int r;

	/* The command line is measured by the broker, as it boots it
	 * (do_kernel()): a menu's word for it would let a menu measure one
	 * line and boot another. */
	if (strncmp(m->fields[1], CMDLINE_EVENT, strlen(CMDLINE_EVENT)) == 0)
		return -EPERM;
	r = read_data(data, nmbl_file_max(), &buf, &len);
	if (r < 0)
		return r;
	return nmbl_measure(b->ctx, (unsigned)number_of(m->fields[0]), buf, len, m->fields[1]);
}

/* DISK's partition at START mounted, and PATH on it, malloc'ed. */
static int host_path(struct nmbl_broker *b, const char *disk, const char *start,
		     const char *path, char **ret)
{
	_cleanup_free_ char *mountpoint = NULL;
	int r = nmbl_mount_partition(b->ctx, disk, number_of(start), &mountpoint);

	if (r < 0)
		return r;
	if (asprintf(ret, "%s%s", mountpoint, path) < 0)
		return -ENOMEM;
	return 0;
}

/* While a file comes: the menu hears how far it is, and may cancel it
 * (CANCEL, never answered).  Anything else it sends meanwhile ends the
 * fetch as a cancel does. */
static int on_fetch_progress(void *data, uint64_t done, uint64_t total)
{
	struct nmbl_broker *b = data;
	char d[24], t[24];
	const char *fields[2] = { d, t };
	struct pollfd p = { .fd = b->fd, .events = POLLIN };

	snprintf(d, sizeof(d), "%" PRIu64, done);
	snprintf(t, sizeof(t), "%" PRIu64, total);
	if (send_message(b->fd, NMBL_BROKER_PROGRESS, fields, 2, -1) < 0)
		return -ECANCELED;
	if (poll(&p, 1, 0) > 0) {
		_cleanup_free_ char *buf = malloc(NMBL_BROKER_MESSAGE_MAX);
		_cleanup_close_ int extra = -1;

		if (buf)
			(void)receive_message(b->fd, buf, &extra);
		return -ECANCELED;
	}
	return 0;
}

/* URL into a sealed memory file, *RET_FD; *RET_ERROR the helper's
 * sentence when it failed. */
static int fetch(struct nmbl_broker *b, const char *url, int *ret_fd, char **ret_error)
{
	struct nmbl_fetch_options o;

	/* Only a network boot reads the network: a disk's grub.cfg naming
	 * (tftp) on a machine started from disk gets GRUB's answer when it
	 * has no network card up. */
	if (!b->net)
		return -ENETUNREACH;
	o = *b->net;
	o.progress = on_fetch_progress;
	o.data = b;
	return nmbl_fetch(b->ctx, url, &o, ret_fd, ret_error);
}

static int do_fetch(struct nmbl_broker *b, const struct nmbl_broker_message *m, int *reply_fd,
		    char *reply[REPLY_FIELDS_MAX])
{
	int r = fetch(b, m->fields[0], reply_fd, &reply[0]);

	if (r < 0)
		kmsg(b->ctx, "<6>nmbl: %s: %s", m->fields[0], reply[0] ? reply[0] : strerror(-r));
	return r;
}

/* URL fetched and held: its path, /proc/self/fd/N, in *RET_PATH. */
static int hold_url(struct nmbl_broker *b, const char *url, char **ret_path,
		    char *reply[REPLY_FIELDS_MAX])
{
	_cleanup_close_ int fd = -1;
	int *list, r;

	list = reallocarray(b->held, b->n_held + 1, sizeof(*list));
	if (!list)
		return -ENOMEM;
	b->held = list;
	r = fetch(b, url, &fd, &reply[1]);
	if (r < 0) {
		reply[0] = strdup("fetch");
		kmsg(b->ctx, "<6>nmbl: %s: %s", url, reply[1] ? reply[1] : strerror(-r));
		return r;
	}
	if (asprintf(ret_path, "/proc/self/fd/%d", fd) < 0)
		return -ENOMEM;
	b->held[b->n_held++] = TAKE_FD(fd);
	return 0;
}

/*
 * The kernel and its command line, measured as GRUB's linux measures them
 * on EFI (the file into PCR 9, then "kernel_cmdline: " and the line after
 * BOOT_IMAGE= into PCR 8) and held: BOOT boots this very line.
 */
static int do_kernel(struct nmbl_broker *b, const struct nmbl_broker_message *m,
		     char *reply[REPLY_FIELDS_MAX])
{
	bool url = m->request == NMBL_BROKER_KERNEL_URL;
	const char *line = m->fields[url ? 2 : 4];
	_cleanup_free_ char *path = NULL, *name = strdup(m->fields[url ? 1 : 3]),
			    *cmdline = strdup(line), *event = NULL;
	const char *measured = line + strlen(BOOT_IMAGE);
	int r;

	forget_kernel(b);
	if (!name || !cmdline || asprintf(&event, CMDLINE_EVENT "%s", measured) < 0)
		return -ENOMEM;
	if (url)
		r = hold_url(b, m->fields[0], &path, reply);
	else
		r = host_path(b, m->fields[0], m->fields[1], m->fields[2], &path);
	if (r < 0)
		return r;
	b->from_network = url;
	r = nmbl_measure_kernel(b->ctx, path, name);
	if (r < 0)
		return r;
	r = nmbl_measure(b->ctx, NMBL_PCR_GRUB_STRINGS, measured, strlen(measured), event);
	if (r < 0)
		return r;
	b->kernel = TAKE_PTR(path);
	b->kernel_name = TAKE_PTR(name);
	b->cmdline = TAKE_PTR(cmdline);
	return 0;
}

static int do_initrd(struct nmbl_broker *b, const struct nmbl_broker_message *m,
		     char *reply[REPLY_FIELDS_MAX])
{
	bool url = m->request == NMBL_BROKER_INITRD_URL;
	_cleanup_free_ char *path = NULL;
	char **list;
	int r;

	if (!b->kernel)
		return -ENOENT;
	/* A new list, as GRUB's initrd command starts one: what the last
	 * list measured is held no more, and is neither loaded nor
	 * unpacked for a hand-over. */
	if (number_of(m->fields[url ? 2 : 4]) == 0) {
		forget_initrds(b);
		nmbl_held_initrds_clear(b->ctx);
	}
	list = reallocarray(b->initrds, b->n_initrds + 1, sizeof(*list));
	if (!list)
		return -ENOMEM;
	b->initrds = list;
	if (url)
		r = hold_url(b, m->fields[0], &path, reply);
	else
		r = host_path(b, m->fields[0], m->fields[1], m->fields[2], &path);
	if (r < 0)
		return r;
	r = nmbl_measure_initrd(b->ctx, path, m->fields[url ? 1 : 3]);
	if (r < 0)
		return r;
	b->initrds[b->n_initrds++] = TAKE_PTR(path);
	return 0;
}

/* REPLY for a kernel the running kernel refused: "load", and why. */
static int refused(struct nmbl_broker *b, int r, char *reply[REPLY_FIELDS_MAX])
{
	reply[0] = strdup("load");
	free(reply[1]);
	reply[1] = NULL;
	(void)nmbl_explain_refusal(b->ctx, b->kernel, r, &reply[1]);
	return r;
}

/* Why the entry's initrd cannot start it, for a person. */
static const char *initrd_error(int r)
{
	switch (-r) {
	case EBADMSG:
		return "an initrd is not one the kernel would unpack (malformed or truncated)";
	case EFBIG:
		return "an initrd is, or unpacks to, more than nmbl may hold in memory "
		       "(1 GiB, or half of the memory)";
	case EIO:
		return "an initrd could not be read (a bad block, or a disk that went away)";
	case ENOTDIR:
		return "its initrd's /proc is no directory (a symbolic link or a file)";
	case ENOSPC:
	case ENOMEM:
		return "there is not enough memory to unpack its initrds";
	case ENOMEDIUM:
		return "its initrd holds no /init (or no program where rdinit= says)";
	default:
		return strerror(-r);
	}
}

/*
 * Switch root for a direct boot; through the entry's initrd, when
 * nmbl_choose_boot() chose that, or by kexec after all when that initrd
 * is for another kernel (*DIRECT false then, and REPLY[1] says why).
 */
static int switch_root(struct nmbl_broker *b, const char *cmdline, bool *direct,
		       char *reply[REPLY_FIELDS_MAX])
{
	_cleanup_free_ char *handover = b->ctx->handover ? strdup(b->ctx->handover) : NULL;
	int r;

	if (b->ctx->handover && !handover)
		return -ENOMEM;
	r = nmbl_switch_root(b->ctx, cmdline);
	if (r == 0) {
		if (handover)
			kmsg(b->ctx, "<5>nmbl: booting %s without a second kernel: its own initrd sets up its root, as %s",
			     b->kernel_name, handover);
		else
			kmsg(b->ctx, "<5>nmbl: booting %s without a second kernel: switching root",
			     b->kernel_name);
		return 0;
	}
	if (!handover) {
		(void)nmbl_unload(b->ctx);
		reply[0] = strdup("root");
		return r;
	}
	if (r != -ENOPKG) {
		(void)nmbl_unload(b->ctx);
		reply[0] = strdup("initrd");
		free(reply[1]);
		reply[1] = strdup(initrd_error(r));
		return r;
	}
	/* The entry's own kernel has the initrd's modules. */
	*direct = false;
	free(reply[1]);
	reply[1] = strdup("its initrd holds no modules of the running kernel");
	if (!reply[1])
		return -ENOMEM;
	kmsg(b->ctx, "<5>nmbl: booting %s by kexec: %s", b->kernel_name, reply[1]);
	r = nmbl_load(b->ctx, b->kernel, (const char *const *)b->initrds, b->n_initrds, cmdline);
	return r < 0 ? refused(b, r, reply) : 0;
}

/* REPLY: how it boots ("direct", "kexec") and why kexec; or what failed
 * ("load", "root") and why, for a person. */
static int do_boot(struct nmbl_broker *b, const struct nmbl_broker_message *m,
		   char *reply[REPLY_FIELDS_MAX])
{
	_cleanup_free_ char *entry = strdup(m->fields[0]);
	const char *cmdline = b->cmdline;
	enum nmbl_boot_method method;
	char *why = NULL;
	bool direct;
	int r;

	if (!b->kernel)
		return -ENOENT;
	if (!entry)
		return -ENOMEM;
	/* A kernel from the network is not the one running, and the system
	 * it boots is not on these disks. */
	if (b->from_network) {
		method = NMBL_BOOT_KEXEC;
		why = strdup("its kernel came from the network");
		r = why ? 0 : -ENOMEM;
	} else {
		r = nmbl_choose_boot(b->ctx, b->kernel, cmdline, &method, &why);
	}
	if (r < 0)
		method = NMBL_BOOT_KEXEC;
	direct = method == NMBL_BOOT_DIRECT;
	if (why)
		kmsg(b->ctx, "<5>nmbl: booting %s by kexec: %s", b->kernel_name, why);
	reply[1] = why;
	/* Checked as for kexec either way; a direct boot needs the running
	 * kernel's verdict on the kernel, not the kernel loaded. */
	if (direct)
		r = nmbl_check(b->ctx, b->kernel, cmdline);
	else
		r = nmbl_load(b->ctx, b->kernel, (const char *const *)b->initrds, b->n_initrds,
			      cmdline);
	if (r < 0)
		return refused(b, r, reply);
	if (direct) {
		r = switch_root(b, cmdline, &direct, reply);
		if (r < 0)
			return r;
	}
	reply[0] = strdup(direct ? "direct" : "kexec");
	b->outcome = direct ? NMBL_BROKER_DIRECT : NMBL_BROKER_KEXEC;
	b->entry = TAKE_PTR(entry);
	return 0;
}

static int do_chainload(struct nmbl_broker *b, const struct nmbl_broker_message *m,
			char *reply[REPLY_FIELDS_MAX])
{
	_cleanup_free_ char *path = NULL;
	unsigned number = 0;
	int fd, r;

	/* The firmware checks the program; the broker, that it is there. */
	r = host_path(b, m->fields[0], m->fields[1], m->fields[2], &path);
	if (r < 0)
		return r;
	fd = nmbl_open_regular(b->ctx, path);
	if (fd < 0)
		return fd;
	close(fd);
	r = nmbl_set_boot_next(b->ctx, m->fields[0], number_of(m->fields[1]), m->fields[2],
			       "nmbl chainloader", &number);
	if (r == 0 || r == -ELOOP) {
		if (asprintf(&reply[0], "%04X", number) < 0)
			reply[0] = NULL;
	}
	if (r == 0)
		b->outcome = NMBL_BROKER_REBOOT;
	return r;
}

static int do_entry_requests(struct nmbl_broker *b, char *reply[REPLY_FIELDS_MAX])
{
	char *oneshot = NULL, *def = NULL;
	int r = nmbl_take_loader_entry_requests(b->ctx, &oneshot, &def);

	if (r < 0)
		return r;
	r = (oneshot ? 1 : 0) | (def ? 2 : 0);
	reply[0] = oneshot ? oneshot : strdup("");
	reply[1] = def ? def : strdup("");
	return r;
}

static bool envblk_fs(int fd)
{
	struct statfs fs;

	if (fstatfs(fd, &fs) < 0)
		return false;
	return fs.f_type == EXT4_SUPER_MAGIC || fs.f_type == MSDOS_SUPER_MAGIC ||
	       fs.f_type == XFS_SUPER_MAGIC;
}

/* The device offsets of the LEN bytes of FD, extent by extent, as
 * FIEMAP gives them: -EOPNOTSUPP unless each is a plain, aligned,
 * written, unshared extent, and together they hold every byte. */
static int map_blocks(int fd, size_t len, struct fiemap_extent *ret, size_t *ret_n)
{
	_cleanup_free_ struct fiemap *map = calloc(1, sizeof(*map) + FIEMAP_EXTENTS_MAX *
							   sizeof(struct fiemap_extent));
	const uint32_t odd = FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC |
			     FIEMAP_EXTENT_ENCODED | FIEMAP_EXTENT_DATA_ENCRYPTED |
			     FIEMAP_EXTENT_NOT_ALIGNED | FIEMAP_EXTENT_DATA_INLINE |
			     FIEMAP_EXTENT_DATA_TAIL | FIEMAP_EXTENT_UNWRITTEN |
			     FIEMAP_EXTENT_SHARED;
	uint64_t covered = 0;

	if (!map)
		return -ENOMEM;
	map->fm_length = len;
	map->fm_flags = FIEMAP_FLAG_SYNC;
	map->fm_extent_count = FIEMAP_EXTENTS_MAX;
	if (ioctl(fd, FS_IOC_FIEMAP, map) < 0)
		return errno == ENOTTY ? -EOPNOTSUPP : -errno;
	for (uint32_t i = 0; i < map->fm_mapped_extents; i++) {
		const struct fiemap_extent *e = &map->fm_extents[i];

		if ((e->fe_flags & odd) || e->fe_logical != covered)
			return -EOPNOTSUPP;
		ret[i] = *e;
		covered += e->fe_length;
	}
	if (covered < len)
		return -EOPNOTSUPP;
	*ret_n = map->fm_mapped_extents;
	return 0;
}

static int write_envblk(struct nmbl_broker *b, const char *disk, uint64_t start,
			const struct fiemap_extent *ext, size_t n_ext, const void *buf, size_t len)
{
	char part[NMBL_NAME_MAX];
	_cleanup_free_ char *dev = NULL;
	_cleanup_close_ int fd = -1;
	const char *name = strrchr(disk, '/') + 1;
	size_t done = 0;
	int r;

	r = nmbl_partition_name(b->ctx, disk, start, part, sizeof(part));
	if (r < 0)
		return r;
	if (asprintf(&dev, "%s/dev/%s", b->ctx->root, part) < 0)
		return -ENOMEM;
	fd = open(dev, O_WRONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	for (size_t i = 0; i < n_ext && done < len; i++) {
		size_t k = len - done < ext[i].fe_length ? len - done : (size_t)ext[i].fe_length;
		ssize_t w = pwrite(fd, (const char *)buf + done, k, (off_t)ext[i].fe_physical);

		if (w < 0)
			return -errno;
		if ((size_t)w != k)
			return -EIO;
		done += k;
	}
	if (fsync(fd) < 0)
		return -errno;
	/* GRUB reads the partition, or the whole disk, through the block
	 * devices' caches: neither may keep the old block. */
	(void)ioctl(fd, BLKFLSBUF, 0);
	if (start != 0) {
		_cleanup_free_ char *whole = NULL;
		_cleanup_close_ int wfd = -1;

		if (asprintf(&whole, "%s/dev/%s", b->ctx->root, name) < 0)
			return -ENOMEM;
		wfd = open(whole, O_RDONLY | O_CLOEXEC | O_NOCTTY);
		if (wfd >= 0)
			(void)ioctl(wfd, BLKFLSBUF, 0);
	}
	return 0;
}

static int do_grubenv_write(struct nmbl_broker *b, const struct nmbl_broker_message *m,
			    int data)
{
	struct fiemap_extent ext[FIEMAP_EXTENTS_MAX];
	_cleanup_free_ char *path = NULL, *old = NULL, *buf = NULL;
	_cleanup_close_ int fd = -1;
	size_t len = 0, n_ext = 0;
	struct stat st;
	ssize_t k;
	int r;

	r = read_data(data, ENVBLK_MAX, &buf, &len);
	if (r < 0)
		return r;
	r = host_path(b, m->fields[0], m->fields[1], m->fields[2], &path);
	if (r < 0)
		return r;
	fd = nmbl_open_regular(b->ctx, path);
	if (fd < 0)
		return fd;
	if (!envblk_fs(fd))
		return -EOPNOTSUPP;
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != len || len < strlen(ENVBLK_SIGNATURE) ||
	    memcmp(buf, ENVBLK_SIGNATURE, strlen(ENVBLK_SIGNATURE)) != 0)
		return -EINVAL;
	old = malloc(len);
	if (!old)
		return -ENOMEM;
	k = pread(fd, old, len, 0);
	if (k != (ssize_t)len || memcmp(old, ENVBLK_SIGNATURE, strlen(ENVBLK_SIGNATURE)) != 0)
		return -EINVAL;
	r = map_blocks(fd, len, ext, &n_ext);
	if (r < 0)
		return r;
	return write_envblk(b, m->fields[0], number_of(m->fields[1]), ext, n_ext, buf, len);
}

static int dispatch(struct nmbl_broker *b, const struct nmbl_broker_message *m, int data,
		    int *reply_fd, char *reply[REPLY_FIELDS_MAX])
{
	/* One hand-over a session: once prepared (a kernel to boot, or the
	 * firmware asked to start something), the menu has nothing more to
	 * ask, and cannot have the firmware's variables written again. */
	if (b->outcome != NMBL_BROKER_NOTHING)
		return -EALREADY;
	switch (m->request) {
	case NMBL_BROKER_MEASURE:
		return do_measure(b, m, data);
	case NMBL_BROKER_KERNEL:
	case NMBL_BROKER_KERNEL_URL:
		return do_kernel(b, m, reply);
	case NMBL_BROKER_INITRD:
	case NMBL_BROKER_INITRD_URL:
		return do_initrd(b, m, reply);
	case NMBL_BROKER_FETCH:
		return do_fetch(b, m, reply_fd, reply);
	case NMBL_BROKER_CANCEL:
		return 0;
	case NMBL_BROKER_BOOT:
		return do_boot(b, m, reply);
	case NMBL_BROKER_CHAINLOAD:
		return do_chainload(b, m, reply);
	case NMBL_BROKER_FIRMWARE_SETUP: {
		int r = nmbl_set_boot_to_firmware_setup(b->ctx);

		if (r == 0)
			b->outcome = NMBL_BROKER_REBOOT;
		return r;
	}
	case NMBL_BROKER_ENTRY_REQUESTS:
		return do_entry_requests(b, reply);
	case NMBL_BROKER_MENU_SHOWN:
		return nmbl_watchdog_disarm();
	case NMBL_BROKER_GRUBENV_WRITE:
		return do_grubenv_write(b, m, data);
	}
	return -EBADMSG;
}

NMBL_EXPORT int nmbl_broker_serve(struct nmbl_broker *b)
{
	_cleanup_free_ char *buf = malloc(NMBL_BROKER_MESSAGE_MAX);
	char *reply[REPLY_FIELDS_MAX] = { NULL };
	const char *fields[REPLY_FIELDS_MAX];
	struct nmbl_broker_message m;
	_cleanup_close_ int data = -1, reply_fd = -1;
	ssize_t len;
	int r;

	if (!b)
		return -EINVAL;
	if (!buf)
		return -ENOMEM;
	len = receive_message(b->fd, buf, &data);
	if (len == 0)
		return 0;
	if (len < 0 && len != -EBADMSG)
		return (int)len;
	r = len < 0 ? (int)len : nmbl_broker_parse(buf, (size_t)len, &m);
	/* A cancel that came after what it cancelled had ended. */
	if (r == 0 && m.request == NMBL_BROKER_CANCEL)
		return 1;
	if (r == 0)
		r = dispatch(b, &m, data, &reply_fd, reply);
	if (r < 0)
		nmbl_dbg(b->ctx, "broker: a request refused: %s", strerror(-r));
	for (size_t i = 0; i < REPLY_FIELDS_MAX; i++)
		fields[i] = reply[i] ? reply[i] : "";
	r = send_message(b->fd, (uint32_t)r, fields, REPLY_FIELDS_MAX, r < 0 ? -1 : reply_fd);
	for (size_t i = 0; i < REPLY_FIELDS_MAX; i++)
		free(reply[i]);
	return r < 0 ? r : 1;
}
