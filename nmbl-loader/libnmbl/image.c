/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * A kernel image or UKI on disk, read once and parsed once: what it
 * is, which kernel it holds, and (for a UKI) its parts.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "nmbl-private.h"

struct nmbl_image {
	int refcount;
	void *owned; /* the file's bytes, when read from one */
	size_t len;
	struct nmbl_pe pe;
	struct nmbl_pe inner; /* a UKI's .linux */
	enum nmbl_image_type type;
};

static enum nmbl_image_type classify(struct nmbl_image *img)
{
	const struct nmbl_pe_section *linux_sec;

	linux_sec = nmbl_pe_section(&img->pe, ".linux");
	if (linux_sec) {
		if (nmbl_pe_parse(img->pe.buf + linux_sec->offset,
				  linux_sec->size, &img->inner) < 0 ||
		    !img->inner.is_linux)
			return NMBL_IMAGE_EFI;
		return NMBL_IMAGE_UKI;
	}
	return img->pe.is_linux ? NMBL_IMAGE_LINUX : NMBL_IMAGE_EFI;
}

int nmbl_image_new_from_buffer(const void *buf, size_t len,
			       struct nmbl_image **ret)
{
	struct nmbl_image *img;
	int r;

	img = calloc(1, sizeof(*img));
	if (!img)
		return -ENOMEM;
	r = nmbl_pe_parse(buf, len, &img->pe);
	if (r < 0) {
		free(img);
		return r;
	}
	img->refcount = 1;
	img->len = len;
	img->type = classify(img);
	*ret = img;
	return 0;
}

/*
 * The image in FD, read into memory whole, from its start.  Read, not
 * mapped: a read error of the disk (a bad block, a USB stick pulled out)
 * is then -EIO here, where a mapping would kill the process with SIGBUS.
 * The caller may hand the same FD to kexec_file_load(2), which reads the
 * same file from its start.
 */
int nmbl_image_new_from_fd(struct nmbl_ctx *ctx, int fd, struct nmbl_image **ret)
{
	_cleanup_free_ void *buf = NULL;
	struct nmbl_image *img;
	struct stat st;
	size_t len;
	ssize_t n;
	int r;

	/* FD is nmbl_open_regular()'s: a regular file. */
	if (fstat(fd, &st) < 0)
		return -errno;
	/* Bigger than any kernel or UKI, or than the memory allows: a
	 * guard against reading a disk. */
	if ((uint64_t)st.st_size > nmbl_file_max())
		return -EFBIG;
	if (st.st_size == 0)
		return -ENOEXEC;
	len = (size_t)st.st_size;
	buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	if (lseek(fd, 0, SEEK_SET) < 0)
		return -errno;
	n = nmbl_read_full(fd, buf, len);
	if (n < 0)
		return (int)n;
	/* Shorter than it said: changed under us, or cut off by the disk. */
	if ((size_t)n != len)
		return -EIO;
	r = nmbl_image_new_from_buffer(buf, len, &img);
	if (r < 0) {
		nmbl_dbg(ctx, "not a PE image");
		return r;
	}
	img->owned = TAKE_PTR(buf);
	*ret = img;
	return 0;
}

NMBL_EXPORT int nmbl_image_new_from_file(struct nmbl_ctx *ctx, const char *path,
					 struct nmbl_image **ret)
{
	_cleanup_close_ int fd = -1;

	if (!ctx || !path || !ret)
		return -EINVAL;
	fd = nmbl_open_regular(ctx, path);
	if (fd < 0)
		return fd;
	return nmbl_image_new_from_fd(ctx, fd, ret);
}

void nmbl_kernel_file_clear(struct nmbl_kernel_file *k)
{
	free(k->path);
	if (k->fd >= 0)
		close(k->fd);
	nmbl_image_unref(k->img);
	*k = (struct nmbl_kernel_file){ .fd = -1 };
}

NMBL_EXPORT struct nmbl_image *nmbl_image_ref(struct nmbl_image *img)
{
	if (img)
		img->refcount++;
	return img;
}

NMBL_EXPORT struct nmbl_image *nmbl_image_unref(struct nmbl_image *img)
{
	if (!img || --img->refcount > 0)
		return NULL;
	free(img->owned);
	free(img);
	return NULL;
}

NMBL_EXPORT enum nmbl_image_type nmbl_image_get_type(const struct nmbl_image *img)
{
	return img->type;
}

NMBL_EXPORT const char *nmbl_image_type_to_string(enum nmbl_image_type type)
{
	switch (type) {
	case NMBL_IMAGE_LINUX:
		return "linux";
	case NMBL_IMAGE_UKI:
		return "uki";
	case NMBL_IMAGE_EFI:
		return "efi";
	}
	return NULL;
}

/* The kernel proper: the image itself, or a UKI's .linux. */
static const struct nmbl_pe *kernel_pe(const struct nmbl_image *img)
{
	switch (img->type) {
	case NMBL_IMAGE_LINUX:
		return &img->pe;
	case NMBL_IMAGE_UKI:
		return &img->inner;
	case NMBL_IMAGE_EFI:
		break;
	}
	return NULL;
}

const struct nmbl_pe *nmbl_image_signing_pe(const struct nmbl_image *img)
{
	const struct nmbl_pe *k = kernel_pe(img);

	return k ? k : &img->pe;
}

const struct nmbl_pe *nmbl_image_pe(const struct nmbl_image *img)
{
	return &img->pe;
}

NMBL_EXPORT const char *nmbl_image_get_version(const struct nmbl_image *img)
{
	const struct nmbl_pe *k = kernel_pe(img);

	return k ? k->linux_version : NULL;
}

NMBL_EXPORT size_t nmbl_image_get_cmdline_max(const struct nmbl_image *img)
{
	const struct nmbl_pe *k = kernel_pe(img);

	return k ? k->linux_cmdline_size : 0;
}

NMBL_EXPORT bool nmbl_image_get_truncated(const struct nmbl_image *img)
{
	const struct nmbl_pe *k = kernel_pe(img);

	return img->pe.truncated || (k && k->truncated);
}

NMBL_EXPORT bool nmbl_image_get_signed(const struct nmbl_image *img)
{
	return img->pe.cert_size > 0;
}

NMBL_EXPORT size_t nmbl_image_get_n_sections(const struct nmbl_image *img)
{
	return img->pe.n_sections;
}

NMBL_EXPORT int nmbl_image_get_section(const struct nmbl_image *img, size_t i,
				       char ret_name[9], uint64_t *ret_size)
{
	if (!img || i >= img->pe.n_sections)
		return -ERANGE;
	if (ret_name) {
		memcpy(ret_name, img->pe.sections[i].name, 8);
		ret_name[8] = '\0';
	}
	if (ret_size)
		*ret_size = img->pe.sections[i].size;
	return 0;
}

int nmbl_image_section_data(const struct nmbl_image *img, const char *name,
			    const void **ret_data, size_t *ret_size)
{
	const struct nmbl_pe_section *s = nmbl_pe_section(&img->pe, name);

	if (!s)
		return -ENOENT;
	*ret_data = img->pe.buf + s->offset;
	*ret_size = s->size;
	return 0;
}
