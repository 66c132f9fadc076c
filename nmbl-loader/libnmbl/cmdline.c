/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * A kernel command line split into its parameters the way the kernel splits
 * it (lib/cmdline.c's next_arg): words separated by white space, where a
 * double quote protects white space up to the next one.  Each parameter
 * keeps its text as written (quotes included, so two lines compare as the
 * kernel would receive them) and its key without quotes.
 */
#include <string.h>

#include "nmbl-private.h"

static bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
	       c == '\v';
}

/* The key of WORD: the text before its first '=', quotes dropped, as the
 * kernel's next_arg finds it. */
static char *key_of(const char *word, size_t len)
{
	char *key = malloc(len + 1), *k = key;

	if (!key)
		return NULL;
	for (size_t i = 0; i < len && word[i] != '='; i++)
		if (word[i] != '"')
			*k++ = word[i];
	*k = '\0';
	return key;
}

int nmbl_cmdline_parse(const char *buf, size_t len, struct nmbl_cmdline **ret)
{
	struct nmbl_cmdline *c;
	size_t i = 0;

	if (len > NMBL_CMDLINE_MAX)
		return -E2BIG;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	while (i < len && buf[i]) {
		struct nmbl_param *p;
		bool quoted = false;
		size_t start;

		while (i < len && buf[i] && blank(buf[i]))
			i++;
		if (i >= len || !buf[i])
			break;
		start = i;
		for (; i < len && buf[i] && (quoted || !blank(buf[i])); i++)
			if (buf[i] == '"')
				quoted = !quoted;
		p = realloc(c->params, (c->n + 1) * sizeof(*p));
		if (!p)
			goto oom;
		c->params = p;
		p += c->n;
		p->word = strndup(buf + start, i - start);
		p->key = key_of(buf + start, i - start);
		c->n++;
		if (!p->word || !p->key)
			goto oom;
	}
	*ret = c;
	return 0;
oom:
	nmbl_cmdline_free(c);
	return -ENOMEM;
}

struct nmbl_cmdline *nmbl_cmdline_free(struct nmbl_cmdline *c)
{
	if (!c)
		return NULL;
	for (size_t i = 0; i < c->n; i++) {
		free(c->params[i].word);
		free(c->params[i].key);
	}
	free(c->params);
	free(c);
	return NULL;
}

/* Parameter KEY (its last occurrence, as most readers take it); NULL when
 * absent. */
const struct nmbl_param *nmbl_cmdline_find(const struct nmbl_cmdline *c,
					   const char *key)
{
	for (size_t i = c->n; i-- > 0;)
		if (strcmp(c->params[i].key, key) == 0)
			return &c->params[i];
	return NULL;
}

char *nmbl_param_value(const struct nmbl_param *p)
{
	const char *eq = strchr(p->word, '=');
	char *v, *o;

	if (!eq)
		return strdup("");
	v = o = malloc(strlen(eq));
	if (!v)
		return NULL;
	for (const char *s = eq + 1; *s; s++)
		if (*s != '"')
			*o++ = *s;
	*o = '\0';
	return v;
}

/* The last parameter named KEY on CMDLINE: its value, or (AS_WRITTEN) its
 * text as written, malloc'ed. */
static int get_param(const char *cmdline, const char *key, bool as_written, char **ret)
{
	_cleanup_cmdline_ struct nmbl_cmdline *c = NULL;
	const struct nmbl_param *p;
	char *v;
	int r;

	r = nmbl_cmdline_parse(cmdline, strlen(cmdline), &c);
	if (r < 0)
		return r;
	p = nmbl_cmdline_find(c, key);
	if (!p)
		return -ENOENT;
	v = as_written ? strdup(p->word) : nmbl_param_value(p);
	if (!v)
		return -ENOMEM;
	*ret = v;
	return 0;
}

NMBL_EXPORT int nmbl_cmdline_get_value(const char *cmdline, const char *key,
				       char **ret)
{
	if (!cmdline || !key || !ret)
		return -EINVAL;
	return get_param(cmdline, key, false, ret);
}

NMBL_EXPORT int nmbl_cmdline_get_param(const char *cmdline, const char *key,
				       char **ret)
{
	if (!cmdline || !key || !ret)
		return -EINVAL;
	return get_param(cmdline, key, true, ret);
}

NMBL_EXPORT int nmbl_cmdline_remove(const char *cmdline, const char *key, char **ret)
{
	_cleanup_cmdline_ struct nmbl_cmdline *c = NULL;
	char *out, *o;
	int r;

	if (!cmdline || !key || !ret)
		return -EINVAL;
	r = nmbl_cmdline_parse(cmdline, strlen(cmdline), &c);
	if (r < 0)
		return r;
	out = o = malloc(strlen(cmdline) + 1);
	if (!out)
		return -ENOMEM;
	*o = '\0';
	for (size_t i = 0; i < c->n; i++) {
		if (strcmp(c->params[i].key, key) == 0)
			continue;
		if (o > out)
			*o++ = ' ';
		o = stpcpy(o, c->params[i].word);
	}
	*ret = out;
	return 0;
}

NMBL_EXPORT int nmbl_get_kernel_cmdline(struct nmbl_ctx *ctx, char **ret_cmdline)
{
	char *text;
	size_t len;
	int r;

	if (!ctx || !ret_cmdline)
		return -EINVAL;
	r = nmbl_read_file(ctx, "/proc/cmdline", NMBL_CMDLINE_MAX, &text, &len);
	if (r < 0)
		return r;
	if (len > 0 && text[len - 1] == '\n')
		text[len - 1] = '\0';
	*ret_cmdline = text;
	return 0;
}
