/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * An initramfs image unpacked into a directory as the kernel unpacks one
 * into its root (init/initramfs.c's do_name(), do_copy(), do_symlink()):
 * an entry of another type than what its name holds already replaces it;
 * a regular file or a node with more than one link, seen again by device
 * and inode within one archive, becomes a hard link (when the first name
 * still holds what the first entry made: link_to()); owners, modes and
 * times as archived, a directory's time set last.  Where the kernel
 * ignores a failure (a missing parent, an existing directory or link), so
 * does this; a failed write of a file's bytes is an error.
 *
 * The image is the entry's, read from a disk: every name is resolved
 * inside the directory, as RESOLVE_IN_ROOT resolves it (".." stops at the
 * top, a link's target, absolute too, stays inside), no magic link and
 * no other mount followed, and a name's last part is never followed.
 */
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "nmbl-private.h"

struct seen_link {
	uint32_t ino, dev_major, dev_minor, mode;
	char *name;
};

struct dir_time {
	char *name;
	uint32_t mtime;
};

struct unpack {
	int dfd;
	struct seen_link *links;
	size_t n_links;
	struct dir_time *dirs;
	size_t n_dirs;
};

static void forget_links(struct unpack *u)
{
	for (size_t i = 0; i < u->n_links; i++)
		free(u->links[i].name);
	free(u->links);
	u->links = NULL;
	u->n_links = 0;
}

/* The directory that holds NAME, resolved inside the root. */
static int open_parent(const struct unpack *u, const char *name, size_t len)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	_cleanup_free_ char *parent = NULL;
	int fd;

	if (len == 0) {
		fd = fcntl(u->dfd, F_DUPFD_CLOEXEC, 3);
	} else {
		parent = strndup(name, len);
		if (!parent)
			return -ENOMEM;
		fd = (int)syscall(SYS_openat2, u->dfd, parent, &how, sizeof(how));
	}
	return fd < 0 ? -errno : fd;
}

/* An earlier name of E's file in this archive, remembered when there is
 * none yet (the kernel's find_link()). */
static int earlier_name(struct unpack *u, const struct nmbl_cpio_entry *e, const char *name,
			const char **ret)
{
	struct seen_link *links;

	*ret = NULL;
	for (size_t i = 0; i < u->n_links; i++) {
		const struct seen_link *l = &u->links[i];

		if (l->ino == e->ino && l->dev_major == e->dev_major &&
		    l->dev_minor == e->dev_minor && ((l->mode ^ e->mode) & S_IFMT) == 0) {
			*ret = l->name;
			return 0;
		}
	}
	links = reallocarray(u->links, u->n_links + 1, sizeof(*links));
	if (!links)
		return -ENOMEM;
	u->links = links;
	links[u->n_links] = (struct seen_link){ .ino = e->ino, .dev_major = e->dev_major,
						 .dev_minor = e->dev_minor, .mode = e->mode,
						 .name = strdup(name) };
	if (!links[u->n_links].name)
		return -ENOMEM;
	u->n_links++;
	return 0;
}

/* Whether ST is the file E's entry makes: its type, and for a device node
 * its number. */
static bool same_kind(const struct stat *st, const struct nmbl_cpio_entry *e)
{
	if ((st->st_mode & S_IFMT) != (e->mode & S_IFMT))
		return false;
	if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode))
		return st->st_rdev == makedev(e->rdev_major, e->rdev_minor);
	return true;
}

/*
 * Hard-link NAME (LAST in PFD) to OLD: 1 when linked, 0 when not.  Not
 * when OLD is gone, as the kernel's link fails then, nor when OLD holds
 * something else now than the first entry made: an archive that makes
 * "f" a file, then "f" a device node or a FIFO, then "g" a link to the
 * file, would have the file's bytes written into the node, a disk's say,
 * or process 1 blocked on the FIFO forever.
 */
