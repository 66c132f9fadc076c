/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * The test side of libnmbl's seam: records each call and returns the
 * errno a test injected, instead of changing the machine.
 */
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <string.h>
#include <unistd.h>

#include "fake-sys.h"
#include "unit.h"
#include "nmbl-private.h"

struct fake_sys fake;

static void record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void record(const char *fmt, ...)
{
	size_t len = strlen(fake.calls);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(fake.calls + len, sizeof(fake.calls) - len, fmt, ap);
	va_end(ap);
}

int nmbl_sys_kexec_file_load(int kernel_fd, int initrd_fd, const char *cmdline,
			     unsigned long flags)
{
	ssize_t n;

	fake.kexec_flags = flags;
	snprintf(fake.kexec_cmdline, sizeof(fake.kexec_cmdline), "%s", cmdline);
	fake.kexec_kernel_len = kernel_fd >= 0 ?
		pread(kernel_fd, fake.kexec_kernel, sizeof(fake.kexec_kernel), 0) : -1;
	n = initrd_fd >= 0 ? pread(initrd_fd, fake.kexec_initrd,
				   sizeof(fake.kexec_initrd), 0) : -1;
	fake.kexec_initrd_len = n;
	record("kexec_file_load;");
	return fake.kexec_errno;
}

/* As the kernel does: its verdict on the kernel, else -EFAULT for the
 * command line it cannot read. */
int nmbl_sys_kexec_file_check(int kernel_fd)
{
	fake.kexec_kernel_len = pread(kernel_fd, fake.kexec_kernel, sizeof(fake.kexec_kernel), 0);
	record("kexec_file_check;");
	if (fake.kexec_errno)
		return fake.kexec_errno;
	return fake.check_loads ? 0 : -EFAULT;
}

/* PATH relative to the fixture's root when below it, else whole. */
static const char *below_root(const char *path)
{
	size_t root = strlen(fake.root);

	if (strncmp(path, fake.root, root) == 0 && (path[root] == '/' || !path[root]))
		return path + root;
	return path;
}

/* Where mount(2) would mount on TARGET: a descriptor's magic link
 * (/proc/self/fd/N) and the symbolic links on the way followed, as it
 * follows them; as given when it does not exist (yet).  Recorded below the
 * fixture's root, or whole when it leads out of it. */
static const char *mount_target(const char *target, char buf[PATH_MAX])
{
	char root[PATH_MAX];
	size_t n;

	if (!realpath(target, buf))
		return below_root(target);
	if (!realpath(fake.root, root))
		return below_root(buf);
	n = strlen(root);
	if (strncmp(buf, root, n) == 0 && (buf[n] == '/' || !buf[n]))
		return buf + n;
	return buf;
}

int nmbl_sys_mount(const char *source, const char *target, const char *fstype,
		   unsigned long flags, const char *data)
{
	char t[PATH_MAX];

	fake.mount_flags = flags;
	/* A device or file below the fixture's root, or a name ("proc"). */
	record("mount %s %s %s %s;", source ? below_root(source) : "-", mount_target(target, t),
	       fstype ? fstype : "-", data ? data : "-");
	return fake.mount_errno;
}

int nmbl_sys_umount(const char *target)
{
	char t[PATH_MAX];

	record("umount %s;", mount_target(target, t));
	return 0;
}

int nmbl_sys_umount_tree(const char *target)
{
	char t[PATH_MAX];

	record("umount -R %s;", mount_target(target, t));
	return 0;
}

int nmbl_sys_reboot(bool kexec)
{
	record("%s;", kexec ? "reboot_kexec" : "reboot");
	return fake.reboot_errno;
}

int nmbl_sys_systemctl(const char *verb, const char *arg)
{
	record("systemctl_%s%s%s;", verb, arg ? " " : "", arg ? arg : "");
	return fake.systemctl_errno;
}

long nmbl_sys_keyring_read(int32_t keyring, int32_t *buf, size_t len)
{
	size_t n = 0;

	for (size_t i = 0; i < ELEMENTSOF(fake.keys); i++) {
		if (!fake.keys[i].description || fake.keys[i].keyring != keyring)
			continue;
		if ((n + 1) * sizeof(*buf) <= len)
			buf[n] = fake.keys[i].id;
		n++;
	}
	return fake.keyring_errno ? fake.keyring_errno : (long)(n * sizeof(*buf));
}

