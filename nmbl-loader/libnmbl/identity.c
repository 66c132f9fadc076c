/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * Whether a kernel image is the kernel that is running: the question direct
 * boot asks before it switches root instead of booting a second kernel.
 * Never by file name.  The image's version string and /proc/version carry
 * the same three parts of the kernel's identity, which change with every
 * build: the release, who built it where, and the build's version ("#1 SMP
 * PREEMPT_DYNAMIC Debian 6.1.158-1 (2025-11-03)", with its number and
 * date).  /proc/version has the compiler in between:
 *
 *   image:         RELEASE (BUILDER) VERSION
 *   /proc/version: Linux version RELEASE (BUILDER) (COMPILER) VERSION
 *
 * A signature does not change them: a re-signed kernel is the same kernel.
 */
#include <string.h>

#include "nmbl-private.h"

struct kernel_identity {
	const char *release, *builder, *version;
	size_t release_len, builder_len;
};

/* A parenthesised group at *S, nested ones included; *S moves past it. */
static bool group(const char **s, const char **ret, size_t *ret_len)
{
	const char *p = *s;
	int depth = 0;

	if (*p != '(')
		return false;
	for (; *p; p++) {
		if (*p == '(')
			depth++;
		else if (*p == ')' && --depth == 0) {
			*ret = *s + 1;
			*ret_len = (size_t)(p - *s - 1);
			*s = p + 1;
			return true;
		}
	}
	return false;
}

static bool parse_identity(const char *s, bool with_compiler, struct kernel_identity *ret)
{
	const char *compiler;
	size_t compiler_len;

	ret->release = s;
	ret->release_len = strcspn(s, " ");
	s += ret->release_len;
	if (ret->release_len == 0 || *s++ != ' ' || !group(&s, &ret->builder, &ret->builder_len))
		return false;
	if (with_compiler && (*s++ != ' ' || !group(&s, &compiler, &compiler_len)))
		return false;
	if (*s++ != ' ' || !*s)
		return false;
	ret->version = s;
	return true;
}

/* /proc/version's line (*RET_TEXT, malloc'ed), and where the identity
 * starts in it, after "Linux version ". */
static int proc_version(const struct nmbl_ctx *ctx, char **ret_text, const char **ret_identity)
{
	static const char prefix[] = "Linux version ";
	char *text = NULL;
	size_t len;
	int r;

	r = nmbl_read_file(ctx, "/proc/version", NMBL_SMALL_FILE_MAX, &text, &len);
	if (r < 0)
		return r;
	text[strcspn(text, "\n")] = '\0';
	if (strncmp(text, prefix, sizeof(prefix) - 1) != 0) {
		free(text);
		return -EBADMSG;
	}
	*ret_text = text;
	*ret_identity = text + sizeof(prefix) - 1;
	return 0;
}

int nmbl_running_release(const struct nmbl_ctx *ctx, char *buf, size_t size)
{
	_cleanup_free_ char *text = NULL;
	const char *identity;
	size_t len;
	int r;

	r = proc_version(ctx, &text, &identity);
	if (r < 0)
		return r;
	len = strcspn(identity, " ");
	if (len == 0 || len >= size)
		return -EBADMSG;
	memcpy(buf, identity, len);
	buf[len] = '\0';
	return 0;
}

NMBL_EXPORT int nmbl_image_is_running_kernel(struct nmbl_ctx *ctx, const struct nmbl_image *img)
{
	struct kernel_identity running, image;
	_cleanup_free_ char *text = NULL;
	const char *version, *identity;
	int r;

	if (!ctx || !img)
		return -EINVAL;
	version = nmbl_image_get_version(img);
	if (!version || !parse_identity(version, false, &image))
		return -ENODATA;
	r = proc_version(ctx, &text, &identity);
	if (r < 0)
		return r;
	if (!parse_identity(identity, true, &running))
		return -EBADMSG;
	return running.release_len == image.release_len &&
	       memcmp(running.release, image.release, image.release_len) == 0 &&
	       running.builder_len == image.builder_len &&
	       memcmp(running.builder, image.builder, image.builder_len) == 0 &&
	       strcmp(running.version, image.version) == 0;
}
