/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Initramfs images as distributions make them (cpio's newc archives, an
 * early uncompressed one first, the rest compressed), read entry by entry
 * as the kernel would unpack them, and unpacked into a directory; and the
 * images the kernel refuses. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "nmbl-private.h"
#include "unit.h"

#define MiB (1024 * 1024)

struct seen {
	char names[4096];
	char link[64];
	char hello[64];
	unsigned files, links, dirs, hardlinked;
};

static int note(const struct nmbl_cpio_entry *e, void *userdata)
{
	struct seen *s = userdata;

	if (strcmp(e->name, NMBL_CPIO_TRAILER) == 0)
		return 0;
	strncat(s->names, e->name, sizeof(s->names) - strlen(s->names) - 2);
	strcat(s->names, " ");
	if (S_ISREG(e->mode))
		s->files++;
	if (S_ISDIR(e->mode))
		s->dirs++;
	if (S_ISREG(e->mode) && e->nlink == 2)
		s->hardlinked++;
	if (S_ISLNK(e->mode)) {
		s->links++;
		snprintf(s->link, sizeof(s->link), "%.*s", (int)e->size, (const char *)e->data);
	}
	if (strcmp(e->name, "etc/hello") == 0)
		snprintf(s->hello, sizeof(s->hello), "%.*s", (int)e->size, (const char *)e->data);
	return 0;
}

/* The image the shell pipeline CMD writes in the fixture's tree ("tree":
 * a file, a directory, a symbolic link, two hard links). */
