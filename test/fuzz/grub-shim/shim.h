/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * Just enough of GRUB's interfaces, on libc, to build a GRUB command's
 * parser outside GRUB for the fuzzers: blscfg.c's entry parser, version
 * comparison and variable expansion get libFuzzer's inputs through the same
 * functions GRUB calls.  Files are one buffer the fuzzer sets; the
 * environment is a fixed table; menu entries are dropped.
 */
#ifndef NMBL_GRUB_SHIM_H
#define NMBL_GRUB_SHIM_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef size_t grub_size_t;
typedef ssize_t grub_ssize_t;
typedef uint64_t grub_off_t;

typedef enum {
	GRUB_ERR_NONE = 0,
	GRUB_ERR_OUT_OF_MEMORY,
	GRUB_ERR_BAD_ARGUMENT,
	GRUB_ERR_FILE_READ_ERROR,
	GRUB_ERR_OUT_OF_RANGE,
	GRUB_ERR_FILE_NOT_FOUND,
} grub_err_t;

extern grub_err_t grub_errno;

static inline grub_err_t grub_error(grub_err_t err, const char *fmt, ...)
{
	(void)fmt;
	grub_errno = err;
	return err;
}
static inline void grub_print_error(void)
{
	grub_errno = GRUB_ERR_NONE;
}
#define N_(s) (s)
#define grub_dprintf(cond, ...) ((void)(cond))
#define grub_printf_(...) ((void)0)

#define grub_strchr strchr
#define grub_strrchr strrchr
#define grub_strcmp strcmp
#define grub_strlen strlen
#define grub_memcpy memcpy
#define grub_memcmp memcmp
#define grub_stpcpy stpcpy
#define grub_isalnum(c) isalnum((unsigned char)(c))
#define grub_isalpha(c) isalpha((unsigned char)(c))
#define grub_isdigit(c) isdigit((unsigned char)(c))
#define grub_free free
#define grub_malloc malloc
#define grub_realloc realloc

static inline void *grub_zalloc(grub_size_t n)
{
	return calloc(1, n);
}
static inline void *grub_calloc(grub_size_t n, grub_size_t size)
{
	return calloc(n, size);
}
static inline char *grub_strdup(const char *s)
{
	return strdup(s);
}
static inline char *grub_strndup(const char *s, grub_size_t n)
{
	return strndup(s, n);
}
__attribute__((format(printf, 1, 2)))
static inline char *grub_xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&s, fmt, ap);
	va_end(ap);
	return r < 0 ? NULL : s;
}

const char *grub_env_get(const char *name);

/* Files: every file holds the fuzzer's current input. */
struct grub_file {
	size_t size;
};
typedef struct grub_file *grub_file_t;
enum grub_file_type { GRUB_FILE_TYPE_CONFIG };
grub_file_t grub_file_open(const char *name, enum grub_file_type type);
grub_ssize_t grub_file_read(grub_file_t file, void *buf, grub_size_t len);
static inline grub_off_t grub_file_size(grub_file_t file)
{
	return file->size;
}
static inline void grub_file_close(grub_file_t file)
{
	free(file);
}

/* Devices and file systems: never reached by what the fuzzers call. */
typedef struct grub_device *grub_device_t;
struct grub_dirhook_info {
	unsigned dir : 1;
};
typedef int (*grub_fs_dir_hook_t)(const char *, const struct grub_dirhook_info *, void *);
typedef struct grub_fs {
	grub_err_t (*fs_dir)(grub_device_t, const char *, grub_fs_dir_hook_t, void *);
} *grub_fs_t;
static inline grub_device_t grub_device_open(const char *name)
{
	(void)name;
	grub_errno = GRUB_ERR_FILE_NOT_FOUND;
	return NULL;
}
static inline void grub_device_close(grub_device_t dev)
{
	(void)dev;
}
static inline grub_fs_t grub_fs_probe(grub_device_t dev)
{
	(void)dev;
	return NULL;
}

/* Commands and menus. */
typedef struct grub_command *grub_command_t;
typedef grub_err_t (*grub_command_func_t)(grub_command_t, int, char **);
static inline grub_command_t grub_register_command(const char *name, grub_command_func_t fn,
						   const char *summary, const char *desc)
{
	(void)name, (void)fn, (void)summary, (void)desc;
	return NULL;
}
static inline void grub_unregister_command(grub_command_t cmd)
{
	(void)cmd;
}
typedef struct grub_blsuki_entry grub_blsuki_entry_t;
grub_err_t grub_normal_add_menu_entry(int argc, const char **args, char **classes,
				      const char *id, const char *users, const char *hotkey,
				      const char *prefix, const char *sourcecode, int submenu,
				      grub_blsuki_entry_t *blsuki);

#define GRUB_MOD_LICENSE(l)
#define GRUB_MOD_INIT(name) void grub_mod_init_##name(void); void grub_mod_init_##name(void)
#define GRUB_MOD_FINI(name) void grub_mod_fini_##name(void); void grub_mod_fini_##name(void)

#endif
