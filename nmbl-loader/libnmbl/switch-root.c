/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * Direct boot, the doing: mount the root direct.c chose, make the entry's
 * command line what /proc/cmdline shows, set what the kernel sets at run
 * time (console log level, panic timeout), leave nothing of nmbl behind,
 * and switch root.
 */
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include "nmbl-private.h"

/* Where the entry's command line waits to be bound over /proc/cmdline: in
 * the initramfs itself, which switch_root empties, so that nothing of it
 * stays behind but the mount. */
#define NMBL_CMDLINE_FILE "/nmbl-cmdline"

int nmbl_check_init(const char *root, const char *init)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT,
	};
	_cleanup_close_ int dfd = -1, fd = -1;
	struct stat st;

	dfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	fd = (int)syscall(SYS_openat2, dfd, init, &how, sizeof(how));
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ? -ENOMEDIUM : -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	return S_ISREG(st.st_mode) && (st.st_mode & 0111) ? 0 : -ENOMEDIUM;
}

/* TEXT written to the sysctl file PATH ("/proc/sys/kernel/printk"). */
static int write_sysctl(const struct nmbl_ctx *ctx, const char *path, const char *text)
{
	_cleanup_free_ char *full = nmbl_path(ctx, path);
	_cleanup_close_ int fd = -1;

	if (!full)
		return -ENOMEM;
	fd = open(full, O_WRONLY | O_CLOEXEC | O_TRUNC);
	if (fd < 0)
		return -errno;
	return nmbl_write_full(fd, text, strlen(text));
}

static int set_loglevel(struct nmbl_ctx *ctx, const struct nmbl_cmdline *running,
			const struct nmbl_cmdline *entry)
{
	int want = nmbl_cmdline_loglevel(entry), have = nmbl_cmdline_loglevel(running);
	char text[64];
	int r, levels[4];

	if (want == have)
		return 0;
	r = nmbl_read_small(ctx, "/proc/sys/kernel/printk", text, sizeof(text));
	if (r < 0)
		return r;
	if (sscanf(text, "%d %d %d %d", &levels[0], &levels[1], &levels[2], &levels[3]) != 4)
		return -EBADMSG;
	/* Without a word about it, the level the kernel was built with: the
	 * last of printk's four. */
	if (!want)
		want = levels[3];
	snprintf(ctx->prepared.printk, sizeof(ctx->prepared.printk), "%d %d %d %d", levels[0],
		 levels[1], levels[2], levels[3]);
	snprintf(text, sizeof(text), "%d", want);
	r = write_sysctl(ctx, "/proc/sys/kernel/printk", text);
	if (r < 0)
		return r;
	nmbl_info(ctx, "console log level %s", text);
	return 0;
}

/* nmbl's own panic= (nmbl-init(8)) is for nmbl: the entry gets its own. */
static int set_panic(struct nmbl_ctx *ctx, const struct nmbl_cmdline *running,
		     const struct nmbl_cmdline *entry)
{
	long want = nmbl_cmdline_panic_timeout(entry);
	char text[32];
	int r;

	if (want == nmbl_cmdline_panic_timeout(running))
		return 0;
	r = nmbl_read_small(ctx, "/proc/sys/kernel/panic", ctx->prepared.panic,
			    sizeof(ctx->prepared.panic));
	if (r < 0)
		ctx->prepared.panic[0] = '\0';
	snprintf(text, sizeof(text), "%ld", want);
	r = write_sysctl(ctx, "/proc/sys/kernel/panic", text);
	if (r < 0)
		return r;
	nmbl_info(ctx, "panic timeout %s", text);
	return 0;
}

int nmbl_bind_cmdline(const struct nmbl_ctx *ctx, const char *cmdline, const char *proc)
{
	_cleanup_free_ char *file = nmbl_path(ctx, NMBL_CMDLINE_FILE);
	_cleanup_close_ int fd = -1;
	int r;

	if (!file)
		return -ENOMEM;
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
	if (fd < 0)
		return -errno;
	/* /proc/cmdline ends in a newline. */
	if (write(fd, cmdline, strlen(cmdline)) < 0 || write(fd, "\n", 1) < 0) {
		r = -errno;
		unlink(file);
		return r;
	}
	r = nmbl_sys_mount(file, proc, NULL, MS_BIND, NULL);
	if (r == 0) {
		r = nmbl_sys_mount(NULL, proc, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL);
		if (r < 0)
			(void)nmbl_sys_umount(proc);
	}
	unlink(file);
	return r;
}