int nmbl_sys_key_describe(int32_t key, char *buf, size_t len)
{
	for (size_t i = 0; i < ELEMENTSOF(fake.keys); i++)
		if (fake.keys[i].description && fake.keys[i].id == key) {
			snprintf(buf, len, "%s;0;0;3f010000;%s",
				 fake.keys[i].type ? fake.keys[i].type : "asymmetric",
				 fake.keys[i].description);
			return 0;
		}
	return -ENOKEY;
}

int nmbl_sys_finit_module(int fd, const char *params)
{
	char link[64], path[4096], magic[4];
	ssize_t n;
	const char *base;

	(void)params;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n < 0)
		return -errno;
	path[n] = '\0';
	/* A decompressed module: "/memfd:NAME (deleted)". */
	if (strncmp(path, "/memfd:", 7) == 0) {
		char *deleted = strstr(path, " (deleted)");

		if (deleted)
			*deleted = '\0';
		base = path + 7;
	} else {
		base = strrchr(path, '/');
		base = base ? base + 1 : path;
	}
	/* The kernel takes an ELF object, nothing else. */
	if (pread(fd, magic, sizeof(magic), 0) != (ssize_t)sizeof(magic) ||
	    memcmp(magic, "\177ELF", sizeof(magic)) != 0) {
		record("insmod %s (not ELF);", base);
		return -ENOEXEC;
	}
	record("insmod %s;", base);
	if (fake.finit_fail_module && strcmp(base, fake.finit_fail_module) == 0)
		return fake.finit_fail_errno;
	return fake.finit_errno;
}

