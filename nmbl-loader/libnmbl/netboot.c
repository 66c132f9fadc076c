/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * Whether the firmware started nmbl from the network (PXE, HTTP Boot), and
 * from which card: the Boot#### option it started (BootCurrent) names the
 * card by its Ethernet address, and LoaderDevicePartUUID, which
 * systemd-stub sets for a start from a disk's partition, is absent.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nmbl-private.h"

NMBL_EXPORT struct nmbl_network_boot *nmbl_network_boot_free(struct nmbl_network_boot *boot)
{
	if (boot) {
		free(boot->uri);
		free(boot);
	}
	return NULL;
}

NMBL_EXPORT int nmbl_get_network_boot(struct nmbl_ctx *ctx, struct nmbl_network_boot **ret)
{
	_cleanup_(nmbl_load_option_freep) struct nmbl_load_option *opt = NULL;
	_cleanup_free_ char *partuuid = NULL;
	struct nmbl_network_boot *boot;
	unsigned current;
	int r;

	if (!ctx || !ret)
		return -EINVAL;
	r = nmbl_get_loader_device_partuuid(ctx, &partuuid);
	if (r == 0)
		return -ENOENT;
	r = nmbl_get_boot_current(ctx, &current);
	if (r < 0)
		return r;
	r = nmbl_read_boot_option(ctx, current, &opt);
	if (r < 0)
		return r;
	boot = calloc(1, sizeof(*boot));
	if (!boot)
		return -ENOMEM;
	if (!nmbl_load_option_get_mac(opt, boot->mac)) {
		free(boot);
		return -ENOENT;
	}
	boot->ip_version = nmbl_load_option_get_ip_version(opt);
	boot->vlan = nmbl_load_option_get_vlan(opt);
	if (nmbl_load_option_get_uri(opt) && !(boot->uri = strdup(nmbl_load_option_get_uri(opt)))) {
		free(boot);
		return -ENOMEM;
	}
	*ret = boot;
	return 0;
}

static int compare_cards(const void *a, const void *b)
{
	return strcmp(((const struct nmbl_network_card *)a)->ifname,
		      ((const struct nmbl_network_card *)b)->ifname);
}

/* A card's address as /sys/class/net/IF/address writes it, "52:54:00:…". */
static bool parse_mac(const char *text, unsigned char mac[6])
{
	unsigned v[6];
	char end;

	if (sscanf(text, "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
		   &end) != 6)
		return false;
	for (int i = 0; i < 6; i++)
		mac[i] = (unsigned char)v[i];
	return true;
}

NMBL_EXPORT int nmbl_list_network_cards(struct nmbl_ctx *ctx, struct nmbl_network_card **ret,
					size_t *ret_n)
{
	_cleanup_free_ char *dir = NULL;
	struct nmbl_network_card *cards = NULL;
	size_t n = 0;
	struct dirent *de;
	DIR *d;

	if (!ctx || !ret || !ret_n)
		return -EINVAL;
	dir = nmbl_path(ctx, "/sys/class/net");
	if (!dir)
		return -ENOMEM;
	d = opendir(dir);
	if (!d && errno != ENOENT)
		return -errno;
	while (d && (de = readdir(d))) {
		_cleanup_free_ char *base = NULL, *device = NULL;
		char type[16], address[64];
		struct nmbl_network_card *more;
		struct stat st;

		if (de->d_name[0] == '.' || strlen(de->d_name) >= sizeof(cards->ifname))
			continue;
		/* A card of the machine's (a bus device below it: not lo, a
		 * bridge, a VLAN or a tunnel), speaking Ethernet (ARPHRD_ETHER). */
		if (asprintf(&base, "/sys/class/net/%s/device", de->d_name) < 0)
			continue;
		device = nmbl_path(ctx, base);
		if (!device || stat(device, &st) < 0)
			continue;
		free(base);
		base = NULL;
		if (asprintf(&base, "/sys/class/net/%s/type", de->d_name) < 0 ||
		    nmbl_read_small(ctx, base, type, sizeof(type)) < 0 || strcmp(type, "1") != 0)
			continue;
		free(base);
		base = NULL;
		if (asprintf(&base, "/sys/class/net/%s/address", de->d_name) < 0 ||
		    nmbl_read_small(ctx, base, address, sizeof(address)) < 0)
			continue;
		more = realloc(cards, (n + 1) * sizeof(*cards));
		if (!more) {
			free(cards);
			closedir(d);
			return -ENOMEM;
		}
		cards = more;
		memset(&cards[n], 0, sizeof(cards[n]));
		strcpy(cards[n].ifname, de->d_name);
		if (parse_mac(address, cards[n].mac))
			n++;
	}
	if (d)
		closedir(d);
	if (n)
		qsort(cards, n, sizeof(*cards), compare_cards);
	*ret = cards;
	*ret_n = n;
	return 0;
}

NMBL_EXPORT int nmbl_find_network_interface(struct nmbl_ctx *ctx, const unsigned char mac[6],
					    char **ret)
{
	_cleanup_free_ struct nmbl_network_card *cards = NULL;
	size_t n = 0;
	int r;

	if (!ctx || !mac || !ret)
		return -EINVAL;
	/* A VLAN's interface has its card's address too, but no device. */
	r = nmbl_list_network_cards(ctx, &cards, &n);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		if (memcmp(cards[i].mac, mac, 6) == 0)
			return (*ret = strdup(cards[i].ifname)) ? 0 : -ENOMEM;
	return -ENODEV;
}