static int link_to(const struct unpack *u, const struct nmbl_cpio_entry *e, const char *old,
		   int pfd, const char *last)
{
	const char *slash = strrchr(old, '/');
	const char *old_last = slash ? slash + 1 : old;
	_cleanup_close_ int opfd = open_parent(u, old, slash ? (size_t)(slash - old) : 0);
	struct stat st;

	if (opfd == -ENOMEM)
		return -ENOMEM;
	(void)unlinkat(pfd, last, 0);
	if (opfd < 0 || fstatat(opfd, old_last, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !same_kind(&st, e))
		return 0;
	if (linkat(opfd, old_last, pfd, last, 0) < 0)
		return 0;
	return 1;
}

static const struct timespec *times_of(const struct nmbl_cpio_entry *e, struct timespec t[2])
{
	t[0] = t[1] = (struct timespec){ .tv_sec = e->mtime };
	return t;
}

/* The file's bytes go into a regular file, nothing else: should its name
 * hold anything else all the same, that is neither blocked on (a FIFO),
 * nor written to, nor made process 1's controlling terminal. */
static int make_file(const struct nmbl_cpio_entry *e, int pfd, const char *last, bool linked)
{
	_cleanup_close_ int fd = -1;
	struct timespec t[2];
	struct stat st;
	int r;

	fd = openat(pfd, last,
		    O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC |
			    (linked ? 0 : O_TRUNC),
		    0600);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return 0;
	if (fchown(fd, e->uid, e->gid) < 0 || fchmod(fd, e->mode & 07777) < 0)
		return -errno;
	r = nmbl_write_full(fd, e->data, e->size);
	if (r < 0)
		return r;
	if (e->size && ftruncate(fd, (off_t)e->size) < 0)
		return -errno;
	return futimens(fd, times_of(e, t)) < 0 ? -errno : 0;
}

static int make_dir(struct unpack *u, const struct nmbl_cpio_entry *e, const char *name,
		    int pfd, const char *last)
{
	_cleanup_close_ int fd = -1;
	struct dir_time *dirs;

	(void)mkdirat(pfd, last, 0700);
	fd = openat(pfd, last, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (fchown(fd, e->uid, e->gid) < 0 || fchmod(fd, e->mode & 07777) < 0)
		return -errno;
	dirs = reallocarray(u->dirs, u->n_dirs + 1, sizeof(*dirs));
	if (!dirs)
		return -ENOMEM;
	u->dirs = dirs;
	dirs[u->n_dirs] = (struct dir_time){ .name = strdup(name), .mtime = e->mtime };
	if (!dirs[u->n_dirs].name)
		return -ENOMEM;
	u->n_dirs++;
	return 0;
}

static int make_symlink(const struct nmbl_cpio_entry *e, int pfd, const char *last)
{
	char target[PATH_MAX];
	struct timespec t[2];

	if (e->size >= sizeof(target) || memchr(e->data, '\0', e->size))
		return 0;
	memcpy(target, e->data, e->size);
	target[e->size] = '\0';
	if (symlinkat(target, pfd, last) < 0)
		return 0;
	if (fchownat(pfd, last, e->uid, e->gid, AT_SYMLINK_NOFOLLOW) < 0 ||
	    utimensat(pfd, last, times_of(e, t), AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return 0;
}

static int make_node(const struct nmbl_cpio_entry *e, int pfd, const char *last)
{
	struct timespec t[2];

	if (mknodat(pfd, last, e->mode & (S_IFMT | 07777),
		    makedev(e->rdev_major, e->rdev_minor)) < 0)
		return 0;
	if (fchownat(pfd, last, e->uid, e->gid, AT_SYMLINK_NOFOLLOW) < 0 ||
	    fchmodat(pfd, last, e->mode & 07777, 0) < 0 ||
	    utimensat(pfd, last, times_of(e, t), AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return 0;
}

static int unpack_entry(const struct nmbl_cpio_entry *e, void *userdata)
{
	struct unpack *u = userdata;
	const char *name = e->name, *last, *old = NULL;
	_cleanup_close_ int pfd = -1;
	bool linked = false;
	struct stat st;
	int r;

	if (e->mode == 0 && strcmp(name, NMBL_CPIO_TRAILER) == 0) {
		forget_links(u);
		return 0;
	}
	while (*name == '/' || (name[0] == '.' && name[1] == '/'))
		name += *name == '/' ? 1 : 2;
	last = strrchr(name, '/');
	last = last ? last + 1 : name;
	/* The top itself, or a name the kernel cannot make either. */
	if (!*last || strcmp(last, ".") == 0 || strcmp(last, "..") == 0)
		return 0;
	pfd = open_parent(u, name, last > name ? (size_t)(last - name - 1) : 0);
	if (pfd == -ENOMEM)
		return pfd;
	if (pfd < 0)
		return 0;
	/* What is there of another type goes (the kernel's clean_path()). */
	if (fstatat(pfd, last, &st, AT_SYMLINK_NOFOLLOW) == 0 && ((st.st_mode ^ e->mode) & S_IFMT))
		(void)unlinkat(pfd, last, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0);
	if (e->nlink >= 2 && !S_ISDIR(e->mode) && !S_ISLNK(e->mode)) {
		r = earlier_name(u, e, name, &old);
		if (r < 0)
			return r;
		if (old) {
			r = link_to(u, e, old, pfd, last);
			if (r <= 0)
				return r;
			linked = true;
		}
	}
	switch (e->mode & S_IFMT) {
	case S_IFREG:
		return make_file(e, pfd, last, linked);
	case S_IFDIR:
		return make_dir(u, e, name, pfd, last);
	case S_IFLNK:
		return make_symlink(e, pfd, last);
	case S_IFCHR:
	case S_IFBLK:
	case S_IFIFO:
	case S_IFSOCK:
		return linked ? 0 : make_node(e, pfd, last);
	default:
		return 0;
	}
}

/* Directories' times last: making what is in them changed them. */
static void set_dir_times(const struct unpack *u)
{
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};

	for (size_t i = u->n_dirs; i-- > 0;) {
		struct timespec t[2] = { { .tv_sec = u->dirs[i].mtime }, { .tv_sec = u->dirs[i].mtime } };
		int fd = (int)syscall(SYS_openat2, u->dfd, u->dirs[i].name, &how, sizeof(how));

		if (fd >= 0) {
			(void)futimens(fd, t);
			close(fd);
		}
	}
}

int nmbl_initramfs_unpack(const void *image, size_t len, size_t max_unpacked, int dfd)
{
	struct unpack u = { .dfd = dfd };
	int r;

	if (dfd < 0)
		return -EINVAL;
	r = nmbl_initramfs_walk(image, len, max_unpacked, unpack_entry, &u);
	if (r == 0)
		set_dir_times(&u);
	forget_links(&u);
	for (size_t i = 0; i < u.n_dirs; i++)
		free(u.dirs[i].name);
	free(u.dirs);
	return r;
}