/*
 * 1 when block device DEV (a "/dev/NAME" path under the context's root) is
 * mounted anywhere.  A new mount of it would share that mount's superblock
 * and with it its options: nmbl's own read-only, no-journal-replay mount
 * must never become the target's root.  Matched by device number, and by
 * source for btrfs, whose mounts show an anonymous device number.
 */
static int device_mounted(const struct nmbl_ctx *ctx, const char *dev)
{
	_cleanup_free_ char *info = NULL;
	char *line, *save = NULL, devno[32];
	const char *name = dev + strlen(ctx->root);
	struct stat st;
	size_t len;
	int r;

	if (stat(dev, &st) < 0)
		return -errno;
	if (!S_ISBLK(st.st_mode))
		return 0;
	r = nmbl_read_file(ctx, "/proc/self/mountinfo", NMBL_MOUNTINFO_MAX, &info, &len);
	if (r < 0)
		return r;
	snprintf(devno, sizeof(devno), "%u:%u", major(st.st_rdev), minor(st.st_rdev));
	for (line = strtok_r(info, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char id[32], source[256];
		const char *sep = strstr(line, " - ");

		if (sscanf(line, "%*s %*s %31s", id) == 1 && strcmp(id, devno) == 0)
			return 1;
		if (sep && sscanf(sep, " - %*s %255s", source) == 1 && strcmp(source, name) == 0)
			return 1;
	}
	return 0;
}

static int mount_root(struct nmbl_ctx *ctx, const struct nmbl_root_mount *m,
		      const char *sysroot)
{
	_cleanup_free_ char *probed = NULL, *dev = NULL;
	const char *fstype = m->fstype;
	char name[NMBL_NAME_MAX];
	int r;

	r = nmbl_root_device(ctx, m->spec, &dev, name);
	if (r < 0)
		return r;
	r = device_mounted(ctx, dev);
	if (r < 0)
		return r;
	if (r > 0) {
		nmbl_dbg(ctx, "%s is still mounted", dev);
		return -EBUSY;
	}
	if (!fstype) {
		r = nmbl_root_fstype(ctx, dev, &probed);
		if (r < 0)
			return r;
		fstype = probed;
	}
	r = nmbl_load_fs_module(ctx, fstype);
	if (r < 0)
		return r;
	if (mkdir(sysroot, 0755) < 0 && errno != EEXIST)
		return -errno;
	r = nmbl_sys_mount(dev, sysroot, fstype, m->flags, *m->data ? m->data : NULL);
	if (r < 0)
		return r;
	nmbl_info(ctx, "mounted root %s (%s) on %s, %s", dev, fstype, sysroot,
		  m->flags & MS_RDONLY ? "read-only" : "read-write");
	return 0;
}

/* The root the entry names, mounted on SYSROOT, and the init to start
 * there (written to INIT). */
static int prepare_root(struct nmbl_ctx *ctx, const struct nmbl_cmdline *entry,
			const char *sysroot, char *init, size_t init_size)
{
	_cleanup_(nmbl_root_mount_clear) struct nmbl_root_mount m = { 0 };
	int r;

	r = nmbl_root_mount_parse(entry, &m);
	if (r < 0)
		return r;
	snprintf(init, init_size, "%s", m.init ? m.init : "/sbin/init");
	r = mount_root(ctx, &m, sysroot);
	if (r < 0)
		return r;
	r = nmbl_check_init(sysroot, init);
	if (r < 0)
		(void)nmbl_sys_umount(sysroot);
	return r;
}

NMBL_EXPORT int nmbl_switch_root(struct nmbl_ctx *ctx, const char *cmdline)
{
	_cleanup_cmdline_ struct nmbl_cmdline *running = NULL, *entry = NULL;
	_cleanup_free_ char *sysroot = NULL, *proc = NULL;
	struct nmbl_prepared_root *p;
	bool handover;
	int r;

	if (!ctx || !cmdline)
		return -EINVAL;
	p = &ctx->prepared;
	/* Only the running kernel, accepted by it as it would be for kexec:
	 * both judged on the same bytes (nmbl_check()). */
	if (!ctx->kernel_accepted || !ctx->accepted_is_running)
		return -ENOENT;
	r = nmbl_direct_cmdlines(ctx, cmdline, &running, &entry);
	if (r < 0)
		return r;
	sysroot = nmbl_path(ctx, NMBL_SYSROOT);
	proc = nmbl_path(ctx, "/proc/cmdline");
	if (!sysroot || !proc)
		return -ENOMEM;
	handover = ctx->handover != NULL;

	*p = (struct nmbl_prepared_root){ 0 };
	if (handover) {
		/* Unpacked from what nmbl_measure_initrd() holds: unmeasured,
		 * the files themselves, on nmbl's mounts, which they keep
		 * busy until let go.  Held on only for a kexec of the kernel
		 * they are for. */
		r = nmbl_handover_prepare(ctx, entry, sysroot, p->init, sizeof(p->init));
		if (r != -ENOPKG)
			nmbl_held_initrds_clear(ctx);
	} else {
		/* The root is mounted as the entry says, on a superblock of
		 * its own: none of nmbl's read-only mounts (its /boot may be
		 * the root's own file system) may be left for it to share.
		 * They are mounted again if the menu comes back. */
		r = nmbl_umount_all(ctx);
		if (r < 0)
			nmbl_notice(ctx, "could not unmount everything: %s", strerror(-r));
		r = prepare_root(ctx, entry, sysroot, p->init, sizeof(p->init));
	}
	if (r < 0)
		return r;
	/* The last thing nmbl measures, just before nothing can stop the
	 * switch: a failed extension is a failed boot. */
	r = nmbl_measure_phase(ctx, NMBL_PHASE_DIRECT);
	if (r == 0)
		r = handover ? nmbl_handover_cmdline(ctx, sysroot, cmdline) :
			       nmbl_bind_cmdline(ctx, cmdline, proc);
	if (r < 0) {
		(void)(handover ? nmbl_sys_umount_tree(sysroot) : nmbl_sys_umount(sysroot));
		return r;
	}
	p->mounted = true;
	p->bound = !handover;
	p->handover = handover;
	r = set_loglevel(ctx, running, entry);
	if (r < 0)
		nmbl_notice(ctx, "cannot set the console log level: %s", strerror(-r));
	r = set_panic(ctx, running, entry);
	if (r < 0)
		nmbl_notice(ctx, "cannot set the panic timeout: %s", strerror(-r));

	/* Nothing of nmbl goes along: no loaded kernel, none of its mounts,
	 * no watchdog running (the menu may have been skipped). */
	(void)nmbl_unload(ctx);
	r = nmbl_umount_all(ctx);
	if (r < 0)
		nmbl_notice(ctx, "could not unmount everything: %s", strerror(-r));
	r = nmbl_watchdog_disarm();
	if (r < 0)
		nmbl_notice(ctx, "the watchdog keeps running: %s", strerror(-r));
	if (nmbl_systemd_is_pid1(ctx))
		return nmbl_ask_systemd("switch-root", NMBL_SYSROOT);
	return 0;
}

NMBL_EXPORT const char *nmbl_switch_root_init(const struct nmbl_ctx *ctx, bool *ret_initrd)
{
	if (!ctx || !ctx->prepared.mounted)
		return NULL;
	if (ret_initrd)
		*ret_initrd = ctx->prepared.handover;
	return ctx->prepared.init;
}

int nmbl_switch_root_undo(struct nmbl_ctx *ctx)
{
	struct nmbl_prepared_root *p = &ctx->prepared;
	_cleanup_free_ char *proc = nmbl_path(ctx, "/proc/cmdline");
	_cleanup_free_ char *sysroot = nmbl_path(ctx, NMBL_SYSROOT);
	int r = 0, k;

	if (!proc || !sysroot)
		return -ENOMEM;
	/* The running kernel's own parameters again, for whatever nmbl reads
	 * of them until it boots something else. */
	if (p->bound && (k = nmbl_sys_umount(proc)) < 0)
		r = k;
	/* An initrd's tree goes with the proc mounted in it. */
	if (p->mounted && p->handover && (k = nmbl_sys_umount_tree(sysroot)) < 0 && r == 0)
		r = k;
	else if (p->mounted && !p->handover && (k = nmbl_sys_umount(sysroot)) < 0 && r == 0)
		r = k;
	if (p->printk[0] && (k = write_sysctl(ctx, "/proc/sys/kernel/printk", p->printk)) < 0 &&
	    r == 0)
		r = k;
	if (p->panic[0] && (k = write_sysctl(ctx, "/proc/sys/kernel/panic", p->panic)) < 0 &&
	    r == 0)
		r = k;
	*p = (struct nmbl_prepared_root){ 0 };
	return r;
}