/* /dev/null stands for the watchdog: a descriptor to close. */
int nmbl_sys_watchdog_open(const char *path)
{
	int fd;

	record("watchdog_open %s;", path + strlen(fake.root));
	if (fake.watchdog_errno)
		return fake.watchdog_errno;
	fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int nmbl_sys_watchdog_set_timeout(int fd, unsigned *seconds)
{
	(void)fd;
	record("watchdog_timeout %u;", *seconds);
	if (fake.watchdog_timeout_errno)
		return fake.watchdog_timeout_errno;
	if (fake.watchdog_timeout_set)
		*seconds = fake.watchdog_timeout_set;
	return 0;
}

/* As the kernel's ioctl would, a descriptor that is not open is -EBADF
 * and left alone. */
int nmbl_sys_watchdog_stop(int fd)
{
	if (fcntl(fd, F_GETFD) < 0)
		return -EBADF;
	record("watchdog_stop;");
	close(fd);
	return fake.watchdog_stop_errno;
}

int nmbl_sys_efivar_write(const char *path, const void *data, size_t len)
{
	const char *name = strrchr(path, '/');

	record("efivar %s %zu;", name ? name + 1 : path, len);
	if (fake.efivar_errno)
		return fake.efivar_errno;
	fixture_write(path + strlen(fake.root), data, len);
	return 0;
}

int nmbl_sys_efivar_delete(const char *path)
{
	const char *name = strrchr(path, '/');

	record("efivar-delete %s;", name ? name + 1 : path);
	if (fake.efivar_errno)
		return fake.efivar_errno;
	return remove(path) < 0 ? -errno : 0;
}

int nmbl_sys_boot_clock(uint64_t *ret_now_usec, uint64_t *ret_kernel_usec)
{
	if (!fake.clock_now_usec)
		return -EOPNOTSUPP;
	*ret_now_usec = fake.clock_now_usec;
	*ret_kernel_usec = fake.clock_kernel_usec;
	return 0;
}

const char *fake_tpm_alg_md(uint16_t alg)
{
	switch (alg) {
	case 0x0004: return "SHA1";
	case 0x000b: return "SHA256";
	case 0x000c: return "SHA384";
	case 0x000d: return "SHA512";
	default: return NULL;
	}
}

size_t fake_tpm_alg_size(uint16_t alg)
{
	const char *md = fake_tpm_alg_md(alg);

	return md ? (size_t)EVP_MD_get_size(EVP_get_digestbyname(md)) : 0;
}

/* /dev/null stands for the TPM: a descriptor to close. */
int nmbl_sys_tpm_open(const char *path)
{
	int fd;

	record("tpm_open %s;", path + strlen(fake.root));
	if (fake.tpm_open_errno)
		return fake.tpm_open_errno;
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

/* A response with code RC and BODY after the header. */
static ssize_t tpm_response(unsigned char *resp, uint16_t tag, uint32_t rc,
			    const unsigned char *body, size_t len)
{
	resp[0] = (unsigned char)(tag >> 8);
	resp[1] = (unsigned char)tag;
	put_be32(resp + 2, (uint32_t)(10 + len));
	put_be32(resp + 6, rc);
	if (len)
		memcpy(resp + 10, body, len);
	return (ssize_t)(10 + len);
}

/* TPM_CAP_PCRS: every bank with all 24 PCRs allocated. */
static ssize_t tpm_get_capability(unsigned char *resp)
{
	unsigned char body[256];
	size_t n = 0, off = 9;

	body[0] = 0;
	put_be32(body + 1, 5);
	for (; n < 4 && fake.tpm_banks[n]; n++) {
		body[off] = (unsigned char)(fake.tpm_banks[n] >> 8);
		body[off + 1] = (unsigned char)fake.tpm_banks[n];
		body[off + 2] = 3;
		memset(body + off + 3, 0xff, 3);
		off += 6;
	}
	put_be32(body + 5, (uint32_t)n);
	return tpm_response(resp, 0x8001, 0, body, off);
}

/* TPM2_PCR_Extend as a TPM does it: each bank's PCR becomes the hash of
 * itself and the digest given for that bank. */
static ssize_t tpm_extend(const unsigned char *cmd, size_t len, unsigned char *resp)
{
	static const unsigned char ok[] = { 0, 0, 0, 0, 0, 0, 0, 0, 0 };
	uint32_t pcr = be32(cmd + 10), count;
	size_t off = 31;

	CHECK(be32(cmd + 14) == 9 && be32(cmd + 18) == 0x40000009);
	if (pcr >= 24 || len < off)
		return tpm_response(resp, 0x8002, 0x1c4, NULL, 0);
	record("tpm_extend %u;", pcr);
	if (fake.tpm_extend_rc)
		return tpm_response(resp, 0x8002, fake.tpm_extend_rc, NULL, 0);
	count = be32(cmd + 27);
	for (uint32_t i = 0; i < count; i++) {
		uint16_t alg = (uint16_t)(cmd[off] << 8 | cmd[off + 1]);
		size_t size = fake_tpm_alg_size(alg), b;
		unsigned char buf[128];
		unsigned n;

		for (b = 0; b < 4 && fake.tpm_banks[b] != alg; b++)
			;
		CHECK(b < 4 && size && off + 2 + size <= len);
		if (b == 4 || !size || off + 2 + size > len)
			return tpm_response(resp, 0x8002, 0x2c3, NULL, 0);
		memcpy(buf, fake.tpm_pcrs[b][pcr], size);
		memcpy(buf + size, cmd + off + 2, size);
		EVP_Digest(buf, 2 * size, fake.tpm_pcrs[b][pcr], &n,
			   EVP_get_digestbyname(fake_tpm_alg_md(alg)), NULL);
		off += 2 + size;
	}
	CHECK(off == len);
	fake.tpm_extends++;
	return tpm_response(resp, 0x8002, 0, ok, sizeof(ok));
}

ssize_t nmbl_sys_tpm_transmit(int fd, const void *cmd, size_t len, void *resp, size_t size)
{
	const unsigned char *c = cmd;

	(void)fd;
	CHECK(size >= 4096);
	if (len < 10 || be32(c + 2) != len)
		return tpm_response(resp, 0x8001, 0x1e, NULL, 0);
	switch (be32(c + 6)) {
	case 0x17a:
		return tpm_get_capability(resp);
	case 0x182:
		return tpm_extend(c, len, resp);
	default:
		return tpm_response(resp, 0x8001, 0x143, NULL, 0);
	}
}
