/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * libFuzzer entry for blscfg's parser (GRUB patch 0005), built outside
 * GRUB on a shim of its interfaces (grub-shim/): the bytes are a Boot
 * Loader Specification entry as read from /loader/entries, and their first
 * two lines are also two entry names for the version comparison, which
 * must order any two names one way only.
 */
#include "shim.h"

#include BLSCFG_C

/* nmbl's helpers, after GRUB's code: it is compiled as GRUB has it. */
#include "macro.h"

grub_err_t grub_errno;

static const uint8_t *input;
static size_t input_size;

const char *grub_env_get(const char *name)
{
	static const char *const env[][2] = {
		{ "kernelopts", "root=UUID=8b5e0f3c ro rhgb quiet" },
		{ "tuned_params", "skew_tick=1" },
		{ "save_default", "true" },
		{ "grub_users", "root" },
	};

	for (size_t i = 0; i < ELEMENTSOF(env); i++)
		if (strcmp(name, env[i][0]) == 0)
			return env[i][1];
	return NULL;
}

grub_file_t grub_file_open(const char *name, enum grub_file_type type)
{
	grub_file_t file = malloc(sizeof(*file));

	(void)name, (void)type;
	if (file)
		file->size = input_size;
	return file;
}

grub_ssize_t grub_file_read(grub_file_t file, void *buf, grub_size_t len)
{
	(void)file;
	len = len < input_size ? len : input_size;
	memcpy(buf, input, len);
	return (grub_ssize_t)len;
}

grub_err_t grub_normal_add_menu_entry(int argc, const char **args, char **classes,
				      const char *id, const char *users, const char *hotkey,
				      const char *prefix, const char *sourcecode, int submenu,
				      grub_blsuki_entry_t *blsuki)
{
	size_t sum = strlen(id) + strlen(sourcecode) + (users ? strlen(users) : 0) +
		     (hotkey ? strlen(hotkey) : 0) + (prefix ? strlen(prefix) : 0);

	for (int i = 0; i < argc; i++)
		sum += strlen(args[i]);
	for (char **c = classes; c && *c; c++)
		sum += strlen(*c);
	return sum == (size_t)-1 || submenu || blsuki ? GRUB_ERR_BAD_ARGUMENT : GRUB_ERR_NONE;
}

static int sign(int v)
{
	return (v > 0) - (v < 0);
}

/* The first two lines of the input as entry file names. */
static void names(char a[256], char b[256])
{
	const char *p = (const char *)input, *end = p + input_size;
	char *out[2] = { a, b };

	for (int n = 0; n < 2; n++) {
		size_t len = 0;

		while (p < end && *p != '\n' && len + sizeof(".conf") < 256)
			out[n][len++] = *p == '\0' ? '_' : *p, p++;
		while (p < end && *p != '\n')
			p++;
		if (p < end)
			p++;
		strcpy(out[n] + len, ".conf");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bls_entry *e, *x, *y;
	char a[256], b[256];

	input = data;
	input_size = size;
	grub_errno = GRUB_ERR_NONE;

	e = read_entry("(fuzz)/loader/entries/entry.conf", "entry.conf");
	if (e) {
		if (e->kernel)
			add_menu_entry(e);
		entry_free(e);
	}
	grub_errno = GRUB_ERR_NONE;

	names(a, b);
	x = read_entry("(fuzz)/a", a);
	y = read_entry("(fuzz)/b", b);
	if (x && y && sign(entry_cmp(x, y)) != -sign(entry_cmp(y, x)))
		__builtin_trap();
	if (x && entry_cmp(x, x) != 0)
		__builtin_trap();
	if (x)
		entry_free(x);
	if (y)
		entry_free(y);
	grub_errno = GRUB_ERR_NONE;
	return 0;
}
