/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * Direct boot through the entry's own initrd: a root that initrd sets up
 * (LVM, LUKS, md RAID) is set up by it on the running kernel, as in the
 * distribution's own boot, with no second kernel start.  Its initrds, the
 * bytes measured into PCR 9, are unpacked as the kernel unpacks an
 * initramfs into a fresh tmpfs on NMBL_SYSROOT, which nmbl-init makes the
 * root before it starts the initrd's /init as process 1.
 *
 * What that userspace reads as the kernel's command line must be the
 * entry's.  /proc/cmdline cannot be written; a file bound over it can.  A
 * systemd initrd (dracut's) mounts no /proc where one is mounted, and
 * dracut's shell init none where /proc/self is there, so proc is mounted
 * in the new root with the entry's line bound over its cmdline; switching
 * root moves /proc with what is mounted on it.  initramfs-tools' /init
 * mounts a fresh proc over /proc whatever is there, then sources
 * conf/conf.d/ (from "/", its directory), then parses /proc/cmdline: one
 * file there binds the entry's line over that proc's cmdline first, and
 * /init moves that proc, with the line on it, into the real root.
 */
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nmbl-private.h"

/* Where initramfs-tools' /init finds the entry's line, and the file it
 * sources that binds it. */
#define ITOOLS_CMDLINE "conf/nmbl-cmdline"
#define ITOOLS_CONF "conf/conf.d/zz-nmbl"
static const char itools_conf[] =
	"# nmbl: this initrd runs on the kernel nmbl booted, whose command line\n"
	"# is nmbl's own; the entry's is bound over /proc/cmdline before /init\n"
	"# reads it, and goes with /proc into the booted system.\n"
	"mount -n -o bind /" ITOOLS_CMDLINE " /proc/cmdline &&\n"
	"\tmount -n -o remount,bind,ro /proc/cmdline\n"
	"rm -f /" ITOOLS_CMDLINE " /" ITOOLS_CONF "\n"
	"quiet=n\n"
	"for x in $(cat /proc/cmdline); do\n"
	"\tcase $x in quiet) quiet=y ;; esac\n"
	"done\n"
	"export quiet\n";
/* Under Secure Boot (or when nmbl cannot tell): its panic() restarts the
 * machine 10 seconds after saying why, and opens no shell; the entry's
 * own panic= may say another delay, and opens none either. */
static const char itools_no_shell[] =
	"# Secure Boot: no shell when the root cannot be set up; the machine\n"
	"# restarts, and nmbl's menu comes back.\n"
	"panic=10\n";

/* The same for dracut's initrds, read before the entry's line (whose own
 * rd.shell= or rd.emergency= would win): its emergency hook restarts the
 * machine rather than start a shell. */
#define DRACUT_CONF_DIR "etc/cmdline.d"
static const char dracut_no_shell[] = "rd.shell=0 rd.emergency=reboot\n";

/* NAME resolved inside the tree DFD, as its processes will resolve it. */
static int open_in(int dfd, const char *name, uint64_t flags)
{
	struct open_how how = {
		.flags = flags | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	int fd = (int)syscall(SYS_openat2, dfd, name, &how, sizeof(how));

	return fd < 0 ? -errno : fd;
}

static bool exists_in(int dfd, const char *name, uint64_t flags)
{
	int fd = open_in(dfd, name, O_PATH | flags);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/*
 * Each initrd read whole, not mapped: without a TPM the held file is the
 * one on the disk, whose read error (a bad block, a USB stick pulled out)
 * is then -EIO and the menu again, not SIGBUS in process 1 and a panic.
 * The initrd, a stream it decompresses to (held whole while its archives
 * are unpacked) and what it unpacks to are each within nmbl_file_max().
 */
static int unpack_held(struct nmbl_ctx *ctx, int dfd)
{
	size_t max = nmbl_file_max();

	for (size_t i = 0; i < ctx->n_initrds; i++) {
		struct nmbl_held_file *f = &ctx->initrds[i];
		_cleanup_free_ char *buf = NULL;
		size_t len = 0;
		int r;

		if (f->fd < 0)
			return -EBADF;
		r = nmbl_read_fd(f->fd, max, &buf, &len);
		if (r == 0)
			r = nmbl_initramfs_unpack(buf, len, max, dfd);
		if (r < 0) {
			nmbl_notice(ctx, "cannot unpack the initrd %s: %s", f->path, strerror(-r));
			return r;
		}
		nmbl_info(ctx, "unpacked the initrd %s (%zu bytes)", f->path, len);
	}
	return 0;
}

/* The TPM's logs as they will be once the hand-over is measured, below
 * /.extra/nmbl/ in the tree, as a kexec'd kernel gets them (nmbl's
 * dracut module copies them to /run/log/nmbl/). */
static int unpack_logs(struct nmbl_ctx *ctx, int dfd)
{
	_cleanup_free_ void *logs = NULL;
	size_t len = 0;
	int r;

	r = nmbl_tpm_handover_cpio(ctx, NMBL_PHASE_DIRECT, &logs, &len);
	if (r < 0 || !logs)
		return r;
	return nmbl_initramfs_unpack(logs, len, nmbl_file_max(), dfd);
}

static int write_in(int dfd, const char *name, const char *text, mode_t mode)
{
	_cleanup_close_ int fd = -1;

	(void)unlinkat(dfd, name, 0);
	fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	return nmbl_write_full(fd, text, strlen(text));
}

/* initramfs-tools' /init: its conf/conf.d/ binds the line. */
static int itools_cmdline(int dfd, const char *cmdline, bool no_shell)
{
	_cleanup_free_ char *line = NULL, *conf_text = NULL;
	_cleanup_close_ int conf = -1, confd = -1;
	int r;

	if (asprintf(&line, "%s\n", cmdline) < 0)
		return -ENOMEM;
	conf = open_in(dfd, "conf", O_PATH | O_DIRECTORY);
	if (conf < 0)
		return conf;
	(void)mkdirat(conf, "conf.d", 0755);
	confd = open_in(dfd, "conf/conf.d", O_PATH | O_DIRECTORY);
	if (confd < 0)
		return confd;
	if (asprintf(&conf_text, "%s%s", itools_conf, no_shell ? itools_no_shell : "") < 0)
		return -ENOMEM;
	r = write_in(conf, "nmbl-cmdline", line, 0444);
	if (r == 0)
		r = write_in(confd, "zz-nmbl", conf_text, 0644);
	return r;
}

/* dracut's /etc/cmdline.d/zz-nmbl.conf: no shell under Secure Boot. */
static int dracut_cmdline_d(int dfd)
{
	_cleanup_close_ int etc = -1, conf = -1;

	(void)mkdirat(dfd, "etc", 0755);
	etc = open_in(dfd, "etc", O_PATH | O_DIRECTORY);
	if (etc < 0)
		return etc;
	(void)mkdirat(etc, "cmdline.d", 0755);
	conf = open_in(dfd, DRACUT_CONF_DIR, O_PATH | O_DIRECTORY);
	if (conf < 0)
		return conf;
	return write_in(conf, "zz-nmbl.conf", dracut_no_shell, 0644);
}

int nmbl_handover_prepare(struct nmbl_ctx *ctx, const struct nmbl_cmdline *entry,
			  const char *sysroot, char *init, size_t init_size)
{
	_cleanup_free_ char *rdinit = NULL, *modules = NULL;
	_cleanup_close_ int dfd = -1;
	const struct nmbl_param *p = nmbl_cmdline_find(entry, "rdinit");
	char release[256];
	int r;

	r = nmbl_running_release(ctx, release, sizeof(release));
	if (r < 0)
		return r;
	if (asprintf(&modules, "lib/modules/%s", release) < 0)
		return -ENOMEM;
	if (p) {
		rdinit = nmbl_param_value(p);
		if (!rdinit)
			return -ENOMEM;
	}
	snprintf(init, init_size, "%s", rdinit && *rdinit ? rdinit : "/init");
	if (mkdir(sysroot, 0755) < 0 && errno != EEXIST)
		return -errno;
	r = nmbl_sys_mount("rootfs", sysroot, "tmpfs", 0, "mode=0755");
	if (r < 0)
		return r;
	dfd = open(sysroot, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	r = dfd < 0 ? -errno : unpack_held(ctx, dfd);
	/* The measurements so far, where a kexec'd kernel finds them. */
	if (r == 0)
		r = unpack_logs(ctx, dfd);
	/* Its modules are for the kernel it was made with: this one, or
	 * the entry's kernel is booted to use them. */
	if (r == 0 && !exists_in(dfd, modules, O_DIRECTORY)) {
		nmbl_notice(ctx, "its initrd has no /%s", modules);
		r = -ENOPKG;
	}
	if (r == 0)
		r = nmbl_check_init(sysroot, init);
	if (r < 0) {
		(void)nmbl_sys_umount_tree(sysroot);
		return r;
	}
	nmbl_info(ctx, "the entry's initrd, unpacked on %s, starts with %s", sysroot, init);
	return 0;
}

/*
 * proc mounted on the initrd's /proc.  mount(2) follows a symbolic link in
 * its target: an initrd's "proc -> /x" would have proc, and the entry's
 * line on it, mounted on nmbl's own /x.  So /proc is opened inside the
 * tree without following any link, must be a directory (-ENOTDIR when it
 * is a link or a file), and is mounted on through its descriptor.
 */
static int mount_proc(int dfd)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	_cleanup_close_ int fd = -1;
	char target[64];

	(void)mkdirat(dfd, "proc", 0555);
	fd = (int)syscall(SYS_openat2, dfd, "proc", &how, sizeof(how));
	if (fd < 0)
		return errno == ELOOP || errno == ENOTDIR ? -ENOTDIR : -errno;
	snprintf(target, sizeof(target), "/proc/self/fd/%d", fd);
	return nmbl_sys_mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

int nmbl_handover_cmdline(struct nmbl_ctx *ctx, const char *sysroot, const char *cmdline)
{
	_cleanup_free_ char *proc = NULL, *proc_cmdline = NULL;
	_cleanup_close_ int dfd = -1;
	int r;

	dfd = open(sysroot, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	if (exists_in(dfd, "scripts/functions", 0) && exists_in(dfd, "conf/initramfs.conf", 0)) {
		nmbl_info(ctx, "initramfs-tools' /init reads the entry's command line from %s",
			  ITOOLS_CONF);
		return itools_cmdline(dfd, cmdline, nmbl_get_secure_boot(ctx) != 0);
	}
	if (nmbl_get_secure_boot(ctx) != 0) {
		r = dracut_cmdline_d(dfd);
		if (r < 0)
			return r;
	}
	if (asprintf(&proc, "%s/proc", sysroot) < 0 ||
	    asprintf(&proc_cmdline, "%s/proc/cmdline", sysroot) < 0)
		return -ENOMEM;
	r = mount_proc(dfd);
	if (r < 0)
		return r;
	/* By its path now: its /proc is proc's root, on the directory just
	 * checked, and nothing of the initrd runs yet to change that. */
	r = nmbl_bind_cmdline(ctx, cmdline, proc_cmdline);
	if (r < 0) {
		(void)nmbl_sys_umount(proc);
		return r;
	}
	nmbl_info(ctx, "the initrd finds /proc mounted, the entry's command line on it");
	return 0;
}
