/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * nmbl-init: A direct boot's last step: the switch of root.
 */
#include "init.h"
#include <sys/mount.h>

/* Unlink everything on the initramfs (rootfs cannot be unmounted, so its
 * memory is freed this way), not crossing into other file systems. */
void remove_tree(int dfd, dev_t rootdev)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (!d) {
		close(dfd);
		return;
	}
	while ((de = readdir(d))) {
		struct stat st;
		bool dir;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != rootdev)
			continue;
		dir = S_ISDIR(st.st_mode);
		if (dir) {
			int sub = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub >= 0)
				remove_tree(sub, rootdev);
		}
		(void)unlinkat(dfd, de->d_name, dir ? AT_REMOVEDIR : 0);
	}
	closedir(d);
}

/*
 * Returns only on failure.  The target's root is on NMBL_SYSROOT: the
 * kernel's file systems move there, with what nmbl mounted on them (the
 * entry's line on /proc/cmdline).  An entry's initrd there mounts its own,
 * as on the kernel's rootfs: nmbl's go instead (/proc too: the initrd's
 * tree may have its own proc mounted, with the line on it).
 */
void switch_root(struct nmbl_ctx *ctx)
{
	static const char *const moves[] = { "/dev", "/proc", "/sys", "/run" };
	bool initrd = false;
	const char *init = nmbl_switch_root_init(ctx, &initrd);
	struct stat root;
	int fd;

	if (!init || stat("/", &root) < 0)
		return;
	/* Nothing of nmbl goes along into the target's /run. */
	fd = open(RUN_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		struct stat run;

		if (fstat(fd, &run) == 0) {
			remove_tree(fd, run.st_dev);
			(void)rmdir(RUN_DIR);
		} else {
			close(fd);
		}
	}
	for (size_t i = 0; i < ELEMENTSOF(moves); i++) {
		char to[64];

		snprintf(to, sizeof(to), NMBL_SYSROOT "%s", moves[i]);
		if (!initrd && mount(moves[i], to, NULL, MS_MOVE, NULL) == 0)
			continue;
		if (!initrd)
			say("cannot move %s to %s: %m", moves[i], to);
		(void)umount2(moves[i], MNT_DETACH);
	}
	if (chdir(NMBL_SYSROOT) < 0)
		return;
	fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0)
		remove_tree(fd, root.st_dev);
	if (mount(".", "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0 || chdir("/") < 0) {
		say("cannot switch root to " NMBL_SYSROOT ": %m");
		return;
	}
	/* The environment the kernel gave, without what nmbl set for the
	 * menu. */
	(void)unsetenv(CMDPATH_ENV);
	(void)unsetenv(NET_CARDS_ENV);
	execl(init, init, (char *)NULL);
	say("cannot start %s: %m", init);
}