static void *image(const char *cmd, size_t *ret_len)
{
	static int n;
	char path[64];
	void *buf;
	struct stat st;
	int fd;

	fixture_run("cd %s && mkdir -p tree/etc early/kernel/x86/microcode && "
		    "printf 'hello, world\\n' >tree/etc/hello && ln -sf hello tree/etc/link && "
		    "printf 'twice' >tree/etc/a && ln -f tree/etc/a tree/etc/b && "
		    "printf 'ucode' >early/kernel/x86/microcode/GenuineIntel.bin",
		    fixture_root());
	snprintf(path, sizeof(path), "/image-%d", n++);
	fixture_run("cd %s && { %s; } >%s", fixture_root(), cmd, fixture_path(path));
	fd = open(fixture_path(path), O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		exit(2);
	buf = malloc((size_t)st.st_size + 1);
	if (!buf || read(fd, buf, (size_t)st.st_size) != st.st_size)
		exit(2);
	close(fd);
	*ret_len = (size_t)st.st_size;
	return buf;
}

/* The archives of the two trees, as cpio writes them. */
#define MAIN "(cd tree && find . -mindepth 1 | sort | cpio -o -H newc --quiet)"
#define EARLY "(cd early && find . -mindepth 1 | sort | cpio -o -H newc --quiet)"

static int walk(const char *cmd, struct seen *s)
{
	size_t len;
	void *buf = image(cmd, &len);
	int r;

	memset(s, 0, sizeof(*s));
	r = nmbl_initramfs_walk(buf, len, 64 * MiB, note, s);
	free(buf);
	return r;
}

static void test_early_microcode_then_the_main_archive_each_compression(void)
{
	static const char *const compress[] = { "gzip -9", "xz --check=crc32", "xz --format=lzma",
						 "zstd -q -19", "bzip2", "lz4 -l -q", "lzop -q",
						 "lzop -q -9", "cat" };
	struct seen s;

	for (size_t i = 0; i < ELEMENTSOF(compress); i++) {
		char cmd[512];

		snprintf(cmd, sizeof(cmd), EARLY "; " MAIN " | %s", compress[i]);
		CHECK_INT(walk(cmd, &s), 0);
		CHECK_STR(s.names, "kernel kernel/x86 kernel/x86/microcode "
				   "kernel/x86/microcode/GenuineIntel.bin "
				   "etc etc/a etc/b etc/hello etc/link ");
		CHECK_STR(s.hello, "hello, world\n");
		CHECK_STR(s.link, "hello");
		CHECK_INT(s.links, 1);
		CHECK_INT(s.hardlinked, 2);
	}
}

static void test_several_compressed_streams_and_zero_padding(void)
{
	struct seen s;

	/* An uncompressed archive, gzip, zeros, then xz: the kernel takes
	 * each where the previous one ended. */
	CHECK_INT(walk(EARLY "; " MAIN " | gzip; head -c 511 /dev/zero; " EARLY " | xz --check=crc32",
		       &s), 0);
	CHECK_INT(s.files, 1 + 3 + 1);
	/* Two archives in one compressed stream, zeros between. */
	CHECK_INT(walk("{ " MAIN "; head -c 100 /dev/zero; " EARLY "; } | zstd -q", &s), 0);
	CHECK_INT(s.files, 3 + 1);
	/* zstd frames one after the other, as a multi-threaded zstd writes. */
	CHECK_INT(walk(MAIN " | zstd -q; " EARLY " | zstd -q", &s), 0);
	CHECK_INT(s.files, 3 + 1);
	/* lz4's legacy frames mark no end: zeros after them end them, and
	 * a bzip2 stream after that is read. */
	CHECK_INT(walk(MAIN " | lz4 -l -q; head -c 8 /dev/zero; " EARLY " | bzip2", &s), 0);
	CHECK_INT(s.files, 3 + 1);
}

static void test_what_the_kernel_refuses_is_refused(void)
{
	struct seen s;

	/* Truncated compressed streams. */
	CHECK_INT(walk(MAIN " | zstd -q | head -c 100", &s), -EBADMSG);
	CHECK_INT(walk(MAIN " | gzip | head -c 100", &s), -EBADMSG);
	CHECK_INT(walk(MAIN " | xz | head -c 100", &s), -EBADMSG);
	/* A truncated archive, and one without its trailer. */
	CHECK_INT(walk(MAIN " | head -c 300", &s), -EBADMSG);
	CHECK_INT(walk(MAIN " | head -c 512 | tail -c 200", &s), -EBADMSG);
	/* Junk where an archive or a stream should start, and an archive
	 * that does not start on a 4-byte boundary. */
	CHECK_INT(walk("printf 'junk'; " MAIN, &s), -EBADMSG);
	CHECK_INT(walk("printf 'x'; " MAIN, &s), -EBADMSG);
	/* Junk inside a compressed stream, after its archive. */
	CHECK_INT(walk("{ " MAIN "; printf 'junk'; } | gzip", &s), -EBADMSG);
	CHECK_INT(walk(MAIN " | bzip2 | head -c 100", &s), -EBADMSG);
	CHECK_INT(walk(MAIN " | lz4 -l -q | head -c 100", &s), -EBADMSG);
	CHECK_INT(walk(MAIN " | lzop -q | head -c 100", &s), -EBADMSG);
	/* 0x89 'L' is lzop to the kernel: the rest of its magic must follow. */
	CHECK_INT(walk("printf '\\211LZX\\000\\r\\n\\032\\n0123456789abcdef'", &s), -EBADMSG);
}

static int refuse_links(const struct nmbl_cpio_entry *e, void *userdata)
{
	(void)userdata;
	return S_ISLNK(e->mode) ? -ELOOP : 0;
}

static void test_a_bound_and_the_callback_stop_the_walk(void)
{
	size_t len;
	void *buf = image("{ " MAIN "; head -c 3000000 /dev/zero; } | zstd -q", &len);

	CHECK_INT(nmbl_initramfs_walk(buf, len, 1 * MiB, refuse_links, NULL), -EFBIG);
	CHECK_INT(nmbl_initramfs_walk(buf, len, 64 * MiB, refuse_links, NULL), -ELOOP);
	CHECK_INT(nmbl_initramfs_walk(buf, 0, 64 * MiB, refuse_links, NULL), 0);
	CHECK_INT(nmbl_initramfs_walk(buf, len, 64 * MiB, NULL, NULL), -EINVAL);
	free(buf);
}

/* A newc entry at BUF + *OFF, padded as cpio pads it; a device node's
 * number RDEV_MAJOR:RDEV_MINOR. */
static void newc_node(uint8_t *buf, size_t *off, const char *name, uint32_t mode, uint32_t ino,
		      uint32_t nlink, const char *data, uint32_t rdev_major, uint32_t rdev_minor)
{
	size_t size = data ? strlen(data) : 0, namesize = strlen(name) + 1;

	*off += (size_t)sprintf((char *)buf + *off,
				"070701%08X%08X%08X%08X%08X%08X%08zX%08X%08X%08X%08X%08zX%08X",
				ino, mode, 0u, 0u, nlink, 1000000000u, size, 0u, 0u, rdev_major,
				rdev_minor, namesize, 0u);
	memcpy(buf + *off, name, namesize);
	*off = (*off + namesize + 3) & ~(size_t)3;
	memcpy(buf + *off, data ? data : "", size);
	*off = (*off + size + 3) & ~(size_t)3;
}

static void newc(uint8_t *buf, size_t *off, const char *name, uint32_t mode, uint32_t ino,
		 uint32_t nlink, const char *data)
{
	newc_node(buf, off, name, mode, ino, nlink, data, 0, 0);
}

static int open_dir(const char *name)
{
	int fd;

	fixture_run("rm -rf %s && mkdir -p %s", fixture_path(name), fixture_path(name));
	fd = open(fixture_path(name), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		exit(2);
	return fd;
}

static void test_unpacked_as_the_kernel_makes_it(void)
{
	size_t len;
	void *buf = image(EARLY "; " MAIN " | zstd -q", &len);
	int dfd = open_dir("/root");
	struct stat a, b, link;
	char text[64] = "";

	CHECK_INT(nmbl_initramfs_unpack(buf, len, 64 * MiB, dfd), 0);
	CHECK_INT(fstatat(dfd, "etc/a", &a, 0), 0);
	CHECK_INT(fstatat(dfd, "etc/b", &b, 0), 0);
	CHECK_INT(a.st_ino == b.st_ino, 1);
	CHECK_INT((int)a.st_nlink, 2);
	CHECK_INT(fstatat(dfd, "etc/link", &link, AT_SYMLINK_NOFOLLOW), 0);
	CHECK_INT(S_ISLNK(link.st_mode), 1);
	CHECK_INT((int)readlinkat(dfd, "etc/link", text, sizeof(text) - 1), 5);
	CHECK_STR(text, "hello");
	fixture_run("cmp -s %s/tree/etc/hello %s/root/etc/hello && "
		    "test -s %s/root/kernel/x86/microcode/GenuineIntel.bin",
		    fixture_root(), fixture_root(), fixture_root());
	/* Unpacked again, over itself, as a second initrd would be. */
	CHECK_INT(nmbl_initramfs_unpack(buf, len, 64 * MiB, dfd), 0);
	CHECK_INT(fstatat(dfd, "etc/b", &b, 0), 0);
	CHECK_INT((int)b.st_size, 5);
	close(dfd);
	free(buf);
}

static void test_what_an_archive_names_stays_inside(void)
{
	static uint8_t buf[8192];
	int dfd = open_dir("/root"), out;
	struct stat st;
	size_t off = 0;

	fixture_run("rm -rf %s && mkdir -p %s", fixture_path("/outside"), fixture_path("/outside"));
	newc(buf, &off, "../../escape", S_IFREG | 0644, 1, 1, "x");
	newc(buf, &off, "up", S_IFLNK | 0777, 2, 1, "../../..");
	newc(buf, &off, "up/escape-too", S_IFREG | 0644, 3, 1, "x");
	newc(buf, &off, "abs", S_IFLNK | 0777, 4, 1, fixture_path("/outside"));
	newc(buf, &off, "abs/escape", S_IFREG | 0644, 5, 1, "x");
	newc(buf, &off, "proc", S_IFLNK | 0777, 6, 1, "/proc/self/cwd");
	newc(buf, &off, "proc/escape", S_IFREG | 0644, 7, 1, "x");
	/* A file over a link is the file, not the link's target. */
	newc(buf, &off, "last", S_IFLNK | 0777, 8, 1, fixture_path("/outside/last"));
	newc(buf, &off, "last", S_IFREG | 0600, 9, 1, "mine");
	/* A hard link to a name of another archive is no link. */
	newc(buf, &off, "etc", S_IFDIR | 0755, 10, 2, NULL);
	newc(buf, &off, "etc/one", S_IFREG | 0644, 11, 2, "one");
	newc(buf, &off, NMBL_CPIO_TRAILER, 0, 0, 1, NULL);
	newc(buf, &off, "etc/two", S_IFREG | 0644, 11, 2, "two");
	newc(buf, &off, "dev", S_IFDIR | 0755, 12, 2, NULL);
	newc(buf, &off, "dev/console", S_IFCHR | 0600, 13, 1, NULL);
	newc(buf, &off, NMBL_CPIO_TRAILER, 0, 0, 1, NULL);
	CHECK_INT(nmbl_initramfs_unpack(buf, off, MiB, dfd), 0);
	CHECK_INT(fstatat(dfd, "escape", &st, 0), 0);
	CHECK_INT(fstatat(dfd, "escape-too", &st, 0), 0);
	CHECK_INT(fstatat(dfd, "last", &st, AT_SYMLINK_NOFOLLOW), 0);
	CHECK_INT(S_ISREG(st.st_mode) && st.st_size == 4 && (st.st_mode & 07777) == 0600, 1);
	CHECK_INT(fstatat(dfd, "etc/two", &st, 0), 0);
	CHECK_INT((int)st.st_nlink, 1);
	CHECK_INT(fstatat(dfd, "dev/console", &st, 0), 0);
	CHECK_INT(S_ISCHR(st.st_mode) && major(st.st_rdev) == 0, 1);
	out = open(fixture_path("/outside"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK_INT(out >= 0, 1);
	CHECK_INT(faccessat(out, "escape", F_OK, 0), -1);
	CHECK_INT(faccessat(out, "last", F_OK, 0), -1);
	CHECK_INT(access(fixture_path("/../escape"), F_OK), -1);
	close(out);
	close(dfd);
}

static volatile sig_atomic_t alarmed;

static void on_alarm(int sig)
{
	(void)sig;
	alarmed = 1;
}

/*
 * An archive that makes "f" a file, then "f" a device node or a FIFO, then
 * "g" a hard link to the first "f" (its device and inode): before, "g" was
 * linked to the node and opened for writing without O_TRUNC, and the
 * file's bytes went into the device (with a disk's number, a raw write to
 * the disk by process 1), or process 1 blocked on the FIFO for ever.  Now
 * a link is made only to what the first entry made, and the bytes go into
 * nothing but a regular file, without blocking.  (An alarm ends a blocked
 * open, so that a regression fails here rather than hangs.)
 */
static void test_a_hard_link_never_writes_into_a_node(void)
{
	static const struct {
		uint32_t mode, major, minor;
	} nodes[] = {
		{ S_IFCHR | 0600, 1, 3 }, /* /dev/null's number */
		{ S_IFIFO | 0600, 0, 0 },
	};
	struct sigaction sa = { .sa_handler = on_alarm }, old;

	/* No SA_RESTART: the alarm interrupts an open that blocks. */
	CHECK_INT(sigaction(SIGALRM, &sa, &old), 0);
	for (size_t i = 0; i < ELEMENTSOF(nodes); i++) {
		static uint8_t buf[4096];
		int dfd = open_dir("/root");
		struct stat st;
		size_t off = 0;

		newc(buf, &off, "f", S_IFREG | 0644, 1, 2, NULL);
		newc_node(buf, &off, "f", nodes[i].mode, 2, 1, NULL, nodes[i].major, nodes[i].minor);
		newc(buf, &off, "g", S_IFREG | 0644, 1, 2, "bytes");
		newc(buf, &off, NMBL_CPIO_TRAILER, 0, 0, 1, NULL);
		alarmed = 0;
		alarm(2);
		CHECK_INT(nmbl_initramfs_unpack(buf, off, MiB, dfd), 0);
		alarm(0);
		CHECK_INT(alarmed, 0);
		/* The node is there as the archive made it, alone. */
		CHECK_INT(fstatat(dfd, "f", &st, AT_SYMLINK_NOFOLLOW), 0);
		CHECK_INT(st.st_mode & S_IFMT, nodes[i].mode & S_IFMT);
		CHECK_INT((int)st.st_nlink, 1);
		CHECK_INT(st.st_rdev == makedev(nodes[i].major, nodes[i].minor), 1);
		/* "g" is no name of it: as a link the kernel could not make,
		 * it is not there. */
		CHECK_INT(fstatat(dfd, "g", &st, AT_SYMLINK_NOFOLLOW), -1);
		close(dfd);
	}
	CHECK_INT(sigaction(SIGALRM, &old, NULL), 0);
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_early_microcode_then_the_main_archive_each_compression,
		test_several_compressed_streams_and_zero_padding,
		test_what_the_kernel_refuses_is_refused,
		test_a_bound_and_the_callback_stop_the_walk,
		test_unpacked_as_the_kernel_makes_it,
		test_what_an_archive_names_stays_inside,
		test_a_hard_link_never_writes_into_a_node,
		NULL,
	};

	return unit_main(tests);
}
