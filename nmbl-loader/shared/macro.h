/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * Helpers the library and the programs share, as kmod's shared/ serves
 * libkmod and its tools: header-only, nothing exported, nothing of nmbl's
 * interface (that is libnmbl.h).
 */
#ifndef NMBL_MACRO_H
#define NMBL_MACRO_H

#include <stdlib.h>
#include <unistd.h>

/* The number of elements of the array X.  A pointer is a build error (a
 * void expression where a number is wanted), not sizeof(pointer) / ...:
 * &*(x) has X's own type only when X is a pointer (systemd's ELEMENTSOF). */
#define ELEMENTSOF(x)                                                         \
	__builtin_choose_expr(                                                \
		!__builtin_types_compatible_p(__typeof__(x), __typeof__(&*(x))), \
		sizeof(x) / sizeof((x)[0]), (void)0)

#define _cleanup_(f) __attribute__((cleanup(f)))
/* FUNCp(), which a _cleanup_ variable of TYPE (a pointer) calls: FUNC on
 * it unless it is NULL (systemd's DEFINE_TRIVIAL_CLEANUP_FUNC). */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func) \
	static inline void func##p(type *p)     \
	{                                       \
		if (*p)                         \
			func(*p);               \
	}

static inline void nmbl_freep(void *p)
{
	free(*(void **)p);
}
static inline void nmbl_closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}
#define _cleanup_free_ _cleanup_(nmbl_freep)
#define _cleanup_close_ _cleanup_(nmbl_closep)

static inline void *nmbl_take_ptr(void *pp)
{
	void **p = pp;
	void *v = *p;

	*p = NULL;
	return v;
}
#define TAKE_PTR(p) nmbl_take_ptr(&(p))
static inline int nmbl_take_fd(int *fd)
{
	int v = *fd;

	*fd = -1;
	return v;
}
#define TAKE_FD(fd) nmbl_take_fd(&(fd))

#endif
